//! Typed EventPipe payloads: the field types of `COR_PRF_EVENTPIPE_PARAM_TYPE`,
//! their wire encoding, and tuples of them.
//!
//! The encoding is the one EventPipe readers (TraceEvent, the runtime's own
//! tests) decode: little-endian numbers, `Boolean` as a 4-byte Win32 `BOOL`,
//! `Char` as one UTF-16 code unit, `String` as NUL-terminated UTF-16,
//! `DateTime` as a 64-bit `FILETIME`, `Guid` in its in-memory layout, and an
//! array as a 16-bit element count followed by the elements.

use crate::error::{Error, Result};
use clrprof_sys as sys;
use windows_core::GUID;

/// The type of an event field (`COR_PRF_EVENTPIPE_PARAM_TYPE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// `COR_PRF_EVENTPIPE_OBJECT`: a nested set of fields (only in events
    /// other providers define; see [`super::FieldDesc`]).
    Object,
    /// `COR_PRF_EVENTPIPE_BOOLEAN` (4 bytes).
    Boolean,
    /// `COR_PRF_EVENTPIPE_CHAR` (one UTF-16 code unit).
    Char,
    /// `COR_PRF_EVENTPIPE_SBYTE`.
    SByte,
    /// `COR_PRF_EVENTPIPE_BYTE`.
    Byte,
    /// `COR_PRF_EVENTPIPE_INT16`.
    Int16,
    /// `COR_PRF_EVENTPIPE_UINT16`.
    UInt16,
    /// `COR_PRF_EVENTPIPE_INT32`.
    Int32,
    /// `COR_PRF_EVENTPIPE_UINT32`.
    UInt32,
    /// `COR_PRF_EVENTPIPE_INT64`.
    Int64,
    /// `COR_PRF_EVENTPIPE_UINT64`.
    UInt64,
    /// `COR_PRF_EVENTPIPE_SINGLE`.
    Single,
    /// `COR_PRF_EVENTPIPE_DOUBLE`.
    Double,
    /// `COR_PRF_EVENTPIPE_DECIMAL` (16 bytes, .NET's `decimal`).
    Decimal,
    /// `COR_PRF_EVENTPIPE_DATETIME` (a `FILETIME`).
    DateTime,
    /// `COR_PRF_EVENTPIPE_GUID`.
    Guid,
    /// `COR_PRF_EVENTPIPE_STRING` (NUL-terminated UTF-16).
    String,
    /// `COR_PRF_EVENTPIPE_ARRAY` of the given element type.
    Array(ElementType),
}

/// The element type of an array field: the fixed-size types.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElementType {
    /// 4-byte `BOOL`.
    Boolean,
    /// UTF-16 code unit.
    Char,
    /// `i8`.
    SByte,
    /// `u8`.
    Byte,
    /// `i16`.
    Int16,
    /// `u16`.
    UInt16,
    /// `i32`.
    Int32,
    /// `u32`.
    UInt32,
    /// `i64`.
    Int64,
    /// `u64`.
    UInt64,
    /// `f32`.
    Single,
    /// `f64`.
    Double,
}

impl ElementType {
    /// As a field type.
    pub const fn field_type(self) -> FieldType {
        match self {
            ElementType::Boolean => FieldType::Boolean,
            ElementType::Char => FieldType::Char,
            ElementType::SByte => FieldType::SByte,
            ElementType::Byte => FieldType::Byte,
            ElementType::Int16 => FieldType::Int16,
            ElementType::UInt16 => FieldType::UInt16,
            ElementType::Int32 => FieldType::Int32,
            ElementType::UInt32 => FieldType::UInt32,
            ElementType::Int64 => FieldType::Int64,
            ElementType::UInt64 => FieldType::UInt64,
            ElementType::Single => FieldType::Single,
            ElementType::Double => FieldType::Double,
        }
    }
}

impl FieldType {
    /// The `COR_PRF_EVENTPIPE_PARAM_TYPE` value (for an array, `ARRAY`;
    /// its element's value is [`element_code`](Self::element_code)).
    pub const fn code(self) -> u32 {
        match self {
            FieldType::Object => sys::COR_PRF_EVENTPIPE_OBJECT,
            FieldType::Boolean => sys::COR_PRF_EVENTPIPE_BOOLEAN,
            FieldType::Char => sys::COR_PRF_EVENTPIPE_CHAR,
            FieldType::SByte => sys::COR_PRF_EVENTPIPE_SBYTE,
            FieldType::Byte => sys::COR_PRF_EVENTPIPE_BYTE,
            FieldType::Int16 => sys::COR_PRF_EVENTPIPE_INT16,
            FieldType::UInt16 => sys::COR_PRF_EVENTPIPE_UINT16,
            FieldType::Int32 => sys::COR_PRF_EVENTPIPE_INT32,
            FieldType::UInt32 => sys::COR_PRF_EVENTPIPE_UINT32,
            FieldType::Int64 => sys::COR_PRF_EVENTPIPE_INT64,
            FieldType::UInt64 => sys::COR_PRF_EVENTPIPE_UINT64,
            FieldType::Single => sys::COR_PRF_EVENTPIPE_SINGLE,
            FieldType::Double => sys::COR_PRF_EVENTPIPE_DOUBLE,
            FieldType::Decimal => sys::COR_PRF_EVENTPIPE_DECIMAL,
            FieldType::DateTime => sys::COR_PRF_EVENTPIPE_DATETIME,
            FieldType::Guid => sys::COR_PRF_EVENTPIPE_GUID,
            FieldType::String => sys::COR_PRF_EVENTPIPE_STRING,
            FieldType::Array(_) => sys::COR_PRF_EVENTPIPE_ARRAY,
        }
    }

    /// The element's type code of an array, 0 otherwise
    /// (`COR_PRF_EVENTPIPE_PARAM_DESC::elementType`).
    pub const fn element_code(self) -> u32 {
        match self {
            FieldType::Array(e) => e.field_type().code(),
            _ => 0,
        }
    }

    /// The scalar type of a type code (`None` for arrays and unknown codes).
    pub fn from_code(code: u32) -> Option<FieldType> {
        Some(match code {
            sys::COR_PRF_EVENTPIPE_OBJECT => FieldType::Object,
            sys::COR_PRF_EVENTPIPE_BOOLEAN => FieldType::Boolean,
            sys::COR_PRF_EVENTPIPE_CHAR => FieldType::Char,
            sys::COR_PRF_EVENTPIPE_SBYTE => FieldType::SByte,
            sys::COR_PRF_EVENTPIPE_BYTE => FieldType::Byte,
            sys::COR_PRF_EVENTPIPE_INT16 => FieldType::Int16,
            sys::COR_PRF_EVENTPIPE_UINT16 => FieldType::UInt16,
            sys::COR_PRF_EVENTPIPE_INT32 => FieldType::Int32,
            sys::COR_PRF_EVENTPIPE_UINT32 => FieldType::UInt32,
            sys::COR_PRF_EVENTPIPE_INT64 => FieldType::Int64,
            sys::COR_PRF_EVENTPIPE_UINT64 => FieldType::UInt64,
            sys::COR_PRF_EVENTPIPE_SINGLE => FieldType::Single,
            sys::COR_PRF_EVENTPIPE_DOUBLE => FieldType::Double,
            sys::COR_PRF_EVENTPIPE_DECIMAL => FieldType::Decimal,
            sys::COR_PRF_EVENTPIPE_DATETIME => FieldType::DateTime,
            sys::COR_PRF_EVENTPIPE_GUID => FieldType::Guid,
            sys::COR_PRF_EVENTPIPE_STRING => FieldType::String,
            _ => return None,
        })
    }

    /// The element type for an array of this type, if it can be one.
    pub fn as_element(self) -> Option<ElementType> {
        Some(match self {
            FieldType::Boolean => ElementType::Boolean,
            FieldType::Char => ElementType::Char,
            FieldType::SByte => ElementType::SByte,
            FieldType::Byte => ElementType::Byte,
            FieldType::Int16 => ElementType::Int16,
            FieldType::UInt16 => ElementType::UInt16,
            FieldType::Int32 => ElementType::Int32,
            FieldType::UInt32 => ElementType::UInt32,
            FieldType::Int64 => ElementType::Int64,
            FieldType::UInt64 => ElementType::UInt64,
            FieldType::Single => ElementType::Single,
            FieldType::Double => ElementType::Double,
            _ => return None,
        })
    }
}

/// A UTF-16 code unit, the value of a [`FieldType::Char`] field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Char16(pub u16);

/// A `FILETIME` (100-nanosecond ticks since 1601-01-01 UTC), the value of a
/// [`FieldType::DateTime`] field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FileTime(pub u64);

/// A decoded field value (see [`super::EventPipeEvent::values`]).
#[derive(Clone, Debug, PartialEq)]
pub enum EventValue {
    /// `Boolean`.
    Boolean(bool),
    /// `Char`.
    Char(Char16),
    /// `SByte`.
    SByte(i8),
    /// `Byte`.
    Byte(u8),
    /// `Int16`.
    Int16(i16),
    /// `UInt16`.
    UInt16(u16),
    /// `Int32`.
    Int32(i32),
    /// `UInt32`.
    UInt32(u32),
    /// `Int64`.
    Int64(i64),
    /// `UInt64`.
    UInt64(u64),
    /// `Single`.
    Single(f32),
    /// `Double`.
    Double(f64),
    /// `Decimal`: the 16 bytes of .NET's `decimal`.
    Decimal([u8; 16]),
    /// `DateTime`.
    DateTime(FileTime),
    /// `Guid`.
    Guid(GUID),
    /// `String`.
    String(String),
    /// `Array`.
    Array(Vec<EventValue>),
    /// `Object`: its fields by name, in order.
    Object(Vec<(String, EventValue)>),
}

/// Reads little-endian values off the front of an EventPipe payload or
/// metadata blob ([`Field::decode`] reads through it).
pub struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads `data` from its start.
    pub fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }

    /// `true` when every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.data.len() < n {
            return Err(Error::Malformed(format!(
                "EventPipe data ends after {} more bytes, {n} needed",
                self.data.len()
            )));
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Ok(head)
    }

    /// The next `N` bytes.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// A byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.array::<1>()?[0])
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// A NUL-terminated UTF-16 string (the NUL consumed, not returned).
    pub fn utf16z(&mut self) -> Result<String> {
        decode_utf16le(self.utf16z_bytes()?)
    }

    /// A NUL-terminated UTF-16 string's little-endian code units, not
    /// decoded (the NUL consumed, not returned): for a reader that decodes
    /// the string only sometimes ([`decode_utf16le`]).
    pub fn utf16z_bytes(&mut self) -> Result<&'a [u8]> {
        let units = self
            .data
            .chunks_exact(2)
            .position(|u| u == [0, 0])
            .ok_or_else(|| {
                Error::Malformed(format!(
                    "EventPipe string has no terminating NUL in the {} bytes left",
                    self.data.len()
                ))
            })?;
        let text = self.take(units * 2)?;
        self.take(2)?;
        Ok(text)
    }

    /// A GUID in its in-memory layout.
    pub fn guid(&mut self) -> Result<GUID> {
        let d1 = self.u32()?;
        let d2 = self.u16()?;
        let d3 = self.u16()?;
        let d4 = self.array::<8>()?;
        Ok(GUID::from_values(d1, d2, d3, d4))
    }
}

/// Decodes little-endian UTF-16 code units (an odd last byte is refused).
pub fn decode_utf16le(bytes: &[u8]) -> Result<String> {
    if bytes.len() % 2 != 0 {
        return Err(Error::Malformed(
            "EventPipe string has an odd number of bytes".into(),
        ));
    }
    char::decode_utf16(
        bytes
            .chunks_exact(2)
            .map(|u| u16::from_le_bytes([u[0], u[1]])),
    )
    .collect::<core::result::Result<String, _>>()
    .map_err(|_| Error::Malformed("EventPipe string is not valid UTF-16".into()))
}

fn put_utf16z(s: &str, out: &mut Vec<u8>) {
    for u in s.encode_utf16() {
        out.extend_from_slice(&u.to_le_bytes());
    }
    out.extend_from_slice(&[0, 0]);
}

fn put_guid(g: &GUID, out: &mut Vec<u8>) {
    out.extend_from_slice(&g.data1.to_le_bytes());
    out.extend_from_slice(&g.data2.to_le_bytes());
    out.extend_from_slice(&g.data3.to_le_bytes());
    out.extend_from_slice(&g.data4);
}

/// A Rust type that stands for one event field: its [`FieldType`], the
/// value written for it, and the value read back.
///
/// The schema type and the written value differ only for borrowed data:
/// a `String` field is written from a `&str`, a `Vec<T>` (array) field
/// from a `&[T]`.
pub trait Field: Sized + 'static {
    /// The field's type.
    const TYPE: FieldType;
    /// What [`Event::write`](super::Event::write) takes for the field.
    type Value<'a>;
    /// Appends the wire form of `value`.
    fn encode(value: &Self::Value<'_>, out: &mut Vec<u8>);
    /// Reads one value.
    fn decode(reader: &mut Reader<'_>) -> Result<Self>;
}

/// A fixed-size [`Field`] type that can be an array element.
pub trait Element: Field + Copy {
    /// The element type.
    const ELEMENT: ElementType;
    /// Appends the wire form of one element.
    fn encode_element(&self, out: &mut Vec<u8>);
}

macro_rules! le_fields {
    ($($t:ty => $ft:ident),* $(,)?) => {$(
        impl Field for $t {
            const TYPE: FieldType = FieldType::$ft;
            type Value<'a> = $t;
            fn encode(value: &$t, out: &mut Vec<u8>) {
                out.extend_from_slice(&value.to_le_bytes());
            }
            fn decode(reader: &mut Reader<'_>) -> Result<$t> {
                Ok(<$t>::from_le_bytes(reader.array()?))
            }
        }
        impl Element for $t {
            const ELEMENT: ElementType = ElementType::$ft;
            fn encode_element(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}

le_fields! {
    i8 => SByte, u8 => Byte, i16 => Int16, u16 => UInt16, i32 => Int32, u32 => UInt32,
    i64 => Int64, u64 => UInt64, f32 => Single, f64 => Double,
}

impl Field for bool {
    const TYPE: FieldType = FieldType::Boolean;
    type Value<'a> = bool;
    fn encode(value: &bool, out: &mut Vec<u8>) {
        out.extend_from_slice(&(*value as u32).to_le_bytes());
    }
    fn decode(reader: &mut Reader<'_>) -> Result<bool> {
        Ok(reader.u32()? != 0)
    }
}

impl Element for bool {
    const ELEMENT: ElementType = ElementType::Boolean;
    fn encode_element(&self, out: &mut Vec<u8>) {
        bool::encode(self, out);
    }
}

impl Field for Char16 {
    const TYPE: FieldType = FieldType::Char;
    type Value<'a> = Char16;
    fn encode(value: &Char16, out: &mut Vec<u8>) {
        out.extend_from_slice(&value.0.to_le_bytes());
    }
    fn decode(reader: &mut Reader<'_>) -> Result<Char16> {
        Ok(Char16(reader.u16()?))
    }
}

impl Element for Char16 {
    const ELEMENT: ElementType = ElementType::Char;
    fn encode_element(&self, out: &mut Vec<u8>) {
        Char16::encode(self, out);
    }
}

impl Field for FileTime {
    const TYPE: FieldType = FieldType::DateTime;
    type Value<'a> = FileTime;
    fn encode(value: &FileTime, out: &mut Vec<u8>) {
        out.extend_from_slice(&value.0.to_le_bytes());
    }
    fn decode(reader: &mut Reader<'_>) -> Result<FileTime> {
        Ok(FileTime(reader.u64()?))
    }
}

impl Field for GUID {
    const TYPE: FieldType = FieldType::Guid;
    type Value<'a> = GUID;
    fn encode(value: &GUID, out: &mut Vec<u8>) {
        put_guid(value, out);
    }
    fn decode(reader: &mut Reader<'_>) -> Result<GUID> {
        reader.guid()
    }
}

impl Field for String {
    const TYPE: FieldType = FieldType::String;
    type Value<'a> = &'a str;
    fn encode(value: &&str, out: &mut Vec<u8>) {
        put_utf16z(value, out);
    }
    fn decode(reader: &mut Reader<'_>) -> Result<String> {
        reader.utf16z()
    }
}

impl<T: Element> Field for Vec<T> {
    const TYPE: FieldType = FieldType::Array(T::ELEMENT);
    type Value<'a> = &'a [T];
    /// An array longer than 65,535 elements (its count is 16 bits on the
    /// wire) is cut to that many.
    fn encode(value: &&[T], out: &mut Vec<u8>) {
        let n = value.len().min(u16::MAX as usize);
        out.extend_from_slice(&(n as u16).to_le_bytes());
        for v in &value[..n] {
            v.encode_element(out);
        }
    }
    fn decode(reader: &mut Reader<'_>) -> Result<Vec<T>> {
        let n = reader.u16()?;
        (0..n).map(|_| T::decode(reader)).collect()
    }
}

/// The fields of an event: a tuple of [`Field`] types, e.g.
/// `(i32, String, Vec<u64>)`, or `()` for an event without payload.
pub trait Payload: Sized {
    /// The field types, in order.
    const TYPES: &'static [FieldType];
    /// What [`Event::write`](super::Event::write) takes: the tuple of the
    /// fields' [`Field::Value`]s.
    type Values<'a>;
    /// Appends the wire form of `values`.
    fn encode(values: &Self::Values<'_>, out: &mut Vec<u8>);
    /// Reads the fields back from a payload (all of it).
    fn decode(data: &[u8]) -> Result<Self>;
}

macro_rules! tuple_payloads {
    ($( ($($name:ident $idx:tt),*) )*) => {$(
        impl<$($name: Field),*> Payload for ($($name,)*) {
            const TYPES: &'static [FieldType] = &[$($name::TYPE),*];
            type Values<'a> = ($($name::Value<'a>,)*);
            #[allow(unused_variables)]
            fn encode(values: &Self::Values<'_>, out: &mut Vec<u8>) {
                $($name::encode(&values.$idx, out);)*
            }
            #[allow(unused_mut, unused_variables)]
            fn decode(data: &[u8]) -> Result<Self> {
                let mut reader = Reader::new(data);
                let values = ($($name::decode(&mut reader)?,)*);
                if !reader.is_empty() {
                    return Err(Error::Malformed(format!(
                        "EventPipe payload has bytes left after {} fields",
                        Self::TYPES.len()
                    )));
                }
                Ok(values)
            }
        }
    )*};
}

tuple_payloads! {
    ()
    (A 0)
    (A 0, B 1)
    (A 0, B 1, C 2)
    (A 0, B 1, C 2, D 3)
    (A 0, B 1, C 2, D 3, E 4)
    (A 0, B 1, C 2, D 3, E 4, F 5)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10)
    (A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11)
}

/// Decodes one value of type `ty` (with `fields` for an `Object`).
pub(crate) fn decode_value(reader: &mut Reader<'_>, ty: &super::TypeDesc) -> Result<EventValue> {
    use super::TypeDesc;
    Ok(match ty {
        TypeDesc::Scalar(t) => match t {
            FieldType::Boolean => EventValue::Boolean(bool::decode(reader)?),
            FieldType::Char => EventValue::Char(Char16::decode(reader)?),
            FieldType::SByte => EventValue::SByte(i8::decode(reader)?),
            FieldType::Byte => EventValue::Byte(u8::decode(reader)?),
            FieldType::Int16 => EventValue::Int16(i16::decode(reader)?),
            FieldType::UInt16 => EventValue::UInt16(u16::decode(reader)?),
            FieldType::Int32 => EventValue::Int32(i32::decode(reader)?),
            FieldType::UInt32 => EventValue::UInt32(u32::decode(reader)?),
            FieldType::Int64 => EventValue::Int64(i64::decode(reader)?),
            FieldType::UInt64 => EventValue::UInt64(u64::decode(reader)?),
            FieldType::Single => EventValue::Single(f32::decode(reader)?),
            FieldType::Double => EventValue::Double(f64::decode(reader)?),
            FieldType::Decimal => EventValue::Decimal(reader.array()?),
            FieldType::DateTime => EventValue::DateTime(FileTime::decode(reader)?),
            FieldType::Guid => EventValue::Guid(reader.guid()?),
            FieldType::String => EventValue::String(reader.utf16z()?),
            FieldType::Object | FieldType::Array(_) => {
                return Err(Error::Malformed(format!(
                    "EventPipe metadata: {t:?} described as a scalar"
                )))
            }
        },
        TypeDesc::Array(element) => {
            let n = reader.u16()?;
            let mut items = Vec::with_capacity(n as usize);
            for _ in 0..n {
                items.push(decode_value(reader, element)?);
            }
            EventValue::Array(items)
        }
        TypeDesc::Object(fields) => {
            let mut out = Vec::with_capacity(fields.len());
            for f in fields {
                out.push((f.name.clone(), decode_value(reader, &f.ty)?));
            }
            EventValue::Object(out)
        }
    })
}
