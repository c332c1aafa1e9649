//! Metadata signature blobs (ECMA-335 II.23.2) decoded into a readable form.
//!
//! [`MethodSig::parse`] and [`TypeSig::parse`] turn the bytes that
//! `GetMethodProps`, `GetMemberRefProps`, `GetFieldProps` or
//! `GetTypeSpecFromToken` return into a tree; [`SigFormatter`] prints it with
//! names resolved through a [`TokenNames`] source (the module's metadata) and
//! generic parameters replaced by known type arguments when given
//! (`GetFunctionInfo2` / `GetClassIDInfo2`). The parser never panics: corrupt
//! or truncated blobs are an [`Error::Malformed`], and nesting is bounded.

use crate::error::{Error, Result};
use crate::ids::MdToken;
use clrprof_sys as sys;

/// How deep type signatures may nest before the blob counts as malformed.
const MAX_DEPTH: usize = 64;

/// A type in a signature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TypeSig {
    /// A primitive (`ELEMENT_TYPE_VOID` … `ELEMENT_TYPE_U`, `STRING`, `OBJECT`, `TYPEDBYREF`).
    Primitive(u8),
    /// `ELEMENT_TYPE_CLASS` with a TypeDef/TypeRef/TypeSpec token.
    Class(MdToken),
    /// `ELEMENT_TYPE_VALUETYPE` with a TypeDef/TypeRef/TypeSpec token.
    ValueType(MdToken),
    /// `ELEMENT_TYPE_PTR`.
    Ptr(Box<TypeSig>),
    /// `ELEMENT_TYPE_BYREF`.
    ByRef(Box<TypeSig>),
    /// `ELEMENT_TYPE_SZARRAY`: a single-dimension, zero-based array.
    SzArray(Box<TypeSig>),
    /// `ELEMENT_TYPE_ARRAY`: a general array.
    Array {
        /// Element type.
        element: Box<TypeSig>,
        /// Rank.
        rank: u32,
        /// Sizes of the leading dimensions that have one.
        sizes: Vec<u32>,
        /// Lower bounds of the leading dimensions that have one.
        lower_bounds: Vec<i32>,
    },
    /// `ELEMENT_TYPE_GENERICINST`: a generic type instantiation.
    GenericInst {
        /// `true` for a value type.
        value_type: bool,
        /// The generic type definition or reference.
        generic: MdToken,
        /// The type arguments.
        args: Vec<TypeSig>,
    },
    /// `ELEMENT_TYPE_VAR`: the type's generic parameter N (`!N`).
    Var(u32),
    /// `ELEMENT_TYPE_MVAR`: the method's generic parameter N (`!!N`).
    MVar(u32),
    /// `ELEMENT_TYPE_FNPTR`: a function pointer.
    FnPtr(Box<MethodSig>),
    /// A custom modifier (`CMOD_REQD`/`CMOD_OPT`) on a type.
    Modified {
        /// `true` for `modreq`, `false` for `modopt`.
        required: bool,
        /// The modifier type.
        modifier: MdToken,
        /// The modified type.
        inner: Box<TypeSig>,
    },
    /// `ELEMENT_TYPE_PINNED` (locals only).
    Pinned(Box<TypeSig>),
}

/// A method signature (`MethodDefSig`, `MethodRefSig`, `StandAloneMethodSig`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MethodSig {
    /// The calling convention byte (`CorCallingConvention`, with flags).
    pub calling_convention: u8,
    /// Number of generic parameters (0 when not generic).
    pub generic_params: u32,
    /// The return type.
    pub ret: TypeSig,
    /// Parameter types (for vararg call sites, those before the sentinel).
    pub params: Vec<TypeSig>,
    /// Vararg parameters after `ELEMENT_TYPE_SENTINEL` (call sites only).
    pub varargs: Vec<TypeSig>,
}

impl MethodSig {
    /// `true` if the method has a `this` parameter (`HASTHIS`).
    pub fn has_this(&self) -> bool {
        self.calling_convention & sys::IMAGE_CEE_CS_CALLCONV_HASTHIS as u8 != 0
    }

    /// Parses a method signature blob.
    pub fn parse(blob: &[u8]) -> Result<MethodSig> {
        let mut r = Reader { blob, pos: 0 };
        let sig = r.method_sig(0)?;
        Ok(sig)
    }
}

impl TypeSig {
    /// Parses a type signature (e.g. a TypeSpec blob).
    pub fn parse(blob: &[u8]) -> Result<TypeSig> {
        let mut r = Reader { blob, pos: 0 };
        r.type_sig(0)
    }

    /// Parses a field signature blob (`FIELD` followed by the type).
    pub fn parse_field(blob: &[u8]) -> Result<TypeSig> {
        let mut r = Reader { blob, pos: 0 };
        let kind = r.byte()?;
        if kind & 0x0f != sys::IMAGE_CEE_CS_CALLCONV_FIELD as u8 {
            return Err(malformed("a field signature does not start with FIELD"));
        }
        r.type_sig(0)
    }
}

/// The encoded return type of a method signature blob: the bytes between
/// the parameter count and the first parameter (II.23.2.1), for building a
/// local of the same type.
pub fn return_type_bytes(blob: &[u8]) -> Result<&[u8]> {
    let mut r = Reader { blob, pos: 0 };
    let conv = r.byte()?;
    if conv & sys::IMAGE_CEE_CS_CALLCONV_GENERIC as u8 != 0 {
        r.compressed_u32()?;
    }
    r.compressed_u32()?;
    let start = r.pos;
    r.type_sig(0)?;
    Ok(&blob[start..r.pos])
}

/// The encoded types of a method signature's parameters, in order (those
/// before a vararg sentinel), for building tokens of the same types.
pub fn param_type_bytes(blob: &[u8]) -> Result<Vec<&[u8]>> {
    let mut r = Reader { blob, pos: 0 };
    let conv = r.byte()?;
    if conv & sys::IMAGE_CEE_CS_CALLCONV_GENERIC as u8 != 0 {
        r.compressed_u32()?;
    }
    let count = r.compressed_u32()? as usize;
    if count > blob.len() {
        return Err(malformed("parameter count larger than the blob"));
    }
    r.type_sig(0)?;
    let mut params = Vec::with_capacity(count);
    for _ in 0..count {
        if r.peek() == Some(sys::ELEMENT_TYPE_SENTINEL as u8) {
            break;
        }
        let start = r.pos;
        r.type_sig(0)?;
        params.push(&blob[start..r.pos]);
    }
    Ok(params)
}

/// A `LocalVarSig` blob (II.23.2.6) split into its local count and the
/// encoded types that follow the count. An empty blob is no locals.
pub fn local_var_sig(blob: &[u8]) -> Result<(u32, &[u8])> {
    if blob.is_empty() {
        return Ok((0, &[]));
    }
    let mut r = Reader { blob, pos: 0 };
    if r.byte()? != sys::IMAGE_CEE_CS_CALLCONV_LOCAL_SIG as u8 {
        return Err(malformed("a local signature does not start with LOCAL_SIG"));
    }
    let count = r.compressed_u32()?;
    let start = r.pos;
    for _ in 0..count {
        // Checks the blob holds `count` types (constraints and byrefs included).
        r.type_sig(0)?;
    }
    Ok((count, &blob[start..]))
}

fn malformed(what: &str) -> Error {
    Error::Malformed(format!("signature: {what}"))
}

struct Reader<'a> {
    blob: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8> {
        let b = *self
            .blob
            .get(self.pos)
            .ok_or_else(|| malformed("truncated"))?;
        self.pos += 1;
        Ok(b)
    }

    fn peek(&self) -> Option<u8> {
        self.blob.get(self.pos).copied()
    }

    /// A compressed unsigned integer (II.23.2).
    fn compressed_u32(&mut self) -> Result<u32> {
        let b0 = self.byte()? as u32;
        if b0 & 0x80 == 0 {
            Ok(b0)
        } else if b0 & 0xc0 == 0x80 {
            Ok(((b0 & 0x3f) << 8) | self.byte()? as u32)
        } else if b0 & 0xe0 == 0xc0 {
            let (b1, b2, b3) = (
                self.byte()? as u32,
                self.byte()? as u32,
                self.byte()? as u32,
            );
            Ok(((b0 & 0x1f) << 24) | (b1 << 16) | (b2 << 8) | b3)
        } else {
            Err(malformed("bad compressed integer"))
        }
    }

    /// A compressed signed integer (II.23.2): rotated sign bit.
    fn compressed_i32(&mut self) -> Result<i32> {
        let start = self.pos;
        let raw = self.compressed_u32()?;
        let bits = match self.pos - start {
            1 => 7,
            2 => 14,
            _ => 29,
        };
        let magnitude = (raw >> 1) as i32;
        Ok(if raw & 1 == 0 {
            magnitude
        } else {
            magnitude - (1 << (bits - 1))
        })
    }

    /// `TypeDefOrRefOrSpecEncoded` (II.23.2.8).
    fn type_token(&mut self) -> Result<MdToken> {
        let coded = self.compressed_u32()?;
        let table = match coded & 3 {
            0 => sys::mdtTypeDef,
            1 => sys::mdtTypeRef,
            2 => sys::mdtTypeSpec,
            _ => return Err(malformed("bad TypeDefOrRef tag")),
        };
        Ok(MdToken(table | (coded >> 2)))
    }

    fn method_sig(&mut self, depth: usize) -> Result<MethodSig> {
        let calling_convention = self.byte()?;
        let generic_params = if calling_convention & sys::IMAGE_CEE_CS_CALLCONV_GENERIC as u8 != 0 {
            self.compressed_u32()?
        } else {
            0
        };
        let count = self.compressed_u32()? as usize;
        if count > self.blob.len() {
            return Err(malformed("parameter count larger than the blob"));
        }
        let ret = self.type_sig(depth + 1)?;
        let mut params = Vec::with_capacity(count);
        let mut varargs = Vec::new();
        let mut after_sentinel = false;
        for _ in 0..count {
            if self.peek() == Some(sys::ELEMENT_TYPE_SENTINEL as u8) {
                self.pos += 1;
                after_sentinel = true;
            }
            let t = self.type_sig(depth + 1)?;
            if after_sentinel {
                varargs.push(t);
            } else {
                params.push(t);
            }
        }
        Ok(MethodSig {
            calling_convention,
            generic_params,
            ret,
            params,
            varargs,
        })
    }

    fn type_sig(&mut self, depth: usize) -> Result<TypeSig> {
        if depth > MAX_DEPTH {
            return Err(malformed("nested too deeply"));
        }
        let e = self.byte()? as u32;
        let d = depth + 1;
        Ok(match e {
            sys::ELEMENT_TYPE_VOID..=sys::ELEMENT_TYPE_STRING
            | sys::ELEMENT_TYPE_TYPEDBYREF
            | sys::ELEMENT_TYPE_I
            | sys::ELEMENT_TYPE_U
            | sys::ELEMENT_TYPE_OBJECT => TypeSig::Primitive(e as u8),
            sys::ELEMENT_TYPE_PTR => TypeSig::Ptr(Box::new(self.type_sig(d)?)),
            sys::ELEMENT_TYPE_BYREF => TypeSig::ByRef(Box::new(self.type_sig(d)?)),
            sys::ELEMENT_TYPE_VALUETYPE => TypeSig::ValueType(self.type_token()?),
            sys::ELEMENT_TYPE_CLASS => TypeSig::Class(self.type_token()?),
            sys::ELEMENT_TYPE_VAR => TypeSig::Var(self.compressed_u32()?),
            sys::ELEMENT_TYPE_MVAR => TypeSig::MVar(self.compressed_u32()?),
            sys::ELEMENT_TYPE_SZARRAY => TypeSig::SzArray(Box::new(self.type_sig(d)?)),
            sys::ELEMENT_TYPE_ARRAY => {
                let element = Box::new(self.type_sig(d)?);
                let rank = self.compressed_u32()?;
                let n = self.compressed_u32()? as usize;
                if n > self.blob.len() {
                    return Err(malformed("array size count larger than the blob"));
                }
                let sizes = (0..n)
                    .map(|_| self.compressed_u32())
                    .collect::<Result<Vec<_>>>()?;
                let n = self.compressed_u32()? as usize;
                if n > self.blob.len() {
                    return Err(malformed("array bound count larger than the blob"));
                }
                let lower_bounds = (0..n)
                    .map(|_| self.compressed_i32())
                    .collect::<Result<Vec<_>>>()?;
                TypeSig::Array {
                    element,
                    rank,
                    sizes,
                    lower_bounds,
                }
            }
            sys::ELEMENT_TYPE_GENERICINST => {
                let kind = self.byte()? as u32;
                let value_type = match kind {
                    sys::ELEMENT_TYPE_CLASS => false,
                    sys::ELEMENT_TYPE_VALUETYPE => true,
                    _ => return Err(malformed("GENERICINST not followed by CLASS or VALUETYPE")),
                };
                let generic = self.type_token()?;
                let n = self.compressed_u32()? as usize;
                if n > self.blob.len() {
                    return Err(malformed("type argument count larger than the blob"));
                }
                let args = (0..n)
                    .map(|_| self.type_sig(d))
                    .collect::<Result<Vec<_>>>()?;
                TypeSig::GenericInst {
                    value_type,
                    generic,
                    args,
                }
            }
            sys::ELEMENT_TYPE_FNPTR => TypeSig::FnPtr(Box::new(self.method_sig(d)?)),
            sys::ELEMENT_TYPE_CMOD_REQD | sys::ELEMENT_TYPE_CMOD_OPT => {
                let modifier = self.type_token()?;
                TypeSig::Modified {
                    required: e == sys::ELEMENT_TYPE_CMOD_REQD,
                    modifier,
                    inner: Box::new(self.type_sig(d)?),
                }
            }
            sys::ELEMENT_TYPE_PINNED => TypeSig::Pinned(Box::new(self.type_sig(d)?)),
            other => return Err(malformed(&format!("unknown element type {other:#04x}"))),
        })
    }
}

/// A source of names for the tokens in a signature (the module's metadata).
pub trait TokenNames {
    /// The full name (`Namespace.Type+Nested`) of a TypeDef or TypeRef token.
    fn type_name(&self, token: MdToken) -> Result<String>;
    /// The signature blob of a TypeSpec token.
    fn type_spec(&self, token: MdToken) -> Result<Vec<u8>>;
}

/// Prints signatures in C#-like form: keywords for primitives
/// (`int`, `string`, ...), `T[]`, `T[,]`, `ref T`, `T*`, `Name<A,B>`; generic
/// parameters as `!0` / `!!0` unless type arguments are supplied.
pub struct SigFormatter<'a> {
    names: &'a dyn TokenNames,
    type_args: &'a [String],
    method_args: &'a [String],
}

impl<'a> SigFormatter<'a> {
    /// A formatter resolving tokens through `names`.
    pub fn new(names: &'a dyn TokenNames) -> Self {
        SigFormatter {
            names,
            type_args: &[],
            method_args: &[],
        }
    }

    /// Substitutes `!N` with `type_args[N]` and `!!N` with `method_args[N]`.
    pub fn with_type_args(mut self, type_args: &'a [String], method_args: &'a [String]) -> Self {
        self.type_args = type_args;
        self.method_args = method_args;
        self
    }

    /// Formats a type.
    pub fn type_sig(&self, t: &TypeSig) -> String {
        self.fmt_type(t, 0)
    }

    /// Formats a method as `ret name(params)`.
    pub fn method(&self, name: &str, sig: &MethodSig) -> String {
        let params: Vec<String> = sig.params.iter().map(|p| self.fmt_type(p, 0)).collect();
        let mut s = format!(
            "{} {}({})",
            self.fmt_type(&sig.ret, 0),
            name,
            params.join(", ")
        );
        if !sig.varargs.is_empty() {
            let extra: Vec<String> = sig.varargs.iter().map(|p| self.fmt_type(p, 0)).collect();
            s.insert_str(s.len() - 1, &format!(", __arglist({})", extra.join(", ")));
        }
        s
    }

    fn name(&self, token: MdToken, depth: usize) -> String {
        if token.table() == sys::mdtTypeSpec {
            return match self.names.type_spec(token).and_then(|b| TypeSig::parse(&b)) {
                Ok(t) if depth < MAX_DEPTH => self.fmt_type(&t, depth + 1),
                _ => format!("<typespec {:#010x}>", token.0),
            };
        }
        self.names
            .type_name(token)
            .unwrap_or_else(|_| format!("<token {:#010x}>", token.0))
    }

    fn fmt_type(&self, t: &TypeSig, depth: usize) -> String {
        if depth > MAX_DEPTH {
            return "…".into();
        }
        let d = depth + 1;
        match t {
            TypeSig::Primitive(e) => primitive_name(*e).to_string(),
            TypeSig::Class(tok) | TypeSig::ValueType(tok) => self.name(*tok, d),
            TypeSig::Ptr(inner) => format!("{}*", self.fmt_type(inner, d)),
            TypeSig::ByRef(inner) => format!("ref {}", self.fmt_type(inner, d)),
            TypeSig::SzArray(inner) => format!("{}[]", self.fmt_type(inner, d)),
            TypeSig::Array { element, rank, .. } => {
                format!(
                    "{}[{}]",
                    self.fmt_type(element, d),
                    ",".repeat(rank.saturating_sub(1) as usize)
                )
            }
            TypeSig::GenericInst { generic, args, .. } => {
                let base = self.name(*generic, d);
                let base = base.split('`').next().unwrap_or(&base).to_string();
                let args: Vec<String> = args.iter().map(|a| self.fmt_type(a, d)).collect();
                format!("{base}<{}>", args.join(","))
            }
            TypeSig::Var(n) => self
                .type_args
                .get(*n as usize)
                .cloned()
                .unwrap_or_else(|| format!("!{n}")),
            TypeSig::MVar(n) => self
                .method_args
                .get(*n as usize)
                .cloned()
                .unwrap_or_else(|| format!("!!{n}")),
            TypeSig::FnPtr(m) => {
                let params: Vec<String> = m.params.iter().map(|p| self.fmt_type(p, d)).collect();
                format!(
                    "method {} *({})",
                    self.fmt_type(&m.ret, d),
                    params.join(", ")
                )
            }
            TypeSig::Modified { inner, .. } => self.fmt_type(inner, d),
            TypeSig::Pinned(inner) => format!("{} pinned", self.fmt_type(inner, d)),
        }
    }
}

/// C# keyword (or IL name) of a primitive element type.
pub fn primitive_name(e: u8) -> &'static str {
    match e as u32 {
        sys::ELEMENT_TYPE_VOID => "void",
        sys::ELEMENT_TYPE_BOOLEAN => "bool",
        sys::ELEMENT_TYPE_CHAR => "char",
        sys::ELEMENT_TYPE_I1 => "sbyte",
        sys::ELEMENT_TYPE_U1 => "byte",
        sys::ELEMENT_TYPE_I2 => "short",
        sys::ELEMENT_TYPE_U2 => "ushort",
        sys::ELEMENT_TYPE_I4 => "int",
        sys::ELEMENT_TYPE_U4 => "uint",
        sys::ELEMENT_TYPE_I8 => "long",
        sys::ELEMENT_TYPE_U8 => "ulong",
        sys::ELEMENT_TYPE_R4 => "float",
        sys::ELEMENT_TYPE_R8 => "double",
        sys::ELEMENT_TYPE_STRING => "string",
        sys::ELEMENT_TYPE_OBJECT => "object",
        sys::ELEMENT_TYPE_I => "nint",
        sys::ELEMENT_TYPE_U => "nuint",
        sys::ELEMENT_TYPE_TYPEDBYREF => "System.TypedReference",
        _ => "?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    struct Names;
    impl TokenNames for Names {
        fn type_name(&self, token: MdToken) -> Result<String> {
            Ok(match token.0 {
                0x0200_0002 => "Jit.Box`1".into(),
                0x0100_0005 => "System.Collections.Generic.List`1".into(),
                0x0100_0006 => "System.Guid".into(),
                t => format!("T{t:x}"),
            })
        }
        fn type_spec(&self, _token: MdToken) -> Result<Vec<u8>> {
            // GENERICINST CLASS List`1 <int>
            Ok(vec![0x15, 0x12, 0x15, 0x01, 0x08])
        }
    }

    #[test]
    fn decodes_a_static_method() {
        // DEFAULT, 3 params, returns int; (string, int[], ref double)
        let sig = MethodSig::parse(&[0x00, 0x03, 0x08, 0x0e, 0x1d, 0x08, 0x10, 0x0d]).unwrap();
        assert!(!sig.has_this());
        let f = SigFormatter::new(&Names);
        assert_eq!(f.method("M", &sig), "int M(string, int[], ref double)");
    }

    #[test]
    fn decodes_instance_generic_and_typespecs() {
        // HASTHIS|GENERIC, 1 generic param, 3 params, void;
        // (!!0, class List`1<!0> via GENERICINST, valuetype System.Guid), then a TypeSpec class.
        let blob = [
            0x30, 0x01, 0x04, 0x01, 0x1e, 0x00, 0x15, 0x12, 0x15, 0x01, 0x13, 0x00, 0x11, 0x19,
            0x12, 0x0e,
        ];
        let sig = MethodSig::parse(&blob).unwrap();
        assert!(sig.has_this());
        assert_eq!(sig.generic_params, 1);
        let f = SigFormatter::new(&Names);
        assert_eq!(f.method("Get", &sig), "void Get(!!0, System.Collections.Generic.List<!0>, System.Guid, System.Collections.Generic.List<int>)");
        let targs = ["string".to_string()];
        let margs = ["long".to_string()];
        let f = SigFormatter::new(&Names).with_type_args(&targs, &margs);
        assert_eq!(f.method("Get", &sig), "void Get(long, System.Collections.Generic.List<string>, System.Guid, System.Collections.Generic.List<int>)");
    }

    #[test]
    fn decodes_general_arrays_and_compressed_ints() {
        let mut r = Reader {
            blob: &[0x03, 0xbf, 0xff, 0xc0, 0x01, 0x02, 0x03],
            pos: 0,
        };
        assert_eq!(r.compressed_u32().unwrap(), 3);
        assert_eq!(r.compressed_u32().unwrap(), 0x3fff);
        assert_eq!(r.compressed_u32().unwrap(), 0x0001_0203);
        // int[,] with no sizes or bounds
        let t = TypeSig::parse(&[0x14, 0x08, 0x02, 0x00, 0x00]).unwrap();
        assert_eq!(SigFormatter::new(&Names).type_sig(&t), "int[,]");
        // signed: 0x7b -> -3 (ECMA example: -3 encodes as 0x7B)
        let mut r = Reader {
            blob: &[0x7b],
            pos: 0,
        };
        assert_eq!(r.compressed_i32().unwrap(), -3);
    }

    #[test]
    fn rejects_truncated_and_unknown() {
        assert!(MethodSig::parse(&[0x00, 0x02, 0x08, 0x0e]).is_err());
        assert!(TypeSig::parse(&[0x99]).is_err());
        assert!(TypeSig::parse(&[]).is_err());
        // 100 nested pointers are rejected, not a stack overflow
        let mut deep = vec![0x0f; 100];
        deep.push(0x08);
        assert!(TypeSig::parse(&deep).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = MethodSig::parse(&bytes);
            if let Ok(t) = TypeSig::parse(&bytes) {
                let _ = SigFormatter::new(&Names).type_sig(&t);
            }
        }
    }
}
