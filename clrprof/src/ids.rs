//! Typed runtime IDs and metadata tokens.
//!
//! The profiling API hands out opaque, pointer-sized IDs (`FunctionID`,
//! `ClassID`, ...). They are all `UINT_PTR` in `corprof.idl`, so nothing in C
//! stops a `ClassID` from being passed where a `FunctionID` belongs. Here each
//! kind is its own type.
//!
//! # Lifetimes
//!
//! An ID handed to a callback is only guaranteed valid for as long as the
//! runtime's rules say (BOTR *Profiling*, "Lifetime & Stability"):
//!
//! | ID | valid |
//! |---|---|
//! | [`ObjectId`] | until the next garbage collection starts (objects move) |
//! | [`FunctionId`] | until its class is unloaded ([`ClassUnloadStarted`](crate::callback::Profiler::class_unload_started)) |
//! | [`ClassId`] | from `ClassLoadFinished` until `ClassUnloadStarted` |
//! | [`ModuleId`] | from `ModuleLoadFinished` until `ModuleUnloadStarted` |
//! | [`AssemblyId`] | from `AssemblyLoadFinished` until `AssemblyUnloadStarted` |
//! | [`AppDomainId`] | from `AppDomainCreationFinished` until `AppDomainShutdownStarted` |
//! | [`ThreadId`] | from `ThreadCreated` until `ThreadDestroyed` |
//! | [`GcHandleId`] | from `HandleCreated` until `HandleDestroyed` |
//! | [`ReJitId`] | while the ReJIT version exists |
//!
//! The scoped forms (`FunctionId<'a>`) borrow the scope that produced them
//! (usually one callback invocation), the way `jni`'s `JObject<'local>` borrows
//! its native frame: they cannot be stored in the profiler struct. To keep an
//! ID longer, convert it with [`FunctionId::to_raw`] into the lifetime-free
//! [`RawFunctionId`] (`Send + Sync + Hash`, usable as a map key). Turning a raw
//! ID back into a scoped one is `unsafe` ([`RawFunctionId::assume_valid`]):
//! the caller promises that the validity rule above still holds, because
//! handing the runtime a stale ID is undefined behaviour inside the runtime.

use core::fmt;
use core::marker::PhantomData;

/// A scoped (typed, lifetime-bound) ID and its lifetime-free raw form.
pub trait ScopedId: Copy {
    /// The raw form (e.g. [`RawModuleId`] for [`ModuleId`]).
    type Raw: Copy + Eq + core::hash::Hash + fmt::Debug + Send + Sync + 'static;
}

macro_rules! runtime_ids {
    ($(
        $(#[$doc:meta])*
        $name:ident / $raw:ident = $sys:ident, $rule:literal;
    )*) => {$(
        $(#[$doc])*
        ///
        /// Scoped form: borrows the callback (or call) that produced it. See the
        /// [module docs](self) for the validity rule of this kind of ID.
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name<'a> {
            raw: usize,
            _scope: PhantomData<&'a ()>,
        }

        impl<'a> $name<'a> {
            /// Wraps a value received from the runtime.
            ///
            /// # Safety
            #[doc = concat!("The value must be a `", stringify!($sys), "` the runtime handed out that is valid for `'a`: ", $rule, ".")]
            #[inline]
            pub const unsafe fn from_sys(raw: clrprof_sys::$sys) -> Self {
                Self { raw, _scope: PhantomData }
            }

            /// The value to pass to the raw API.
            #[inline]
            pub const fn as_sys(self) -> clrprof_sys::$sys {
                self.raw
            }

            /// Detaches the ID from its scope so it can be stored, sent to
            /// another thread or used as a map key.
            #[inline]
            pub const fn to_raw(self) -> $raw {
                $raw(self.raw)
            }

            /// `true` for the null ID (the runtime's "none" value, e.g. a
            /// `ClassID` of an array element type that has none).
            #[inline]
            pub const fn is_null(self) -> bool {
                self.raw == 0
            }
        }

        impl fmt::Debug for $name<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:#x})"), self.raw)
            }
        }

        $(#[$doc])*
        ///
        /// Lifetime-free form: can be stored and shared, but not passed to the
        /// runtime until it is turned back into the scoped form with
        #[doc = concat!("[`", stringify!($raw), "::assume_valid`].")]
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $raw(pub usize);

        impl $raw {
            /// Re-attaches the ID to a scope so it can be passed to the runtime.
            ///
            /// # Safety
            #[doc = concat!("The runtime's validity rule must still hold: ", $rule, ". ")]
            /// Passing a stale ID to the runtime is undefined behaviour inside the
            /// runtime (it dereferences IDs without checking).
            #[inline]
            pub const unsafe fn assume_valid<'a>(self) -> $name<'a> {
                $name { raw: self.0, _scope: PhantomData }
            }
        }

        impl fmt::Debug for $raw {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($raw), "({:#x})"), self.0)
            }
        }

        impl From<$raw> for usize {
            fn from(id: $raw) -> usize {
                id.0
            }
        }

        impl ScopedId for $name<'_> {
            type Raw = $raw;
        }

        impl<'a> From<$name<'a>> for $raw {
            fn from(id: $name<'a>) -> Self {
                id.to_raw()
            }
        }
    )*};
}

runtime_ids! {
    /// A function (method instantiation) known to the runtime: `FunctionID`.
    FunctionId / RawFunctionId = FunctionID, "valid until its class is unloaded (ClassUnloadStarted)";
    /// A loaded type (possibly a generic instantiation): `ClassID`.
    ClassId / RawClassId = ClassID, "valid from ClassLoadFinished until ClassUnloadStarted";
    /// A loaded module: `ModuleID`.
    ModuleId / RawModuleId = ModuleID, "valid from ModuleLoadFinished until ModuleUnloadStarted";
    /// A loaded assembly: `AssemblyID`.
    AssemblyId / RawAssemblyId = AssemblyID, "valid from AssemblyLoadFinished until AssemblyUnloadStarted";
    /// An application domain: `AppDomainID`.
    AppDomainId / RawAppDomainId = AppDomainID, "valid from AppDomainCreationFinished until AppDomainShutdownStarted";
    /// A managed thread: `ThreadID`.
    ThreadId / RawThreadId = ThreadID, "valid from ThreadCreated until ThreadDestroyed";
    /// A managed object: `ObjectID`, its address in the GC heap.
    ObjectId / RawObjectId = ObjectID, "valid only until the next garbage collection starts, since objects move";
    /// A GC handle: `GCHandleID`.
    GcHandleId / RawGcHandleId = GCHandleID, "valid from HandleCreated until HandleDestroyed";
    /// A ReJIT version of a method: `ReJITID`.
    ReJitId / RawReJitId = ReJITID, "valid while that ReJIT version exists (until it is reverted and its class unloaded)";
    /// A COM+ context (remoting era): `ContextID`.
    ContextId / RawContextId = ContextID, "valid while the context exists";
}

macro_rules! metadata_tokens {
    ($(
        $(#[$doc:meta])*
        $name:ident = $table:ident;
    )*) => {$(
        $(#[$doc])*
        ///
        /// Metadata tokens are module-relative and stable for the module's
        /// lifetime; the high byte is the table
        #[doc = concat!("(`", stringify!($table), "`).")]
        #[repr(transparent)]
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub u32);

        impl $name {
            /// The table this kind of token indexes (`CorTokenType`).
            pub const TABLE: u32 = clrprof_sys::$table;

            /// Wraps a raw token; `None` when it is not of this table.
            pub const fn new(token: u32) -> Option<Self> {
                if token & 0xff00_0000 == Self::TABLE {
                    Some(Self(token))
                } else {
                    None
                }
            }

            /// Builds the token from its row number (RID).
            pub const fn from_rid(rid: u32) -> Self {
                Self(Self::TABLE | (rid & 0x00ff_ffff))
            }

            /// Row number in the table (RID); 0 is the nil token.
            pub const fn rid(self) -> u32 {
                self.0 & 0x00ff_ffff
            }

            /// `true` for the nil token of this table (RID 0).
            pub const fn is_nil(self) -> bool {
                self.rid() == 0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:#010x})"), self.0)
            }
        }

        impl From<$name> for u32 {
            fn from(t: $name) -> u32 {
                t.0
            }
        }
    )*};
}

metadata_tokens! {
    /// A module token (`mdModule`).
    MdModule = mdtModule;
    /// A type reference (`mdTypeRef`).
    MdTypeRef = mdtTypeRef;
    /// A type definition (`mdTypeDef`).
    MdTypeDef = mdtTypeDef;
    /// A field definition (`mdFieldDef`).
    MdFieldDef = mdtFieldDef;
    /// A method definition (`mdMethodDef`).
    MdMethodDef = mdtMethodDef;
    /// A parameter definition (`mdParamDef`).
    MdParamDef = mdtParamDef;
    /// An interface implementation (`mdInterfaceImpl`).
    MdInterfaceImpl = mdtInterfaceImpl;
    /// A member reference (`mdMemberRef`).
    MdMemberRef = mdtMemberRef;
    /// A custom attribute (`mdCustomAttribute`).
    MdCustomAttribute = mdtCustomAttribute;
    /// A permission set (`mdPermission`).
    MdPermission = mdtPermission;
    /// A stand-alone signature (`mdSignature`).
    MdSignature = mdtSignature;
    /// An event (`mdEvent`).
    MdEvent = mdtEvent;
    /// A property (`mdProperty`).
    MdProperty = mdtProperty;
    /// A module reference (`mdModuleRef`).
    MdModuleRef = mdtModuleRef;
    /// A type specification (`mdTypeSpec`).
    MdTypeSpec = mdtTypeSpec;
    /// An assembly (`mdAssembly`).
    MdAssembly = mdtAssembly;
    /// An assembly reference (`mdAssemblyRef`).
    MdAssemblyRef = mdtAssemblyRef;
    /// A file (`mdFile`).
    MdFile = mdtFile;
    /// An exported type (`mdExportedType`).
    MdExportedType = mdtExportedType;
    /// A manifest resource (`mdManifestResource`).
    MdManifestResource = mdtManifestResource;
    /// A generic parameter (`mdGenericParam`).
    MdGenericParam = mdtGenericParam;
    /// A method specification (`mdMethodSpec`).
    MdMethodSpec = mdtMethodSpec;
    /// A generic parameter constraint (`mdGenericParamConstraint`).
    MdGenericParamConstraint = mdtGenericParamConstraint;
    /// A user string (`mdString`).
    MdString = mdtString;
}

/// Any metadata token, of whichever table (`mdToken`).
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MdToken(pub u32);

impl MdToken {
    /// The table of this token (`TypeFromToken`).
    pub const fn table(self) -> u32 {
        self.0 & 0xff00_0000
    }
    /// Row number (`RidFromToken`).
    pub const fn rid(self) -> u32 {
        self.0 & 0x00ff_ffff
    }
}

impl fmt::Debug for MdToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MdToken({:#010x})", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_round_trip_keeps_value() {
        // SAFETY: [test-fake] test value, never passed to a runtime.
        let f = unsafe { FunctionId::from_sys(0x1234) };
        let raw = f.to_raw();
        assert_eq!(raw, RawFunctionId(0x1234));
        // SAFETY: [test-fake] as above.
        let back = unsafe { raw.assume_valid() };
        assert_eq!(back, f);
        assert_eq!(format!("{f:?}"), "FunctionId(0x1234)");
    }

    #[test]
    fn tokens_check_their_table() {
        assert_eq!(
            MdMethodDef::new(0x0600_0001),
            Some(MdMethodDef(0x0600_0001))
        );
        assert_eq!(MdMethodDef::new(0x0200_0001), None);
        assert_eq!(MdTypeDef::from_rid(5).0, 0x0200_0005);
        assert!(MdTypeDef(0x0200_0000).is_nil());
        assert_eq!(MdToken(0x0A00_0003).table(), clrprof_sys::mdtMemberRef);
    }

    #[test]
    fn raw_ids_are_send_sync_hash() {
        fn check<T: Send + Sync + core::hash::Hash + Eq + 'static>() {}
        check::<RawFunctionId>();
        check::<RawObjectId>();
        check::<MdTypeDef>();
    }
}
