//! Typed argument and return values for the WithInfo hooks.
//!
//! `GetFunctionEnter3Info` gives one byte range per argument (`this` first
//! for instance methods) and `GetFunctionLeave3Info` one for the return
//! value; the method signature says what each range holds. The reading
//! rules (BOTR *Profiling*, "Object Inspection"):
//!
//! | signature element | range holds | [`ArgValue`] |
//! |---|---|---|
//! | `BOOLEAN`, `CHAR`, `I1`…`U8`, `R4`, `R8`, `I`, `U` | the value | the matching primitive |
//! | `STRING` | an object reference | [`ArgValue::String`]: the reference and its UTF-16 characters (`GetStringLayout2`) |
//! | `CLASS`, `OBJECT`, `SZARRAY`, `ARRAY`, generic class instantiations | an object reference (`ObjectID`) | [`ArgValue::Object`] |
//! | `BYREF` | the address of the referenced location | [`ArgValue::ByRef`] |
//! | `PTR`, `FNPTR` | the pointer | [`ArgValue::Pointer`] |
//! | `VALUETYPE` (structs, enums), generic value-type instantiations | the value's bytes (its unboxed layout: `GetClassLayout`) | [`ArgValue::ValueType`] |
//! | `VAR`, `MVAR`, `TYPEDBYREF` | depends on the instantiation | [`ArgValue::Unknown`] |
//!
//! Parse the signature once per function ([`MethodShape::of`], typically
//! in [`EltHooks::map_function`](super::EltHooks::map_function)) and keep it
//! in the function's data; decoding in the hook then reads memory only.
//! Object references are valid during the hook call (no GC can move them
//! while the hook runs) and not after: keep the values, not the references.
//!
//! Decoding follows pointers (a string's characters), so it must only ever
//! read ranges with the shape of the function they belong to. A
//! [`MethodShape`] can only be made by the SDK, for one function, from that
//! function's signature and the runtime's string layout; [`decode_arguments`]
//! and [`decode_return`] refuse ([`Error::Mismatch`]) ranges of any other
//! function.
//!
//! The `FunctionID` alone does not say which function a range belongs to:
//! the runtime recycles the IDs of freed dynamic methods (and the memory
//! of collectible code's method descriptors), so one ID names several
//! functions over time. A shape is therefore bound to the SDK's ELT record
//! of its function ([`Binding`]: the ID and the record's serial number),
//! which the SDK releases when the function goes (module and class
//! unloads, `DynamicMethodUnloaded`); the next function with the same ID
//! gets a new record, and a kept shape of the old one is refused.
//!
//! # Runtime-async methods (.NET 11)
//!
//! A method returning `Task`, `Task<T>`, `ValueTask` or `ValueTask<T>` can
//! have two functions (two `FunctionID`s of one token) on .NET 11: its
//! *Task-returning variant*, which ordinary callers call and which returns
//! the task, and its *async variant*, which runtime-async callers call
//! (dotnet/runtime docs/design/specs/runtime-async.md; `asyncthunks.cpp`
//! makes whichever of the two has no IL of its own). For a runtime-async
//! method (`MethodImplOptions.Async`) the async variant holds the method's
//! code; for an ordinary one it is a thunk that awaits the task. The async
//! variant suspends, and the runtime resumes it through a resumption stub
//! that calls it again with `this` null (or 0) and every parameter at its
//! default value (dotnet/runtime `AsyncResumptionStub`, which mirrors the
//! VM's `getAsyncResumptionStub`): the enter hook fires again, with the
//! ranges of a call, holding those defaults (seen on 11.0.0: `Modern.Async::Middle`
//! entered 15 times with arguments for the app's 3 calls, 12 of them `0`). Its
//! leave hook returns the awaited `T`, not the declared task. A call cannot
//! be told from a resume by its ranges, so [`MethodShape::of`] refuses an
//! async variant ([`Error::RuntimeVersion`]): its arguments and return value
//! are never decoded. The Task-returning variant is the function
//! `GetFunctionFromToken` answers for the token, and decodes as any method;
//! a function of a generic method (or of a generic type) returning a task,
//! for which `GetFunctionFromToken` cannot answer, is refused too on .NET
//! 11, because the two variants cannot be told apart there.
//!
//! Value types come back as their bytes in every case: float and double
//! aggregates, structs mixing integers and doubles, structs passed by
//! reference or on the stack, and return values in registers or through a
//! return buffer (tested against the shapes of the runtime's own slow-path
//! ELT test on every leg). One runtime reports some of them wrongly: .NET
//! Core 3.x on Linux x64 points `GetFunctionLeave3Info`'s range at the
//! saved `rax` for every return value not passed through a return buffer,
//! so a struct returned in `xmm0`/`xmm1`, or in `rax` and a second
//! register, would read as `rax` and the 8 bytes after it. There the SDK
//! classifies the struct's eightbytes as the System V ABI does (from
//! `GetClassLayout` and the fields' signatures, when the shape is made)
//! and [`decode_return`] reads the registers the runtime's leave stub saved
//! (`rax`, `rdx`, `xmm0`, `xmm1`); a struct it cannot classify (nested
//! structs, generic value-type instantiations, value types of other
//! modules, enums of other assemblies included) is refused there with
//! [`Error::Malformed`], never decoded from the wrong place.

use super::frame::{Arguments, Binding, EightByte, ReturnValue};
use crate::error::{Error, Result};
use crate::ids::{FunctionId, MdToken};
use crate::info::{ProfilerInfo, StringLayout2};
use crate::signature::{MethodSig, TypeSig};
use clrprof_sys as sys;

/// How to read one argument or return value, from its signature element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgKind {
    /// `void` (return values only).
    Void,
    /// A primitive, by its `ELEMENT_TYPE_*` code.
    Primitive(u8),
    /// `System.String`.
    String,
    /// Any other object reference.
    Object,
    /// A managed reference (`ref`/`out`/`in`).
    ByRef,
    /// An unmanaged or function pointer.
    Pointer,
    /// A value type; the token is its TypeDef/TypeRef/TypeSpec (or the
    /// generic definition for instantiations).
    ValueType(MdToken),
    /// A generic parameter or a typed reference.
    Unknown,
}

impl ArgKind {
    /// The kind of a signature type.
    pub fn of(sig: &TypeSig) -> ArgKind {
        match sig {
            TypeSig::Primitive(e) => match *e as i32 {
                x if x == sys::ELEMENT_TYPE_VOID as i32 => ArgKind::Void,
                x if x == sys::ELEMENT_TYPE_STRING as i32 => ArgKind::String,
                x if x == sys::ELEMENT_TYPE_OBJECT as i32 => ArgKind::Object,
                x if x == sys::ELEMENT_TYPE_TYPEDBYREF as i32 => ArgKind::Unknown,
                _ => ArgKind::Primitive(*e),
            },
            TypeSig::Class(_) | TypeSig::SzArray(_) | TypeSig::Array { .. } => ArgKind::Object,
            TypeSig::ValueType(t) => ArgKind::ValueType(*t),
            TypeSig::GenericInst {
                value_type: true,
                generic,
                ..
            } => ArgKind::ValueType(*generic),
            TypeSig::GenericInst { .. } => ArgKind::Object,
            TypeSig::ByRef(_) => ArgKind::ByRef,
            TypeSig::Ptr(_) | TypeSig::FnPtr(_) => ArgKind::Pointer,
            TypeSig::Modified { inner, .. } | TypeSig::Pinned(inner) => ArgKind::of(inner),
            TypeSig::Var(_) | TypeSig::MVar(_) => ArgKind::Unknown,
        }
    }
}

/// Longest parameter list a [`MethodShape`] keeps (the WithInfo buffer has
/// room for [`super::frame::MAX_ARGUMENT_RANGES`] ranges, `this` included).
pub const MAX_PARAMS: usize = 31;

/// What a method's arguments and return value are, parsed once from its
/// signature, for that one function. Fixed size: keeping one per hooked
/// function allocates nothing more.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MethodShape {
    binding: Binding,
    layout: StringLayout2,
    has_this: bool,
    count: usize,
    params: [ArgKind; MAX_PARAMS],
    ret: ArgKind,
    ret_registers: RegisterClasses,
}

/// The System V classification of a struct return value, where the SDK
/// needs it (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(all(target_arch = "x86_64", unix)), allow(dead_code))]
enum RegisterClasses {
    /// Not computed: the runtime reports register returns correctly, or
    /// the return value is not a struct.
    NotNeeded,
    /// The struct could not be classified: its register return is refused.
    Unknown,
    /// One or two eightbytes.
    Known([EightByte; 2], u8),
}

impl RegisterClasses {
    fn classes(&self) -> Option<&[EightByte]> {
        match self {
            RegisterClasses::Known(c, n) => c.get(..*n as usize),
            _ => None,
        }
    }
}

impl MethodShape {
    /// The shape of a parsed signature; `Err` for more than [`MAX_PARAMS`]
    /// parameters.
    fn from_sig(binding: Binding, layout: StringLayout2, sig: &MethodSig) -> Result<MethodShape> {
        if sig.params.len() > MAX_PARAMS {
            return Err(Error::Usage(format!(
                "a method with {} parameters (more than {MAX_PARAMS})",
                sig.params.len()
            )));
        }
        let mut params = [ArgKind::Unknown; MAX_PARAMS];
        for (slot, p) in params.iter_mut().zip(&sig.params) {
            *slot = ArgKind::of(p);
        }
        Ok(MethodShape {
            binding,
            layout,
            has_this: sig.has_this(),
            count: sig.params.len(),
            params,
            ret: ArgKind::of(&sig.ret),
            ret_registers: RegisterClasses::NotNeeded,
        })
    }

    /// Reads and parses the signature of `function` (`GetTokenAndMetaDataFromFunction`,
    /// `GetMethodProps`) and the runtime's string layout (`GetStringLayout2`),
    /// bound to the SDK's ELT record of `function`.
    ///
    /// Fails with [`Error::Usage`] for a function the ELT mapper has not
    /// hooked: shapes only decode the hook calls of hooked functions. Call
    /// it in [`EltHooks::map_function`](super::EltHooks::map_function)
    /// (the record being made is bound already) or later.
    pub fn of(info: &ProfilerInfo, function: FunctionId<'_>) -> Result<MethodShape> {
        let binding =
            super::current_binding(info.runtime_slot(), function.to_raw()).ok_or_else(|| {
                Error::Usage(format!(
                    "MethodShape::of: FunctionID {:#x} is not hooked by the ELT mapper (a shape \
                     decodes only hook calls of a function the SDK hooked)",
                    function.as_sys()
                ))
            })?;
        let (metadata, token) = info.token_and_metadata_from_function(function)?;
        let props = metadata.method_props(token)?;
        let sig = MethodSig::parse(&props.signature)?;
        refuse_async_variant(info, function, &metadata, token, props.impl_flags, &sig)?;
        let shape = MethodShape::from_sig(binding, info.string_layout2()?, &sig)?;
        Ok(MethodShape {
            ret_registers: register_classes(info, function, &metadata, shape.ret),
            ..shape
        })
    }

    /// The function this shape describes.
    pub fn function(&self) -> crate::ids::RawFunctionId {
        self.binding.function
    }

    /// The record binding this shape decodes (see [`Binding`]).
    pub fn binding(&self) -> Binding {
        self.binding
    }

    /// Whether the first range is `this`.
    pub fn has_this(&self) -> bool {
        self.has_this
    }

    /// The declared parameters (without `this`).
    pub fn params(&self) -> &[ArgKind] {
        &self.params[..self.count]
    }

    /// The return value.
    pub fn ret(&self) -> ArgKind {
        self.ret
    }

    /// How many ranges `GetFunctionEnter3Info` reports for this method.
    pub fn range_count(&self) -> usize {
        self.count + self.has_this as usize
    }
}

/// A decoded argument or return value, borrowing the hook call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ArgValue<'a> {
    /// `bool`.
    Bool(bool),
    /// `char` (a UTF-16 unit).
    Char(u16),
    /// `sbyte`.
    I1(i8),
    /// `byte`.
    U1(u8),
    /// `short`.
    I2(i16),
    /// `ushort`.
    U2(u16),
    /// `int`.
    I4(i32),
    /// `uint`.
    U4(u32),
    /// `long`.
    I8(i64),
    /// `ulong`.
    U8(u64),
    /// `float`.
    R4(f32),
    /// `double`.
    R8(f64),
    /// `nint`.
    I(isize),
    /// `nuint`.
    U(usize),
    /// A string: its object reference (an `ObjectID`, 0 for null) and its
    /// characters (empty for null).
    String {
        /// The `ObjectID`.
        object: usize,
        /// The UTF-16 characters.
        chars: &'a [u16],
    },
    /// Another object reference (`ObjectID`, 0 for null).
    Object(usize),
    /// A managed reference: the address it points to.
    ByRef(usize),
    /// A pointer.
    Pointer(usize),
    /// A value type's bytes, in its unboxed layout.
    ValueType {
        /// Its type token (see [`ArgKind::ValueType`]).
        token: MdToken,
        /// Its bytes.
        bytes: &'a [u8],
    },
    /// Bytes whose type the signature alone does not tell.
    Unknown(&'a [u8]),
    /// `void` (a return value of a method that returns nothing).
    Void,
}

impl ArgValue<'_> {
    /// The string's text (lossy for unpaired surrogates), for strings.
    pub fn string_text(&self) -> Option<String> {
        match self {
            ArgValue::String { chars, .. } => Some(String::from_utf16_lossy(chars)),
            _ => None,
        }
    }
}

/// What [`decode_return`] needs to read a struct returned in registers on
/// this runtime: the classification on .NET Core 3.x for Unix x64 (see the
/// module docs), nothing elsewhere.
#[cfg(all(target_arch = "x86_64", unix))]
fn register_classes(
    info: &ProfilerInfo,
    function: FunctionId<'_>,
    metadata: &crate::metadata::MetaDataImport,
    ret: ArgKind,
) -> RegisterClasses {
    match ret {
        ArgKind::ValueType(t) if super::legacy_stub::applies(info.version()) => {
            classify(info, function, metadata, t)
        }
        _ => RegisterClasses::NotNeeded,
    }
}

#[cfg(not(all(target_arch = "x86_64", unix)))]
fn register_classes(
    _info: &ProfilerInfo,
    _function: FunctionId<'_>,
    _metadata: &crate::metadata::MetaDataImport,
    _ret: ArgKind,
) -> RegisterClasses {
    RegisterClasses::NotNeeded
}

/// The System V classification of the value type `token` (a TypeDef of the
/// module of `function`), eightbyte by eightbyte: an eightbyte holding only
/// `float`/`double` fields travels in an SSE register, any other in a
/// general-purpose one (the runtime's `MethodTable::ClassifyEightBytes`
/// rule for structs of primitives). [`RegisterClasses::Unknown`] for
/// anything else: nested structs, fields straddling an eightbyte, types of
/// other modules, more than 16 bytes.
#[cfg(all(target_arch = "x86_64", unix))]
fn classify(
    info: &ProfilerInfo,
    function: FunctionId<'_>,
    metadata: &crate::metadata::MetaDataImport,
    token: MdToken,
) -> RegisterClasses {
    classify_fields(info, function, metadata, token).unwrap_or(RegisterClasses::Unknown)
}

#[cfg(all(target_arch = "x86_64", unix))]
fn classify_fields(
    info: &ProfilerInfo,
    function: FunctionId<'_>,
    metadata: &crate::metadata::MetaDataImport,
    token: MdToken,
) -> Option<RegisterClasses> {
    use crate::ids::MdTypeDef;
    use sys as s;
    if token.0 >> 24 != 0x02 {
        return None;
    }
    let module = info.function_info(function).ok()?.module;
    let class = info.class_from_token(module, MdTypeDef(token.0)).ok()?;
    let layout = info.class_layout(class).ok()?;
    if layout.size == 0 || layout.size > 16 {
        return None;
    }
    let mut classes: [Option<EightByte>; 2] = [None, None];
    for field in &layout.fields {
        let (_, _, _, signature) = metadata.field_props(field.field).ok()?;
        let (size, class) = match crate::metadata::field_type(&signature).ok()? {
            TypeSig::Primitive(e) => match e as i32 {
                x if x == s::ELEMENT_TYPE_R4 as i32 => (4, EightByte::Sse),
                x if x == s::ELEMENT_TYPE_R8 as i32 => (8, EightByte::Sse),
                x if x == s::ELEMENT_TYPE_BOOLEAN as i32
                    || x == s::ELEMENT_TYPE_I1 as i32
                    || x == s::ELEMENT_TYPE_U1 as i32 =>
                {
                    (1, EightByte::Integer)
                }
                x if x == s::ELEMENT_TYPE_CHAR as i32
                    || x == s::ELEMENT_TYPE_I2 as i32
                    || x == s::ELEMENT_TYPE_U2 as i32 =>
                {
                    (2, EightByte::Integer)
                }
                x if x == s::ELEMENT_TYPE_I4 as i32 || x == s::ELEMENT_TYPE_U4 as i32 => {
                    (4, EightByte::Integer)
                }
                x if x == s::ELEMENT_TYPE_I8 as i32
                    || x == s::ELEMENT_TYPE_U8 as i32
                    || x == s::ELEMENT_TYPE_I as i32
                    || x == s::ELEMENT_TYPE_U as i32
                    || x == s::ELEMENT_TYPE_STRING as i32
                    || x == s::ELEMENT_TYPE_OBJECT as i32 =>
                {
                    (8, EightByte::Integer)
                }
                _ => return None,
            },
            TypeSig::Class(_)
            | TypeSig::SzArray(_)
            | TypeSig::Array { .. }
            | TypeSig::Ptr(_)
            | TypeSig::FnPtr(_)
            | TypeSig::GenericInst {
                value_type: false, ..
            } => (8, EightByte::Integer),
            _ => return None,
        };
        let offset = field.offset as usize;
        let index = offset / 8;
        if offset % 8 + size > 8 || offset + size > layout.size as usize {
            return None;
        }
        let slot = classes.get_mut(index)?;
        *slot = match (*slot, class) {
            (Some(EightByte::Integer), _) | (_, EightByte::Integer) => Some(EightByte::Integer),
            _ => Some(EightByte::Sse),
        };
    }
    let count = (layout.size as usize).div_ceil(8);
    let mut known = [EightByte::Integer; 2];
    for (out, class) in known.iter_mut().zip(&classes[..count]) {
        *out = (*class)?;
    }
    Some(RegisterClasses::Known(known, count as u8))
}

/// `MethodImplAttributes.Async` (`CorMethodImpl` 0x2000, .NET 11): a
/// runtime-async method definition.
const MI_ASYNC: u32 = 0x2000;

/// Which of a method's functions a `FunctionID` is, on a runtime with
/// runtime-async methods (see the module docs).
#[derive(Debug, PartialEq, Eq)]
enum Variant {
    /// The only function of its token, or the Task-returning variant:
    /// every enter is a call.
    Ordinary,
    /// The async variant: enters on every resume, returns the awaited value.
    Async,
    /// Not known; why.
    Unknown(String),
}

/// The variant of a function of a method that is a runtime-async
/// definition (`is_async_definition`) and/or returns a task
/// (`returns_task`); `is_ordinary` asks the runtime whether the function
/// is the token's own (`GetFunctionFromToken`).
fn variant(
    is_async_definition: bool,
    returns_task: bool,
    is_ordinary: impl FnOnce() -> Result<bool>,
) -> Variant {
    if !returns_task {
        // A runtime-async definition that returns no task has no
        // Task-returning variant: it is its own async variant.
        return if is_async_definition {
            Variant::Async
        } else {
            Variant::Ordinary
        };
    }
    match is_ordinary() {
        Ok(true) => Variant::Ordinary,
        Ok(false) => Variant::Async,
        Err(e) => Variant::Unknown(e.to_string()),
    }
}

/// Whether `name` is one of the task types whose methods have async
/// variants.
fn is_task_type(name: &str) -> bool {
    matches!(
        name,
        "System.Threading.Tasks.Task"
            | "System.Threading.Tasks.Task`1"
            | "System.Threading.Tasks.ValueTask"
            | "System.Threading.Tasks.ValueTask`1"
    )
}

/// Whether `ret` (a method's declared return type) is a task type.
fn returns_task(metadata: &crate::metadata::MetaDataImport, ret: &TypeSig) -> bool {
    let token = match ret {
        TypeSig::Modified { inner, .. } => return returns_task(metadata, inner),
        TypeSig::Class(t) | TypeSig::ValueType(t) => *t,
        TypeSig::GenericInst { generic, .. } => *generic,
        _ => return false,
    };
    metadata
        .type_name_of(token)
        .is_ok_and(|name| is_task_type(&name))
}

/// Refuses the async variant of a method on a runtime that has
/// runtime-async methods (.NET 11 and later), and a function whose variant
/// cannot be told there (see the module docs).
fn refuse_async_variant(
    info: &ProfilerInfo,
    function: FunctionId<'_>,
    metadata: &crate::metadata::MetaDataImport,
    token: crate::ids::MdMethodDef,
    impl_flags: u32,
    sig: &MethodSig,
) -> Result<()> {
    // Runtimes without `GetRuntimeInformation` (Info3) are older than
    // runtime-async.
    let Ok(runtime) = info.runtime_information() else {
        return Ok(());
    };
    if runtime.runtime_type != crate::runtimes::RuntimeType::CoreClr || runtime.major < 11 {
        return Ok(());
    }
    let found = variant(
        impl_flags & MI_ASYNC != 0,
        returns_task(metadata, &sig.ret),
        || {
            let module = info.function_info(function)?.module;
            let own = info.function_from_token(module, MdToken(token.0))?;
            Ok(own.to_raw() == function.to_raw())
        },
    );
    let why = match found {
        Variant::Ordinary => return Ok(()),
        Variant::Async => format!(
            "FunctionID {:#x} is the async variant of method {:#010x} (.NET 11 runtime-async): \
             the runtime's resumption stub calls it again on every resume, with `this` null \
             and every parameter at its default, and its leave returns the awaited value, not \
             the declared task, so its enters cannot be told from calls and its arguments and \
             return value are not decoded (its Task-returning variant, the function \
             GetFunctionFromToken answers, decodes)",
            function.as_sys(),
            token.0
        ),
        Variant::Unknown(e) => format!(
            "FunctionID {:#x} of method {:#010x} returns a task, so on .NET 11 it may be the \
             method's async variant (entered again on every resume, with default arguments), \
             and GetFunctionFromToken, which names the Task-returning variant, did not answer \
             ({e}; generic methods and methods of generic types): its arguments are not decoded",
            function.as_sys(),
            token.0
        ),
    };
    Err(Error::RuntimeVersion {
        hr: sys::HRESULT(crate::error::KnownHresult::E_NOTIMPL as i32),
        call: "MethodShape::of",
        called: false,
        why,
    })
}

fn read<const N: usize>(bytes: &[u8]) -> Result<[u8; N]> {
    bytes
        .get(..N)
        .and_then(|b| b.try_into().ok())
        .ok_or_else(|| {
            Error::Malformed(format!(
                "argument range of {} bytes, expected {N}",
                bytes.len()
            ))
        })
}

fn read_usize(bytes: &[u8]) -> Result<usize> {
    Ok(usize::from_ne_bytes(read::<
        { core::mem::size_of::<usize>() },
    >(bytes)?))
}

/// Decodes the value in `bytes` as `kind`.
///
/// # Safety
/// `bytes` must be a range the runtime reported for the current hook call
/// of the function whose signature gave `kind`, so that an object reference
/// in it points to a live object of that type (for strings, its characters
/// are read through `layout`, the runtime's).
unsafe fn decode<'a>(
    kind: ArgKind,
    bytes: &'a [u8],
    layout: StringLayout2,
) -> Result<ArgValue<'a>> {
    use sys as s;
    Ok(match kind {
        ArgKind::Void => ArgValue::Void,
        ArgKind::Primitive(e) => match e as i32 {
            x if x == s::ELEMENT_TYPE_BOOLEAN as i32 => ArgValue::Bool(read::<1>(bytes)?[0] != 0),
            x if x == s::ELEMENT_TYPE_CHAR as i32 => {
                ArgValue::Char(u16::from_ne_bytes(read(bytes)?))
            }
            x if x == s::ELEMENT_TYPE_I1 as i32 => ArgValue::I1(i8::from_ne_bytes(read(bytes)?)),
            x if x == s::ELEMENT_TYPE_U1 as i32 => ArgValue::U1(read::<1>(bytes)?[0]),
            x if x == s::ELEMENT_TYPE_I2 as i32 => ArgValue::I2(i16::from_ne_bytes(read(bytes)?)),
            x if x == s::ELEMENT_TYPE_U2 as i32 => ArgValue::U2(u16::from_ne_bytes(read(bytes)?)),
            x if x == s::ELEMENT_TYPE_I4 as i32 => ArgValue::I4(i32::from_ne_bytes(read(bytes)?)),
            x if x == s::ELEMENT_TYPE_U4 as i32 => ArgValue::U4(u32::from_ne_bytes(read(bytes)?)),
            x if x == s::ELEMENT_TYPE_I8 as i32 => ArgValue::I8(i64::from_ne_bytes(read(bytes)?)),
            x if x == s::ELEMENT_TYPE_U8 as i32 => ArgValue::U8(u64::from_ne_bytes(read(bytes)?)),
            x if x == s::ELEMENT_TYPE_R4 as i32 => ArgValue::R4(f32::from_ne_bytes(read(bytes)?)),
            x if x == s::ELEMENT_TYPE_R8 as i32 => ArgValue::R8(f64::from_ne_bytes(read(bytes)?)),
            x if x == s::ELEMENT_TYPE_I as i32 => ArgValue::I(read_usize(bytes)? as isize),
            x if x == s::ELEMENT_TYPE_U as i32 => ArgValue::U(read_usize(bytes)?),
            _ => ArgValue::Unknown(bytes),
        },
        ArgKind::String => {
            let object = read_usize(bytes)?;
            let chars: &[u16] = if object == 0 {
                &[]
            } else {
                // SAFETY: [caller-contract, elt-frame, object-no-gc] a non-null string reference from a range of this
                // hook call points to a live System.String; GetStringLayout2
                // says where its 32-bit length and its characters are.
                unsafe {
                    let len = core::ptr::read_unaligned(
                        (object + layout.string_length_offset as usize) as *const u32,
                    );
                    core::slice::from_raw_parts(
                        (object + layout.buffer_offset as usize) as *const u16,
                        len as usize,
                    )
                }
            };
            ArgValue::String { object, chars }
        }
        ArgKind::Object => ArgValue::Object(read_usize(bytes)?),
        ArgKind::ByRef => ArgValue::ByRef(read_usize(bytes)?),
        ArgKind::Pointer => ArgValue::Pointer(read_usize(bytes)?),
        ArgKind::ValueType(token) => ArgValue::ValueType { token, bytes },
        ArgKind::Unknown => ArgValue::Unknown(bytes),
    })
}

// provenance: shape-arguments
/// Decodes every argument of an enter hook call: `this` (as an object
/// reference, or a managed reference for value-type methods) then the
/// parameters. Fails with [`Error::Mismatch`] when `shape` was made for
/// another function, and when the runtime reported a different number of
/// ranges than the signature has.
pub fn decode_arguments<'a>(
    shape: &MethodShape,
    args: &Arguments<'a>,
    mut each: impl FnMut(usize, ArgValue<'a>),
) -> Result<()> {
    check_function(shape, args.binding(), "decode_arguments")?;
    if args.ranges().len() != shape.range_count() {
        return Err(Error::Malformed(format!(
            "{} argument ranges for a signature with {} (this: {})",
            args.ranges().len(),
            shape.range_count(),
            shape.has_this()
        )));
    }
    let kinds = shape
        .has_this()
        .then_some(ArgKind::Object)
        .into_iter()
        .chain(shape.params().iter().copied());
    for (index, kind) in kinds.enumerate() {
        let bytes = args.bytes(index).unwrap_or(&[]);
        // SAFETY: [elt-frame] the ranges come from the hook call 'a of `shape.function`
        // (checked above), and `kind` is that function's parameter type.
        let value = unsafe { decode(kind, bytes, shape.layout)? };
        each(index, value);
    }
    Ok(())
}

// provenance: shape-arguments
/// Decodes a leave hook's return value. Fails with [`Error::Mismatch`] when
/// `shape` was made for another function, and with [`Error::Malformed`]
/// for a struct returned in registers that the runtime reports from the
/// wrong place and the SDK could not classify (.NET Core 3.x on Linux x64:
/// see the module docs).
pub fn decode_return<'v>(shape: &MethodShape, value: &'v ReturnValue<'_>) -> Result<ArgValue<'v>> {
    check_function(shape, value.binding(), "decode_return")?;
    if shape.ret() == ArgKind::Void {
        return Ok(ArgValue::Void);
    }
    if let (ArgKind::ValueType(token), Some(registers)) = (shape.ret(), value.registers()) {
        let len = value.range().len() as usize;
        let bytes = shape
            .ret_registers
            .classes()
            .and_then(|classes| registers.value(classes, len))
            .ok_or_else(|| {
                Error::Malformed(format!(
                    "a struct of {len} bytes returned in registers, which this runtime (.NET Core \
                     3.x, Linux x64) reports from rax's slot; its System V classification is not \
                     known ({:?}), so its value cannot be read",
                    shape.ret_registers
                ))
            })?;
        return Ok(ArgValue::ValueType { token, bytes });
    }
    // SAFETY: [elt-frame] the range comes from the hook call of `shape`'s function
    // (checked above), and `shape.ret()` is that function's return type.
    unsafe { decode(shape.ret(), value.range().bytes(), shape.layout) }
}

fn check_function(shape: &MethodShape, used_with: Binding, call: &'static str) -> Result<()> {
    if shape.binding == used_with {
        Ok(())
    } else if shape.binding.function == used_with.function {
        // The ID was recycled: the shape's function is gone.
        Err(Error::Mismatch {
            call,
            made_for: shape.binding.serial as usize,
            used_with: used_with.serial as usize,
        })
    } else {
        Err(Error::Mismatch {
            call,
            made_for: shape.binding.function.0,
            used_with: used_with.function.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elt::frame::Arguments;

    fn bound(function: usize, serial: u64) -> Binding {
        Binding {
            function: crate::ids::RawFunctionId(function),
            serial,
        }
    }

    fn layout() -> StringLayout2 {
        StringLayout2 {
            string_length_offset: 8,
            buffer_offset: 12,
        }
    }

    #[test]
    fn only_the_task_returning_variant_of_a_runtime_async_method_is_decoded() {
        let never = || -> Result<bool> { panic!("the runtime is asked only for task returns") };
        // Neither async nor returning a task: one function.
        assert_eq!(variant(false, false, never), Variant::Ordinary);
        // An async definition without a task return is its own async variant.
        assert_eq!(variant(true, false, never), Variant::Async);
        // Returning a task, async definition or not: the token's own
        // function is the Task-returning variant, another is the async one.
        for is_async in [false, true] {
            assert_eq!(variant(is_async, true, || Ok(true)), Variant::Ordinary);
            assert_eq!(variant(is_async, true, || Ok(false)), Variant::Async);
            let parameterized = || {
                Err(Error::runtime(
                    sys::HRESULT(
                        crate::error::KnownHresult::CORPROF_E_FUNCTION_IS_PARAMETERIZED as i32,
                    ),
                    "ICorProfilerInfo::GetFunctionFromToken",
                ))
            };
            assert!(matches!(
                variant(is_async, true, parameterized),
                Variant::Unknown(why) if why.contains("GetFunctionFromToken")
            ));
        }
        for task in [
            "System.Threading.Tasks.Task",
            "System.Threading.Tasks.Task`1",
            "System.Threading.Tasks.ValueTask",
            "System.Threading.Tasks.ValueTask`1",
        ] {
            assert!(is_task_type(task), "{task}");
        }
        for other in [
            "System.Threading.Tasks.TaskCompletionSource`1",
            "System.Object",
            "Task",
            "System.Threading.Tasks.Task`2",
        ] {
            assert!(!is_task_type(other), "{other}");
        }
    }

    #[test]
    fn primitives_decode_from_their_bytes() {
        let i4 = (-7i32).to_ne_bytes();
        let r8 = 2.5f64.to_ne_bytes();
        // SAFETY: [local-memory] no object references are decoded here.
        unsafe {
            assert_eq!(
                decode(
                    ArgKind::Primitive(sys::ELEMENT_TYPE_I4 as u8),
                    &i4,
                    layout()
                )
                .unwrap(),
                ArgValue::I4(-7)
            );
            assert_eq!(
                decode(
                    ArgKind::Primitive(sys::ELEMENT_TYPE_R8 as u8),
                    &r8,
                    layout()
                )
                .unwrap(),
                ArgValue::R8(2.5)
            );
            // A range too short for the type is an error, not a panic.
            assert!(decode(
                ArgKind::Primitive(sys::ELEMENT_TYPE_R8 as u8),
                &i4,
                layout()
            )
            .is_err());
        }
    }

    #[test]
    fn strings_are_read_through_the_layout() {
        // A fake string object: 8 bytes header, u32 length, UTF-16 chars.
        let mut object = vec![0u8; 12];
        object[8..12].copy_from_slice(&2u32.to_ne_bytes());
        for c in "hi".encode_utf16() {
            object.extend_from_slice(&c.to_ne_bytes());
        }
        let reference = (object.as_ptr() as usize).to_ne_bytes();
        // SAFETY: [local-memory] `reference` points to a buffer laid out as `layout()` says.
        let v = unsafe { decode(ArgKind::String, &reference, layout()) }.unwrap();
        assert_eq!(v.string_text().as_deref(), Some("hi"));
        let null = 0usize.to_ne_bytes();
        // SAFETY: [local-memory] a null reference is never dereferenced.
        let v = unsafe { decode(ArgKind::String, &null, layout()) }.unwrap();
        assert_eq!(
            v,
            ArgValue::String {
                object: 0,
                chars: &[]
            }
        );
    }

    #[test]
    fn shapes_come_from_signatures_and_count_this() {
        // HASTHIS, 2 params, returns R8; params I4 and STRING.
        let blob = [
            0x20,
            2,
            sys::ELEMENT_TYPE_R8 as u8,
            sys::ELEMENT_TYPE_I4 as u8,
            sys::ELEMENT_TYPE_STRING as u8,
        ];
        let f = bound(0x77, 1);
        let shape = MethodShape::from_sig(f, layout(), &MethodSig::parse(&blob).unwrap()).unwrap();
        assert!(shape.has_this());
        assert_eq!(shape.range_count(), 3);
        assert_eq!(
            shape.params(),
            &[
                ArgKind::Primitive(sys::ELEMENT_TYPE_I4 as u8),
                ArgKind::String
            ]
        );
        assert_eq!(shape.ret(), ArgKind::Primitive(sys::ELEMENT_TYPE_R8 as u8));
        // Fewer ranges than the signature has: refused.
        let args = Arguments::for_tests(f, &[]);
        assert!(matches!(
            decode_arguments(&shape, &args, |_, _| {}),
            Err(Error::Malformed(_))
        ));
    }

    #[test]
    fn a_shape_decodes_only_its_own_function() {
        // One STRING parameter: decoding it follows the reference.
        let blob = [
            0x00,
            1,
            sys::ELEMENT_TYPE_VOID as u8,
            sys::ELEMENT_TYPE_STRING as u8,
        ];
        let shape =
            MethodShape::from_sig(bound(0x10, 1), layout(), &MethodSig::parse(&blob).unwrap())
                .unwrap();
        // A range of another function whose first 8 bytes are not a string
        // reference: refused before anything is dereferenced.
        static INTEGER: [u8; 8] = 0x1234_5678u64.to_ne_bytes();
        let other = Arguments::for_tests(bound(0x20, 2), &[&INTEGER]);
        let err = decode_arguments(&shape, &other, |_, _| panic!("decoded")).unwrap_err();
        assert_eq!(
            err,
            Error::Mismatch {
                call: "decode_arguments",
                made_for: 0x10,
                used_with: 0x20
            }
        );
    }

    #[test]
    fn a_shape_is_refused_for_a_recycled_function_id() {
        // A dynamic method taking a string; the runtime frees it and gives
        // its FunctionID (0x10) to one taking an int: a new record, a new
        // serial. The kept shape must not read the int as a reference.
        let blob = [
            0x00,
            1,
            sys::ELEMENT_TYPE_VOID as u8,
            sys::ELEMENT_TYPE_STRING as u8,
        ];
        let shape =
            MethodShape::from_sig(bound(0x10, 7), layout(), &MethodSig::parse(&blob).unwrap())
                .unwrap();
        static INTEGER: [u8; 8] = 0x1234_5678u64.to_ne_bytes();
        let recycled = Arguments::for_tests(bound(0x10, 8), &[&INTEGER]);
        let err = decode_arguments(&shape, &recycled, |_, _| panic!("decoded")).unwrap_err();
        assert_eq!(
            err,
            Error::Mismatch {
                call: "decode_arguments",
                made_for: 7,
                used_with: 8
            }
        );
        let returned = ReturnValue::for_tests(bound(0x10, 8), &INTEGER, None);
        assert!(matches!(
            decode_return(&shape, &returned),
            Err(Error::Mismatch { .. })
        ));
    }

    #[test]
    fn bindings_follow_the_records() {
        use crate::runtimes::RuntimeSlot;
        let slot = RuntimeSlot(0xE17);
        let f = crate::ids::RawFunctionId(0x4242);
        assert_eq!(super::super::current_binding(slot, f), None);
        super::super::bindings().insert((slot.0, f.0), 5);
        assert_eq!(
            super::super::current_binding(slot, f),
            Some(bound(0x4242, 5))
        );
        // Releasing another serial of the same ID leaves the live one.
        super::super::unbind(slot, bound(0x4242, 4));
        assert_eq!(
            super::super::current_binding(slot, f),
            Some(bound(0x4242, 5))
        );
        super::super::unbind(slot, bound(0x4242, 5));
        assert_eq!(super::super::current_binding(slot, f), None);
    }

    /// A `{float, float, float}` struct, as .NET Core 3.1 on Linux x64
    /// returns it (x, y in xmm0, z in xmm1) and reports it (the range at
    /// the saved rax).
    fn fp32x3_returned() -> (MethodShape, ReturnValue<'static>, [u8; 12]) {
        let mut want = [0u8; 12];
        for (i, v) in [1.5f32, -2.25, 7.0].iter().enumerate() {
            want[4 * i..4 * i + 4].copy_from_slice(&v.to_ne_bytes());
        }
        let xmm0 = u64::from_ne_bytes(want[..8].try_into().unwrap());
        let xmm1 = u32::from_ne_bytes(want[8..].try_into().unwrap()) as u64;
        // HASTHIS=0, no params, returns VALUETYPE 0x02000002 (compressed
        // TypeDefOrRef: (2 << 2) | 0 = 8).
        let blob = [0x00, 0, sys::ELEMENT_TYPE_VALUETYPE as u8, 0x08];
        let shape =
            MethodShape::from_sig(bound(0x30, 1), layout(), &MethodSig::parse(&blob).unwrap())
                .unwrap();
        // What the runtime's range holds: rax, then the hidden-arg slot.
        static RAX_SLOT: [u8; 12] = [0xAA; 12];
        let registers = crate::elt::frame::ReturnRegisters::new(0xAAAA_AAAA, 0, xmm0, xmm1);
        (
            shape,
            ReturnValue::for_tests(bound(0x30, 1), &RAX_SLOT, Some(registers)),
            want,
        )
    }

    #[test]
    fn register_struct_returns_are_read_from_their_registers_or_refused() {
        let (mut shape, returned, want) = fp32x3_returned();
        // Not classified: refused, never the bytes of rax.
        shape.ret_registers = RegisterClasses::Unknown;
        assert!(matches!(
            decode_return(&shape, &returned),
            Err(Error::Malformed(_))
        ));
        // Two SSE eightbytes: xmm0 then xmm1.
        shape.ret_registers = RegisterClasses::Known([EightByte::Sse, EightByte::Sse], 2);
        match decode_return(&shape, &returned).unwrap() {
            ArgValue::ValueType { bytes, .. } => assert_eq!(bytes, &want),
            other => panic!("{other:?}"),
        }
        // {int; double}: rax then xmm0.
        let registers = crate::elt::frame::ReturnRegisters::new(3, 0, 2.5f64.to_bits(), 0);
        let mixed: Vec<EightByte> = vec![EightByte::Integer, EightByte::Sse];
        let bytes = registers.value(&mixed, 16).unwrap();
        assert_eq!(&bytes[..8], &3u64.to_ne_bytes());
        assert_eq!(&bytes[8..], &2.5f64.to_ne_bytes());
        // A length that does not fit the classification is refused.
        assert!(registers.value(&mixed, 8).is_none());
        assert!(registers.value(&mixed[..1], 12).is_none());
    }
}
