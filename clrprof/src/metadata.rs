//! Safe access to a module's metadata (`IMetaDataImport`, `IMetaDataImport2`).
//!
//! Enough to name and describe things: type, method and field names with
//! their enclosing types, and signature blobs (decoded in [`crate::signature`]
//! when that module is present). Strings use the caller-allocated buffer
//! protocol of [`crate::buffer`].

use crate::buffer::{fill_string, to_wide};
use crate::error::{check, check_success, Error, KnownHresult, Result};
use crate::ids::*;
use crate::signature::{MethodSig, SigFormatter, TokenNames, TypeSig};
use clrprof_sys as sys;
use core::marker::PhantomData;
use windows_core::{IUnknown, Interface};

/// A module's metadata, read side (`IMetaDataImport`, plus `IMetaDataImport2`
/// and `IMetaDataAssemblyImport` when the runtime offers them).
///
/// It borrows the module it reads (`'m`, the lifetime of the
/// [`ModuleId`] it was opened from): the runtime's metadata object reads the
/// module's image, which a collectible module takes with it when it is
/// unloaded, and the signature blobs and names it hands out point into it.
/// So a `MetaDataImport` cannot be kept past the module's scope (in the
/// profiler's struct, a static, another callback); a profiler that needs a
/// module's metadata again opens it again
/// ([`ProfilerInfo::module_metadata`](crate::ProfilerInfo::module_metadata))
/// from a scope that holds the module.
#[derive(Clone)]
pub struct MetaDataImport<'m> {
    import: sys::IMetaDataImport,
    import2: Option<sys::IMetaDataImport2>,
    assembly: Option<sys::IMetaDataAssemblyImport>,
    _module: PhantomData<ModuleId<'m>>,
}

/// An assembly's identity (`GetAssemblyProps`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssemblyProps {
    /// Simple name, e.g. `System.Private.CoreLib`.
    pub name: String,
    /// Version `major.minor.build.revision`.
    pub version: (u16, u16, u16, u16),
    /// `CorAssemblyFlags`.
    pub flags: u32,
}

/// `GetMemberRefProps`: a member reference's parent, name and signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRefProps {
    /// The parent (TypeRef, TypeDef, TypeSpec, ModuleRef or MethodDef).
    pub parent: MdToken,
    /// The member's name.
    pub name: String,
    /// The signature blob.
    pub signature: Vec<u8>,
}

// SAFETY: [free-threaded] the runtime's metadata import objects are free-threaded for reading
// (the profiling API hands them out to be used from any callback thread);
// COM reference counting is thread-safe. Moving one to another thread does
// not extend its use past 'm: the lifetime goes with it, so only a thread
// scoped inside the module's scope can hold it.
unsafe impl Send for MetaDataImport<'_> {}
// SAFETY: [free-threaded] &MetaDataImport only calls the import methods, which the runtime's
// metadata implementation (RegMeta) serializes internally, so calls from
// several threads at once are allowed (within 'm, as for Send).
unsafe impl Sync for MetaDataImport<'_> {}

/// `GetTypeDefProps`: a type definition's name, flags and base type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TypeDefProps {
    /// Full name as stored in metadata: `Namespace.Name` for top-level types,
    /// just `Name` for nested types (generic arity kept, e.g. ``List`1``).
    pub name: String,
    /// `CorTypeAttr` flags.
    pub flags: u32,
    /// The base type token (TypeDef, TypeRef or TypeSpec; nil for none).
    pub extends: MdToken,
}

/// `GetMethodProps`: a method definition's name, owner, flags and signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodProps {
    /// The type that defines it.
    pub class: MdTypeDef,
    /// Its name.
    pub name: String,
    /// `CorMethodAttr` flags.
    pub attributes: u32,
    /// Its signature blob.
    pub signature: Vec<u8>,
    /// RVA of its IL body (0 for none).
    pub rva: u32,
    /// `CorMethodImpl` flags.
    pub impl_flags: u32,
}

// provenance: token-module
impl<'m> MetaDataImport<'m> {
    /// Wraps a metadata object returned by the runtime.
    ///
    /// # Safety
    /// `unknown` is a metadata object (`GetModuleMetaData`,
    /// `GetTokenAndMetaDataFromFunction`, or a dispenser's `OpenScope`)
    /// whose module, or image, stays loaded for `'m`.
    pub unsafe fn from_unknown(unknown: &IUnknown) -> Result<Self> {
        let import: sys::IMetaDataImport = unknown
            .cast()
            .map_err(|e| Error::runtime(e.code(), "QueryInterface(IMetaDataImport)"))?;
        let import2 = unknown.cast().ok();
        let assembly = unknown.cast().ok();
        Ok(MetaDataImport {
            import,
            import2,
            assembly,
            _module: PhantomData,
        })
    }

    /// The raw `IMetaDataImport`.
    pub fn raw(&self) -> &sys::IMetaDataImport {
        &self.import
    }

    /// The raw `IMetaDataImport2`, when available.
    pub fn raw2(&self) -> Option<&sys::IMetaDataImport2> {
        self.import2.as_ref()
    }

    /// `GetTypeDefProps`.
    pub fn type_def_props(&self, type_def: MdTypeDef) -> Result<TypeDefProps> {
        let (mut flags, mut extends) = (0u32, 0u32);
        let name = fill_string("IMetaDataImport::GetTypeDefProps", |cap, needed, buf| {
            // SAFETY: [buffer-protocol, plain-call] `buf` has `cap` WCHARs; other out pointers are locals. A
            // wrong token is reported by HRESULT, not undefined behaviour.
            unsafe {
                self.import
                    .GetTypeDefProps(type_def.0, buf, cap, needed, &mut flags, &mut extends)
            }
        })?;
        Ok(TypeDefProps {
            name,
            flags,
            extends: MdToken(extends),
        })
    }

    /// `GetNestedClassProps`: the enclosing type of a nested type, or `None`
    /// for a top-level type.
    pub fn enclosing_class(&self, type_def: MdTypeDef) -> Result<Option<MdTypeDef>> {
        let mut enclosing = 0u32;
        // SAFETY: [plain-call] valid out pointer; the metadata checks the token.
        let hr = unsafe { self.import.GetNestedClassProps(type_def.0, &mut enclosing) };
        if hr.0 == crate::error::KnownHresult::CLDB_E_RECORD_NOTFOUND as i32 {
            return Ok(None);
        }
        check(hr, "IMetaDataImport::GetNestedClassProps")?;
        Ok(MdTypeDef::new(enclosing).filter(|t| !t.is_nil()))
    }

    /// The type's name with namespace and enclosing types:
    /// `Namespace.Outer+Inner` (generic arity as in metadata, e.g. ``List`1``).
    pub fn type_name(&self, type_def: MdTypeDef) -> Result<String> {
        let mut parts = vec![self.type_def_props(type_def)?.name];
        let mut current = type_def;
        // Nesting depth is bounded to survive corrupt (cyclic) metadata.
        for _ in 0..64 {
            match self.enclosing_class(current)? {
                Some(outer) => {
                    parts.push(self.type_def_props(outer)?.name);
                    current = outer;
                }
                None => break,
            }
        }
        parts.reverse();
        Ok(parts.join("+"))
    }

    /// `GetMethodProps`.
    pub fn method_props(&self, method: MdMethodDef) -> Result<MethodProps> {
        let (mut class, mut attrs, mut sig, mut sig_len, mut rva, mut impl_flags) =
            (0u32, 0u32, core::ptr::null::<u8>(), 0u32, 0u32, 0u32);
        let name = fill_string("IMetaDataImport::GetMethodProps", |cap, needed, buf| {
            // SAFETY: [buffer-protocol, plain-call] `buf` has `cap` WCHARs; other out pointers are locals.
            unsafe {
                self.import.GetMethodProps(
                    method.0,
                    &mut class,
                    buf,
                    cap,
                    needed,
                    &mut attrs,
                    &mut sig,
                    &mut sig_len,
                    &mut rva,
                    &mut impl_flags,
                )
            }
        })?;
        let signature = if sig.is_null() {
            Vec::new()
        } else {
            // SAFETY: [module-lifetime] the metadata returns a pointer to `sig_len` bytes of its
            // signature heap, in the module's image: valid while the metadata
            // object lives (we hold it) and the module is loaded ('m); copied
            // at once.
            unsafe { core::slice::from_raw_parts(sig, sig_len as usize) }.to_vec()
        };
        Ok(MethodProps {
            class: MdTypeDef(class),
            name,
            attributes: attrs,
            signature,
            rva,
            impl_flags,
        })
    }

    /// `Namespace.Type+Nested::Method` for a method definition.
    pub fn method_name(&self, method: MdMethodDef) -> Result<String> {
        let props = self.method_props(method)?;
        if props.class.is_nil() {
            return Ok(props.name);
        }
        Ok(format!("{}::{}", self.type_name(props.class)?, props.name))
    }

    /// `GetTypeRefProps`: a type reference's full name and resolution scope.
    pub fn type_ref_props(&self, type_ref: MdTypeRef) -> Result<(String, MdToken)> {
        let mut scope = 0u32;
        let name = fill_string("IMetaDataImport::GetTypeRefProps", |cap, needed, buf| {
            // SAFETY: [buffer-protocol, plain-call] `buf` has `cap` WCHARs; `scope` is a local out value.
            unsafe {
                self.import
                    .GetTypeRefProps(type_ref.0, &mut scope, buf, cap, needed)
            }
        })?;
        Ok((name, MdToken(scope)))
    }

    /// The full name of a TypeDef or TypeRef (nested type references are
    /// resolved through their enclosing TypeRef): `Namespace.Outer+Inner`.
    pub fn type_name_of(&self, token: MdToken) -> Result<String> {
        if token.table() == sys::mdtTypeDef {
            return self.type_name(MdTypeDef(token.0));
        }
        if token.table() != sys::mdtTypeRef {
            return Err(Error::InvalidArgument(
                "type_name_of takes a TypeDef or TypeRef token",
            ));
        }
        let mut parts = Vec::new();
        let mut current = MdTypeRef(token.0);
        for _ in 0..64 {
            let (name, scope) = self.type_ref_props(current)?;
            parts.push(name);
            if scope.table() == sys::mdtTypeRef && scope.rid() != 0 {
                current = MdTypeRef(scope.0);
            } else {
                break;
            }
        }
        parts.reverse();
        Ok(parts.join("+"))
    }

    /// `GetMemberRefProps`.
    pub fn member_ref_props(&self, member_ref: MdMemberRef) -> Result<MemberRefProps> {
        let (mut parent, mut sig, mut len) = (0u32, core::ptr::null::<u8>(), 0u32);
        let name = fill_string("IMetaDataImport::GetMemberRefProps", |cap, needed, buf| {
            // SAFETY: [buffer-protocol, plain-call] `buf` has `cap` WCHARs; the other out values are locals.
            unsafe {
                self.import.GetMemberRefProps(
                    member_ref.0,
                    &mut parent,
                    buf,
                    cap,
                    needed,
                    &mut sig,
                    &mut len,
                )
            }
        })?;
        // SAFETY: [module-lifetime] the metadata returns `len` bytes of its blob heap, alive while we hold it.
        let signature = unsafe { blob(sig, len) };
        Ok(MemberRefProps {
            parent: MdToken(parent),
            name,
            signature,
        })
    }

    /// `GetTypeSpecFromToken`: the signature blob of a TypeSpec.
    pub fn type_spec_blob(&self, type_spec: MdTypeSpec) -> Result<Vec<u8>> {
        let (mut sig, mut len) = (core::ptr::null::<u8>(), 0u32);
        check(
            // SAFETY: [plain-call] valid out pointers; the metadata checks the token.
            unsafe {
                self.import
                    .GetTypeSpecFromToken(type_spec.0, &mut sig, &mut len)
            },
            "IMetaDataImport::GetTypeSpecFromToken",
        )?;
        // SAFETY: [module-lifetime] `len` bytes of the blob heap, alive while we hold the metadata.
        Ok(unsafe { blob(sig, len) })
    }

    /// `GetFieldProps`: a field's name, owner, flags and signature.
    pub fn field_props(&self, field: MdFieldDef) -> Result<(String, MdTypeDef, u32, Vec<u8>)> {
        let (mut class, mut attrs, mut sig, mut len, mut cplus, mut value, mut value_len) = (
            0u32,
            0u32,
            core::ptr::null::<u8>(),
            0u32,
            0u32,
            core::ptr::null::<core::ffi::c_void>(),
            0u32,
        );
        let name = fill_string("IMetaDataImport::GetFieldProps", |cap, needed, buf| {
            // SAFETY: [buffer-protocol, plain-call] `buf` has `cap` WCHARs; the other out values are locals.
            unsafe {
                self.import.GetFieldProps(
                    field.0,
                    &mut class,
                    buf,
                    cap,
                    needed,
                    &mut attrs,
                    &mut sig,
                    &mut len,
                    &mut cplus,
                    &mut value,
                    &mut value_len,
                )
            }
        })?;
        // SAFETY: [module-lifetime] `len` bytes of the blob heap, alive while we hold the metadata.
        Ok((name, MdTypeDef(class), attrs, unsafe { blob(sig, len) }))
    }

    /// `GetCustomAttributeByName`: the raw value blob of the custom attribute
    /// named `name` (e.g. `System.ObsoleteAttribute`) on `owner`, or `None`.
    pub fn custom_attribute(&self, owner: MdToken, name: &str) -> Result<Option<Vec<u8>>> {
        let wide = to_wide(name);
        let (mut data, mut len) = (core::ptr::null::<core::ffi::c_void>(), 0u32);
        // SAFETY: [nul-terminated, plain-call] NUL-terminated name; valid out pointers.
        let hr = check_success(
            unsafe {
                self.import
                    .GetCustomAttributeByName(owner.0, wide.as_ptr(), &mut data, &mut len)
            },
            "IMetaDataImport::GetCustomAttributeByName",
        )?;
        if hr.0 == KnownHresult::S_FALSE as i32 || data.is_null() {
            return Ok(None);
        }
        // SAFETY: [module-lifetime] `len` bytes of the blob heap, alive while we hold the metadata.
        Ok(Some(unsafe { blob(data.cast(), len) }))
    }

    /// The assembly this module's metadata belongs to (`GetAssemblyFromScope`
    /// + `GetAssemblyProps`).
    pub fn assembly_props(&self) -> Result<AssemblyProps> {
        let asm = self.assembly.as_ref().ok_or(Error::Runtime {
            hr: windows_core::HRESULT(KnownHresult::E_NOINTERFACE as i32),
            call: "QueryInterface(IMetaDataAssemblyImport)",
        })?;
        let mut token = 0u32;
        check(
            // SAFETY: [plain-call] valid out pointer.
            unsafe { asm.GetAssemblyFromScope(&mut token) },
            "IMetaDataAssemblyImport::GetAssemblyFromScope",
        )?;
        let (mut key, mut key_len, mut hash, mut flags) =
            (core::ptr::null::<core::ffi::c_void>(), 0u32, 0u32, 0u32);
        // SAFETY: [ffi-abi] ASSEMBLYMETADATA is plain data (integers and nullable
        // pointers); all-zero is its "no arrays requested" state.
        let mut md: sys::ASSEMBLYMETADATA = unsafe { core::mem::zeroed() };
        let name = fill_string(
            "IMetaDataAssemblyImport::GetAssemblyProps",
            |cap, needed, buf| {
                // The metadata struct's locale/processor/OS arrays are left empty
                // (null with zero counts), so the runtime writes only the version.
                // SAFETY: [ffi-abi] ASSEMBLYMETADATA is plain C data (integers and
                // null pointers with zero counts); all-zero is a valid value.
                md = unsafe { core::mem::zeroed() };
                // SAFETY: [buffer-protocol, plain-call] `buf` has `cap` WCHARs; the other out values are locals.
                unsafe {
                    asm.GetAssemblyProps(
                        token,
                        &mut key,
                        &mut key_len,
                        &mut hash,
                        buf,
                        cap,
                        needed,
                        &mut md,
                        &mut flags,
                    )
                }
            },
        )?;
        Ok(AssemblyProps {
            name,
            version: (
                md.usMajorVersion,
                md.usMinorVersion,
                md.usBuildNumber,
                md.usRevisionNumber,
            ),
            flags,
        })
    }

    /// `EnumTypeRefs`: every type reference (TypeRef row) of the module.
    pub fn type_refs(&self) -> Result<Vec<MdTypeRef>> {
        const CALL: &str = "IMetaDataImport::EnumTypeRefs";
        // The TypeRef table has at most 2^24 rows (a token's row number).
        const MAX_ROWS: usize = 0x00ff_ffff;
        let mut refs = Vec::new();
        let mut handle: sys::HCORENUM = core::ptr::null_mut();
        let mut chunk = [0u32; 64];
        let result = loop {
            let mut n = 0u32;
            // SAFETY: [buffer-protocol, local-memory] `chunk` has room for the 64 tokens the call
            // is told of; `handle` is the enumeration this loop owns (null: the
            // metadata opens one), closed below.
            let hr = unsafe {
                self.import
                    .EnumTypeRefs(&mut handle, chunk.as_mut_ptr(), 64, &mut n)
            };
            if let Err(e) = check(hr, CALL) {
                break Err(e);
            }
            let n = (n as usize).min(chunk.len());
            refs.extend(chunk[..n].iter().map(|&t| MdTypeRef(t)));
            if n == 0 || hr.0 == KnownHresult::S_FALSE as i32 {
                break Ok(refs);
            }
            if refs.len() > MAX_ROWS {
                break Err(Error::InconsistentAnswer { call: CALL });
            }
        };
        if !handle.is_null() {
            // SAFETY: [plain-call] `handle` is the enumeration EnumTypeRefs opened above,
            // closed once.
            unsafe { self.import.CloseEnum(handle) };
        }
        result
    }

    /// `IMetaDataAssemblyImport::GetAssemblyRefProps`: the simple name of an
    /// assembly reference of this module.
    pub fn assembly_ref_name(&self, assembly_ref: MdAssemblyRef) -> Result<String> {
        let asm = self.assembly.as_ref().ok_or(Error::Runtime {
            hr: windows_core::HRESULT(KnownHresult::E_NOINTERFACE as i32),
            call: "QueryInterface(IMetaDataAssemblyImport)",
        })?;
        let (mut key, mut key_len, mut hash, mut hash_len, mut flags) = (
            core::ptr::null::<core::ffi::c_void>(),
            0u32,
            core::ptr::null::<core::ffi::c_void>(),
            0u32,
            0u32,
        );
        fill_string(
            "IMetaDataAssemblyImport::GetAssemblyRefProps",
            |cap, needed, buf| {
                // SAFETY: [ffi-abi] ASSEMBLYMETADATA is plain C data (integers and
                // null pointers with zero counts); all-zero asks for no arrays.
                let mut md: sys::ASSEMBLYMETADATA = unsafe { core::mem::zeroed() };
                // SAFETY: [buffer-protocol, plain-call] `buf` has `cap` WCHARs; the other out values
                // are locals; a token of another table is refused by HRESULT.
                unsafe {
                    asm.GetAssemblyRefProps(
                        assembly_ref.0,
                        &mut key,
                        &mut key_len,
                        buf,
                        cap,
                        needed,
                        &mut md,
                        &mut hash,
                        &mut hash_len,
                        &mut flags,
                    )
                }
            },
        )
    }

    /// `FindTypeDefByName`: a type defined in this module (`Namespace.Name`,
    /// or a nested type's own name with its enclosing type).
    pub fn find_type_def(
        &self,
        name: &str,
        enclosing: Option<MdTypeDef>,
    ) -> Result<Option<MdTypeDef>> {
        let wname = to_wide(name);
        let mut tok = 0u32;
        // SAFETY: [nul-terminated] `wname` is NUL-terminated; read-only lookup.
        let hr = unsafe {
            self.import
                .FindTypeDefByName(wname.as_ptr(), enclosing.map_or(0, |t| t.0), &mut tok)
        };
        match check(hr, "IMetaDataImport::FindTypeDefByName") {
            Ok(()) => Ok(Some(MdTypeDef(tok))),
            Err(e) if e.hresult().0 == KnownHresult::CLDB_E_RECORD_NOTFOUND as i32 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `FindMethod`: a method of `type_def` by name and exact signature.
    pub fn find_method(
        &self,
        type_def: MdTypeDef,
        name: &str,
        signature: &[u8],
    ) -> Result<Option<MdMethodDef>> {
        let wname = to_wide(name);
        let len = u32::try_from(signature.len())
            .map_err(|_| Error::InvalidArgument("a signature longer than 4 GiB"))?;
        let mut tok = 0u32;
        // SAFETY: [nul-terminated, local-memory] `wname` is NUL-terminated and `signature` is `len`
        // readable bytes; read-only lookup.
        let hr = unsafe {
            self.import.FindMethod(
                type_def.0,
                wname.as_ptr(),
                signature.as_ptr(),
                len,
                &mut tok,
            )
        };
        match check(hr, "IMetaDataImport::FindMethod") {
            Ok(()) => Ok(Some(MdMethodDef(tok))),
            Err(e) if e.hresult().0 == KnownHresult::CLDB_E_RECORD_NOTFOUND as i32 => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// A method's readable signature: `int Ns.Type::Method(string, int[])`.
    pub fn method_signature(&self, method: MdMethodDef) -> Result<String> {
        let props = self.method_props(method)?;
        let sig = MethodSig::parse(&props.signature)?;
        Ok(SigFormatter::new(self).method(&self.method_name(method)?, &sig))
    }
}

impl TokenNames for MetaDataImport<'_> {
    fn type_name(&self, token: MdToken) -> Result<String> {
        self.type_name_of(token)
    }
    fn type_spec(&self, token: MdToken) -> Result<Vec<u8>> {
        self.type_spec_blob(MdTypeSpec(token.0))
    }
}

/// Copies a metadata blob.
///
/// # Safety
/// `ptr` is null or points to `len` readable bytes.
unsafe fn blob(ptr: *const u8, len: u32) -> Vec<u8> {
    if ptr.is_null() || len == 0 {
        Vec::new()
    } else {
        // SAFETY: [caller-contract] guaranteed by the caller.
        unsafe { core::slice::from_raw_parts(ptr, len as usize) }.to_vec()
    }
}

/// Parses a field signature (re-exported for convenience).
pub fn field_type(signature: &[u8]) -> Result<TypeSig> {
    TypeSig::parse_field(signature)
}
