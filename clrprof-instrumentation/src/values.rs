//! Typed views of a wrapped call's arguments and return value.
//!
//! The injected code hands the probes the addresses of the argument homes in
//! the wrapped method's frame (`ldarga`) and of the return-value local
//! (`ldloca`): stack memory of a frame that is running the probe's caller,
//! alive for the whole probe call. The probe runs as an unmanaged call, in
//! preemptive mode, so a garbage collection may run on another thread
//! meanwhile: values the GC can move or change (object references, the
//! contents of `ref` arguments and of a value type's `this`, which may point
//! into the heap) are not read. Primitive values are read and written in
//! place, typed by the method's own signature, which the SDK bound to the
//! wrapper when it built the body.

use clrprof::error::{Error, Result};
use clrprof::signature::TypeSig;
use clrprof_sys as sys;

mod sealed {
    pub trait Sealed {}
}

/// A primitive a wrapped method's argument or return value can be read as
/// (and the return value replaced with): `bool`, `char` (as `u16`), the
/// integers, `nint`/`nuint` (`isize`/`usize`), `float` and `double`.
pub trait Primitive: sealed::Sealed + Copy + core::fmt::Debug {
    /// The signature element type (`CorElementType`) of this primitive.
    const ELEMENT: u8;
    /// Reads the value at `p`.
    ///
    /// # Safety
    /// `p` is readable for `size_of::<Self>()` bytes.
    #[doc(hidden)]
    unsafe fn read(p: *const u8) -> Self;
    /// Writes the value at `p`.
    ///
    /// # Safety
    /// `p` is writable for `size_of::<Self>()` bytes.
    #[doc(hidden)]
    unsafe fn write(self, p: *mut u8);
}

macro_rules! primitive {
    ($($t:ty => $e:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Primitive for $t {
            const ELEMENT: u8 = sys::$e as u8;
            #[inline]
            unsafe fn read(p: *const u8) -> Self {
                // SAFETY: [local-memory] this function's contract: `p` is readable for the
                // type's size; it need not be aligned.
                unsafe { core::ptr::read_unaligned(p.cast::<$t>()) }
            }
            #[inline]
            unsafe fn write(self, p: *mut u8) {
                // SAFETY: [local-memory] this function's contract: `p` is writable for the
                // type's size; it need not be aligned.
                unsafe { core::ptr::write_unaligned(p.cast::<$t>(), self) }
            }
        }
    )*};
}

primitive! {
    i8 => ELEMENT_TYPE_I1, u8 => ELEMENT_TYPE_U1,
    i16 => ELEMENT_TYPE_I2, u16 => ELEMENT_TYPE_CHAR,
    i32 => ELEMENT_TYPE_I4, u32 => ELEMENT_TYPE_U4,
    i64 => ELEMENT_TYPE_I8, u64 => ELEMENT_TYPE_U8,
    isize => ELEMENT_TYPE_I, usize => ELEMENT_TYPE_U,
    f32 => ELEMENT_TYPE_R4, f64 => ELEMENT_TYPE_R8,
}

impl sealed::Sealed for bool {}
impl Primitive for bool {
    const ELEMENT: u8 = sys::ELEMENT_TYPE_BOOLEAN as u8;
    #[inline]
    unsafe fn read(p: *const u8) -> Self {
        // SAFETY: [local-memory] the contract gives one readable byte; read as a byte
        // (IL may store any non-zero value in a bool), so no invalid `bool`.
        unsafe { p.read() != 0 }
    }
    #[inline]
    unsafe fn write(self, p: *mut u8) {
        // SAFETY: [local-memory] the contract gives one writable byte.
        unsafe { p.write(u8::from(self)) }
    }
}

/// The element type of a signature type when it is a primitive a
/// [`Primitive`] can stand for (custom modifiers looked through), else 0
/// (`ELEMENT_TYPE_END`, which no primitive has). Computed once per wrapper,
/// so a read compares one byte.
pub(crate) fn element_of(t: &TypeSig) -> u8 {
    element(t).unwrap_or(0)
}

/// See [`element_of`]. `ushort` and `char` share `u16`.
fn element(t: &TypeSig) -> Option<u8> {
    match t {
        TypeSig::Primitive(e) => Some(if u32::from(*e) == sys::ELEMENT_TYPE_U2 {
            sys::ELEMENT_TYPE_CHAR as u8
        } else {
            *e
        }),
        TypeSig::Modified { inner, .. } => element(inner),
        _ => None,
    }
}

/// The error of a read as the wrong type (out of line: reads are hot).
#[cold]
#[inline(never)]
fn mismatch<T: Primitive>(t: &TypeSig, what: &str) -> Error {
    Error::Usage(format!(
        "{what} is {}, not a {}",
        describe(t),
        core::any::type_name::<T>()
    ))
}

fn describe(t: &TypeSig) -> String {
    match t {
        TypeSig::Primitive(e) => clrprof::signature::primitive_name(*e).to_string(),
        TypeSig::Modified { inner, .. } => describe(inner),
        TypeSig::ByRef(_) => "a `ref` (its target may be on the GC heap, which may move)".into(),
        TypeSig::Var(n) => format!("the type's generic parameter !{n}"),
        TypeSig::MVar(n) => format!("the method's generic parameter !!{n}"),
        TypeSig::ValueType(_)
        | TypeSig::GenericInst {
            value_type: true, ..
        } => "a value type (an enum or a struct)".into(),
        _ => "an object reference (the GC may move the object)".into(),
    }
}

/// The arguments of a wrapped call, as the entry handler sees them.
pub struct Arguments<'c> {
    pub(crate) params: &'c [TypeSig],
    /// [`element_of`] each parameter.
    pub(crate) elements: &'c [u8],
    pub(crate) has_this: bool,
    /// The table of argument addresses the injected code built (`this`
    /// first), or null when the wrapper did not ask for arguments.
    pub(crate) table: *const *const u8,
}

impl Arguments<'_> {
    /// The number of declared parameters (`this` not counted).
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// `true` for a method without declared parameters.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// The signature type of parameter `index`.
    pub fn type_of(&self, index: usize) -> Option<&TypeSig> {
        self.params.get(index)
    }

    /// Parameter `index` (0 is the first declared parameter) read as `T`.
    ///
    /// Fails with [`Error::Usage`] when the parameter's declared type is not
    /// `T` (object references, `ref`s, generic parameters and value types
    /// are never read: see the module docs), when there is no such
    /// parameter, or when the wrapper was built without
    /// [`MethodHandler::ARGUMENTS`](super::MethodHandler::ARGUMENTS).
    #[inline]
    pub fn get<T: Primitive>(&self, index: usize) -> Result<T> {
        if self.elements.get(index) != Some(&T::ELEMENT) || self.table.is_null() {
            return Err(self.refusal::<T>(index));
        }
        let slot = index + usize::from(self.has_this);
        // SAFETY: [wrapped-frame] the table was built by the injected prologue of the body this
        // wrapper built for exactly this signature: one address per argument, `this`
        // first, so `slot` is inside it. Each address is the argument's home in the
        // running frame (`ldarga`), of the parameter's declared type, checked above to be
        // `T`; the frame runs the probe's caller, so the home lives through this call.
        unsafe {
            let p = *self.table.add(slot);
            Ok(T::read(p))
        }
    }
}

impl Arguments<'_> {
    #[cold]
    #[inline(never)]
    fn refusal<T: Primitive>(&self, index: usize) -> Error {
        match self.params.get(index) {
            None => Error::Usage(format!(
                "the method has {} parameter(s); there is no parameter {index}",
                self.params.len()
            )),
            Some(t) if element(t) != Some(T::ELEMENT) => {
                mismatch::<T>(t, &format!("parameter {index}"))
            }
            Some(_) => Error::Usage(
                "the wrapper was built without MethodHandler::ARGUMENTS, so the injected code \
                 passes no arguments"
                    .into(),
            ),
        }
    }
}

/// The return value of a wrapped call, as the exit handler sees it.
pub struct ReturnValue<'c> {
    pub(crate) ty: &'c TypeSig,
    /// [`element_of`] the return type.
    pub(crate) element: u8,
    /// The address of the return-value local, or null after an exception or
    /// for a method returning nothing.
    pub(crate) slot: *mut u8,
}

impl ReturnValue<'_> {
    /// The method's declared return type.
    pub fn type_sig(&self) -> &TypeSig {
        self.ty
    }

    /// The value the method is returning, read as `T`.
    ///
    /// Fails with [`Error::Usage`] when the declared return type is not `T`,
    /// or when there is no value (the method returns nothing, or is leaving
    /// by an exception).
    #[inline]
    pub fn get<T: Primitive>(&self) -> Result<T> {
        let p = self.checked::<T>()?;
        // SAFETY: [wrapped-frame] `p` is the return-value local of the running wrapped
        // frame (`ldloca`), of the declared return type, checked to be `T`.
        Ok(unsafe { T::read(p) })
    }

    /// Replaces the value the method returns with `value`.
    ///
    /// Fails like [`get`](Self::get).
    #[inline]
    pub fn set<T: Primitive>(&mut self, value: T) -> Result<()> {
        let p = self.checked::<T>()?;
        // SAFETY: [wrapped-frame] as in `get`; the epilogue returns this local right after
        // its call of the probe, so the new value is what the caller gets.
        unsafe { value.write(p) };
        Ok(())
    }

    /// The local's address when the return type is `T` and there is a value.
    #[inline]
    fn checked<T: Primitive>(&self) -> Result<*mut u8> {
        if self.element == T::ELEMENT && !self.slot.is_null() {
            Ok(self.slot)
        } else {
            Err(self.refusal::<T>())
        }
    }

    #[cold]
    #[inline(never)]
    fn refusal<T: Primitive>(&self) -> Error {
        if self.element != T::ELEMENT {
            mismatch::<T>(self.ty, "the return value")
        } else {
            Error::Usage(
                "no return value: the method returns nothing or is leaving by an exception".into(),
            )
        }
    }
}
