//! Reading managed objects: a string's text, an array's elements, a field's
//! value by name, a static field's value.
//!
//! The profiling API describes object layouts but leaves reading them to the
//! profiler: `GetStringLayout2` says where a string's length and characters
//! are, `GetArrayObjectInfo` where an array's elements start,
//! `GetClassLayout` at which offset each instance field lives (for a
//! reference type counted from the object's start, the method-table pointer
//! included; for a value type from the start of the unboxed value),
//! `GetBoxClassLayout` where a boxed value starts and the
//! `Get*StaticAddress` methods where a static field's storage is. The field's
//! type comes from its metadata signature. These readers put the pieces
//! together and check each step, so no read leaves the object.
//!
//! # Object references
//!
//! A value becomes an [`ObjectId`] only when the runtime says the slot
//! holds a reference: an instance field whose metadata type is a reference
//! type *and* whose slot the GC walks as a reference of the object
//! (`EnumerateObjectReferences`); an array element whose element type, from
//! the runtime's own type handle (`IsArrayClass`), is a reference type; a
//! static whose metadata type is a reference type (the runtime lays out
//! static storage from that same signature: reference statics live in its
//! GC statics, the rest in plain memory). Anything else claiming to be a
//! reference is an error, never an `ObjectId` made of its bits.
//!
//! # Validity
//!
//! An [`ObjectId`] is the object's address and stays valid until the next
//! GC starts (BOTR *Profiling*, "Lifetime & Stability"). A typed
//! `ObjectId<'a>` exists only where the runtime keeps the object in place
//! for `'a` (the callback that received it), so no GC relocates anything
//! during `'a`, and an object reference read from one of its fields or
//! elements is valid for `'a` too: it comes back with the same lifetime.
//!
//! A static field is different: its storage lives as long as the class,
//! but the reference it holds is only good until the next GC. So
//! [`ProfilerInfo::static_field_value`] ties the value to the scope (`'s`),
//! and refuses with [`Error::GcMayRun`] in a scope where a collection can
//! run at the same time (most callbacks; see
//! [`ProfilerInfo::gc_blocked`]): read statics from a callback that receives
//! `ObjectID`s, from an ELT hook, or under a runtime suspension.

use crate::error::{check, Error, KnownHresult, Result};
use crate::ids::*;
use crate::info::classes::{CorElementType, StaticFieldKinds};
use crate::info::{MetaDataOpen, ProfilerInfo};
use crate::signature::TypeSig;
use clrprof_sys as sys;
use core::ffi::c_void;

/// A value read from a field or an array element.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value<'a> {
    /// `bool`.
    Bool(bool),
    /// `char` (one UTF-16 unit).
    Char(u16),
    /// `sbyte`.
    I8(i8),
    /// `byte`.
    U8(u8),
    /// `short`.
    I16(i16),
    /// `ushort`.
    U16(u16),
    /// `int`.
    I32(i32),
    /// `uint`.
    U32(u32),
    /// `long`.
    I64(i64),
    /// `ulong`.
    U64(u64),
    /// `float`.
    F32(f32),
    /// `double`.
    F64(f64),
    /// `IntPtr` / `nint` (and unmanaged pointers).
    IntPtr(isize),
    /// `UIntPtr` / `nuint`.
    UIntPtr(usize),
    /// An object reference; null when the field holds `null`.
    Object(ObjectId<'a>),
    /// A value of a type these readers do not decode (a struct, an enum, a
    /// generic parameter): where it is stored, valid as long as the object.
    Unread {
        /// Address of the value.
        address: usize,
    },
}

impl<'a> Value<'a> {
    /// The value as a signed integer, for any integral or `char`/`bool` value.
    pub fn as_i64(&self) -> Option<i64> {
        Some(match *self {
            Value::Bool(b) => b as i64,
            Value::Char(c) => c as i64,
            Value::I8(v) => v as i64,
            Value::U8(v) => v as i64,
            Value::I16(v) => v as i64,
            Value::U16(v) => v as i64,
            Value::I32(v) => v as i64,
            Value::U32(v) => v as i64,
            Value::I64(v) => v,
            Value::U64(v) => i64::try_from(v).ok()?,
            Value::IntPtr(v) => v as i64,
            Value::UIntPtr(v) => i64::try_from(v).ok()?,
            _ => return None,
        })
    }

    /// The object reference, if this is one (null references included).
    pub fn as_object(&self) -> Option<ObjectId<'a>> {
        match *self {
            Value::Object(o) => Some(o),
            _ => None,
        }
    }
}

/// How a value of some type is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    Bool,
    Char,
    I1,
    U1,
    I2,
    U2,
    I4,
    U4,
    I8,
    U8,
    R4,
    R8,
    I,
    U,
    Reference,
    Other,
}

impl Slot {
    fn of_element(e: u8) -> Slot {
        match e as sys::CorElementType {
            sys::ELEMENT_TYPE_BOOLEAN => Slot::Bool,
            sys::ELEMENT_TYPE_CHAR => Slot::Char,
            sys::ELEMENT_TYPE_I1 => Slot::I1,
            sys::ELEMENT_TYPE_U1 => Slot::U1,
            sys::ELEMENT_TYPE_I2 => Slot::I2,
            sys::ELEMENT_TYPE_U2 => Slot::U2,
            sys::ELEMENT_TYPE_I4 => Slot::I4,
            sys::ELEMENT_TYPE_U4 => Slot::U4,
            sys::ELEMENT_TYPE_I8 => Slot::I8,
            sys::ELEMENT_TYPE_U8 => Slot::U8,
            sys::ELEMENT_TYPE_R4 => Slot::R4,
            sys::ELEMENT_TYPE_R8 => Slot::R8,
            sys::ELEMENT_TYPE_I => Slot::I,
            sys::ELEMENT_TYPE_U => Slot::U,
            sys::ELEMENT_TYPE_STRING | sys::ELEMENT_TYPE_OBJECT => Slot::Reference,
            _ => Slot::Other,
        }
    }

    fn of_sig(t: &TypeSig) -> Slot {
        match t {
            TypeSig::Primitive(e) => Slot::of_element(*e),
            TypeSig::Class(_) | TypeSig::SzArray(_) | TypeSig::Array { .. } => Slot::Reference,
            TypeSig::GenericInst {
                value_type: false, ..
            } => Slot::Reference,
            TypeSig::Ptr(_) | TypeSig::FnPtr(_) => Slot::I,
            TypeSig::Modified { inner, .. } | TypeSig::Pinned(inner) => Slot::of_sig(inner),
            _ => Slot::Other,
        }
    }

    fn of_array_element(e: CorElementType) -> Slot {
        use CorElementType as C;
        match e {
            C::Boolean => Slot::Bool,
            C::Char => Slot::Char,
            C::I1 => Slot::I1,
            C::U1 => Slot::U1,
            C::I2 => Slot::I2,
            C::U2 => Slot::U2,
            C::I4 => Slot::I4,
            C::U4 => Slot::U4,
            C::I8 => Slot::I8,
            C::U8 => Slot::U8,
            C::R4 => Slot::R4,
            C::R8 => Slot::R8,
            C::I | C::Ptr | C::FnPtr => Slot::I,
            C::U => Slot::U,
            // The runtime's own element type handle (`IsArrayClass`) names
            // these reference kinds; anything else is not read as an object.
            C::String | C::Class | C::Object | C::SzArray | C::Array => Slot::Reference,
            _ => Slot::Other,
        }
    }

    /// Bytes one value takes (array stride), when known.
    fn size(self) -> Option<usize> {
        Some(match self {
            Slot::Bool | Slot::I1 | Slot::U1 => 1,
            Slot::Char | Slot::I2 | Slot::U2 => 2,
            Slot::I4 | Slot::U4 | Slot::R4 => 4,
            Slot::I8 | Slot::U8 | Slot::R8 => 8,
            Slot::I | Slot::U | Slot::Reference => core::mem::size_of::<usize>(),
            Slot::Other => return None,
        })
    }

    /// Reads a value of this kind at `address`.
    ///
    /// # Safety
    /// `address` must point to a readable value of this kind (for
    /// `Slot::Other`, nothing is read) that stays in place for `'a`.
    unsafe fn read<'a>(self, address: usize) -> Value<'a> {
        let p = address as *const u8;
        // SAFETY: [caller-contract] guaranteed by the caller; unaligned reads because nothing
        // in the layout contract promises natural alignment.
        unsafe {
            match self {
                Slot::Bool => Value::Bool(p.read() != 0),
                Slot::Char => Value::Char(p.cast::<u16>().read_unaligned()),
                Slot::I1 => Value::I8(p.cast::<i8>().read()),
                Slot::U1 => Value::U8(p.read()),
                Slot::I2 => Value::I16(p.cast::<i16>().read_unaligned()),
                Slot::U2 => Value::U16(p.cast::<u16>().read_unaligned()),
                Slot::I4 => Value::I32(p.cast::<i32>().read_unaligned()),
                Slot::U4 => Value::U32(p.cast::<u32>().read_unaligned()),
                Slot::I8 => Value::I64(p.cast::<i64>().read_unaligned()),
                Slot::U8 => Value::U64(p.cast::<u64>().read_unaligned()),
                Slot::R4 => Value::F32(p.cast::<f32>().read_unaligned()),
                Slot::R8 => Value::F64(p.cast::<f64>().read_unaligned()),
                Slot::I => Value::IntPtr(p.cast::<isize>().read_unaligned()),
                Slot::U => Value::UIntPtr(p.cast::<usize>().read_unaligned()),
                // The slot holds the referenced object's address (its ObjectID),
                // valid as long as the object holding it.
                Slot::Reference => {
                    Value::Object(ObjectId::from_sys(p.cast::<usize>().read_unaligned()))
                }
                Slot::Other => Value::Unread { address },
            }
        }
    }
}

/// What [`slot_visited`] looks for.
struct SlotSearch {
    address: usize,
    found: bool,
}

/// The `ObjectReferenceCallback` of [`ProfilerInfo::is_reference_slot`]:
/// stops the walk at the slot it looks for. Reads nothing.
unsafe extern "system" fn slot_visited(
    _root: sys::ObjectID,
    reference: *mut sys::ObjectID,
    client_data: *mut c_void,
) -> sys::BOOL {
    if client_data.is_null() {
        return 0;
    }
    // SAFETY: [callback-args, local-memory] `client_data` is the `&mut SlotSearch` that `is_reference_slot`
    // passed to EnumerateObjectReferences; the runtime hands it back
    // unchanged, on the calling thread, while that call runs (corprof.idl).
    let search = unsafe { &mut *(client_data as *mut SlotSearch) };
    if reference as usize == search.address {
        search.found = true;
        return 0;
    }
    1
}

impl<'s> ProfilerInfo<'s> {
    /// The text of a `System.String` object (`GetStringLayout2`). Checks the
    /// object's class first (`GetClassFromObject`): reading another object
    /// as a string would read past its end. Invalid UTF-16 (a lone
    /// surrogate, which .NET strings may hold) is an [`Error::InvalidUtf16`].
    pub fn string_text(&self, object: ObjectId<'_>) -> Result<String> {
        const CALL: &str = "string_text";
        if object.is_null() {
            return Err(Error::InvalidArgument("string_text: null object"));
        }
        let class = self.class_from_object(object)?;
        if self.class_name(class)? != "System.String" {
            return Err(Error::InvalidArgument(
                "string_text: the object is not a System.String",
            ));
        }
        let layout = self.string_layout2()?;
        let size = self.object_size(object)? as usize;
        let base = object.as_sys();
        // SAFETY: [object-no-gc] `object` is a live System.String for the scope of the ID;
        // GetStringLayout2 gives the offset of its 32-bit length inside it.
        let len = unsafe {
            ((base + layout.string_length_offset as usize) as *const u32).read_unaligned()
        } as usize;
        let end = (layout.buffer_offset as usize).saturating_add(len.saturating_mul(2));
        if end > size {
            return Err(Error::InconsistentAnswer { call: CALL });
        }
        // SAFETY: [object-no-gc, local-memory] `len` UTF-16 units start at the buffer offset and end inside
        // the object (checked against GetObjectSize above); the string is
        // immutable and does not move while the ID is valid.
        let units = unsafe {
            core::slice::from_raw_parts((base + layout.buffer_offset as usize) as *const u16, len)
        };
        String::from_utf16(units).map_err(|_| Error::InvalidUtf16 { call: CALL })
    }

    /// The elements of an array object, in storage order (row-major for
    /// multi-dimensional arrays), from `IsArrayClass` and
    /// `GetArrayObjectInfo`. Arrays of structs (and of anything whose
    /// element type is not a primitive or a reference type) are refused with
    /// [`Error::InvalidArgument`]: their elements are not decoded.
    pub fn array_elements<'a>(&self, object: ObjectId<'a>) -> Result<Vec<Value<'a>>> {
        let class = self.class_from_object(object)?;
        let array = self.is_array_class(class)?.ok_or(Error::InvalidArgument(
            "array_elements: the object is not an array",
        ))?;
        let slot = Slot::of_array_element(array.element_type);
        let stride = slot.size().ok_or(Error::InvalidArgument(
            "array_elements: elements of struct type are not decoded",
        ))?;
        let info = self.array_object_info(object)?;
        let count = info
            .dimensions
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d as usize))
            .ok_or(Error::InconsistentAnswer {
                call: "ICorProfilerInfo2::GetArrayObjectInfo",
            })?;
        let size = self.object_size(object)? as usize;
        let data_offset = (info.data as usize).wrapping_sub(object.as_sys());
        if count
            .checked_mul(stride)
            .and_then(|b| b.checked_add(data_offset))
            .is_none_or(|end| end > size)
        {
            return Err(Error::InconsistentAnswer {
                call: "ICorProfilerInfo2::GetArrayObjectInfo",
            });
        }
        Ok((0..count)
            // SAFETY: [object-no-gc] every element lies inside the array object (checked
            // against GetObjectSize above) and has the array's element type;
            // the array stays in place while the ID is valid ('a).
            .map(|i| unsafe { slot.read(info.data as usize + i * stride) })
            .collect())
    }

    /// The value inside a boxed primitive (`System.Int32`, `System.Double`,
    /// `System.Boolean`, `System.Char`, `System.IntPtr`, ...), found with
    /// `GetBoxClassLayout`. Other boxed value types come back as
    /// [`Value::Unread`] at the value's address; objects that are not boxed
    /// value types are an [`Error::Runtime`] from the runtime (`E_INVALIDARG`).
    pub fn unboxed_value<'a>(&self, object: ObjectId<'a>) -> Result<Value<'a>> {
        if object.is_null() {
            return Err(Error::InvalidArgument("unboxed_value: null object"));
        }
        let class = self.class_from_object(object)?;
        let offset = self.box_class_layout(class)? as usize;
        let slot = match self.class_name(class)?.as_str() {
            "System.Boolean" => Slot::Bool,
            "System.Char" => Slot::Char,
            "System.SByte" => Slot::I1,
            "System.Byte" => Slot::U1,
            "System.Int16" => Slot::I2,
            "System.UInt16" => Slot::U2,
            "System.Int32" => Slot::I4,
            "System.UInt32" => Slot::U4,
            "System.Int64" => Slot::I8,
            "System.UInt64" => Slot::U8,
            "System.Single" => Slot::R4,
            "System.Double" => Slot::R8,
            "System.IntPtr" => Slot::I,
            "System.UIntPtr" => Slot::U,
            _ => Slot::Other,
        };
        let size = self.object_size(object)? as usize;
        if offset.saturating_add(slot.size().unwrap_or(0)) > size {
            return Err(Error::InconsistentAnswer {
                call: "ICorProfilerInfo2::GetBoxClassLayout",
            });
        }
        // SAFETY: [object-no-gc] the boxed value starts at the offset GetBoxClassLayout gave
        // and lies inside the live object (checked against GetObjectSize); its
        // type is the boxed class's, named above.
        Ok(unsafe { slot.read(object.as_sys() + offset) })
    }

    /// The value of the instance field `name` of `object`, looked up in the
    /// object's class and then its base classes (`GetClassIDInfo2`,
    /// `GetClassLayout`, the fields' metadata names and signatures).
    /// A missing field is an [`Error::Usage`] naming it.
    ///
    /// `GetClassLayout` counts a reference type's field offsets from the
    /// object's start (the method-table pointer included) but a value type's
    /// from the start of the unboxed value (proftoeeinterfaceimpl.cpp adds
    /// `Object::GetOffsetOfFirstField()` only when the class is not a value
    /// type), so for a boxed value type the offsets are taken from where
    /// `GetBoxClassLayout` says the value starts.
    ///
    /// A field is read as an object reference only when both its metadata
    /// type is a reference type and the GC walks that very slot as a
    /// reference of the object (`EnumerateObjectReferences`, Info10); any
    /// other field that claims to hold a reference is an
    /// [`Error::InconsistentAnswer`], never an [`ObjectId`] made of its bits.
    /// On a runtime without Info10 (before .NET Core 3.0) a non-null
    /// reference field is therefore [`Error::Unsupported`].
    pub fn field_value<'a>(&self, object: ObjectId<'a>, name: &str) -> Result<Value<'a>> {
        if object.is_null() {
            return Err(Error::InvalidArgument("field_value: null object"));
        }
        let mut class = self.class_from_object(object)?;
        let size = self.object_size(object)? as usize;
        // Only the object's own class can be a value type (value types are
        // sealed; their bases System.ValueType / System.Enum have no fields).
        let mut base = self.value_start(class)?;
        while !class.is_null() {
            let info = self.class_info(class)?;
            let layout = self.class_layout(class)?;
            let metadata = self.module_metadata(info.module, MetaDataOpen::Read)?;
            for field in &layout.fields {
                let (field_name, _, _, sig) = metadata.field_props(field.field)?;
                if field_name != name {
                    continue;
                }
                let slot = Slot::of_sig(&TypeSig::parse_field(&sig)?);
                let offset =
                    base.checked_add(field.offset as usize)
                        .ok_or(Error::InconsistentAnswer {
                            call: "ICorProfilerInfo2::GetClassLayout",
                        })?;
                return self.read_field(object, size, offset, slot);
            }
            class = info.parent;
            base = 0;
        }
        Err(Error::Usage(format!(
            "field_value: the object's class has no instance field named {name:?}"
        )))
    }

    /// The value of the instance field `name` of element `index` (in
    /// storage order, as [`array_elements`](Self::array_elements) counts)
    /// of an array of structs. `GetClassLayout` counts a value type's
    /// offsets from the start of the value, so the field is read at the
    /// element's start (`GetArrayObjectInfo`'s data plus `index` times the
    /// struct's size, `GetClassLayout`'s unboxed size) plus its offset; the
    /// whole array must fit in the object (`GetObjectSize`). References are
    /// checked against the GC's walk of the array, as in
    /// [`field_value`](Self::field_value). Arrays of anything but structs
    /// are an [`Error::InvalidArgument`] (use `array_elements`).
    pub fn array_element_field<'a>(
        &self,
        array: ObjectId<'a>,
        index: usize,
        name: &str,
    ) -> Result<Value<'a>> {
        const CALL: &str = "ICorProfilerInfo2::GetArrayObjectInfo";
        if array.is_null() {
            return Err(Error::InvalidArgument("array_element_field: null object"));
        }
        let class = self.class_from_object(array)?;
        let element = match self.is_array_class(class)? {
            Some(a)
                if a.element_type == CorElementType::ValueType && !a.element_class.is_null() =>
            {
                a.element_class
            }
            _ => {
                return Err(Error::InvalidArgument(
                    "array_element_field: the object is not an array of structs",
                ))
            }
        };
        let info = self.array_object_info(array)?;
        let count = info
            .dimensions
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d as usize))
            .ok_or(Error::InconsistentAnswer { call: CALL })?;
        if index >= count {
            return Err(Error::InvalidArgument(
                "array_element_field: index past the array's end",
            ));
        }
        let layout = self.class_layout(element)?;
        let stride = layout.size as usize;
        let size = self.object_size(array)? as usize;
        let data_offset = (info.data as usize).wrapping_sub(array.as_sys());
        if count
            .checked_mul(stride)
            .and_then(|b| b.checked_add(data_offset))
            .is_none_or(|end| end > size)
        {
            return Err(Error::InconsistentAnswer { call: CALL });
        }
        let metadata =
            self.module_metadata(self.class_info(element)?.module, MetaDataOpen::Read)?;
        for field in &layout.fields {
            let (field_name, _, _, sig) = metadata.field_props(field.field)?;
            if field_name != name {
                continue;
            }
            let slot = Slot::of_sig(&TypeSig::parse_field(&sig)?);
            if (field.offset as usize).saturating_add(slot.size().unwrap_or(0)) > stride {
                return Err(Error::InconsistentAnswer {
                    call: "ICorProfilerInfo2::GetClassLayout",
                });
            }
            // In bounds: index < count and the array's data fits (above).
            let offset = data_offset + index * stride + field.offset as usize;
            return self.read_field(array, size, offset, slot);
        }
        Err(Error::Usage(format!(
            "array_element_field: the element type has no instance field named {name:?}"
        )))
    }

    /// Where `GetClassLayout`'s offsets of `class` start inside an instance
    /// of it: 0 for a reference type, the boxed value's offset
    /// (`GetBoxClassLayout`) for a value type. The runtime answers
    /// `GetBoxClassLayout` with `E_INVALIDARG` exactly when the class is not
    /// a value type (`!TypeHandle::IsValueType()`).
    fn value_start(&self, class: ClassId<'_>) -> Result<usize> {
        match self.box_class_layout(class) {
            Ok(offset) => Ok(offset as usize),
            Err(Error::Runtime { hr, .. }) if hr.0 == KnownHresult::E_INVALIDARG as i32 => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Reads the `slot` at `offset` bytes into `object` (of `size` bytes).
    fn read_field<'a>(
        &self,
        object: ObjectId<'a>,
        size: usize,
        offset: usize,
        slot: Slot,
    ) -> Result<Value<'a>> {
        if offset.saturating_add(slot.size().unwrap_or(0)) > size {
            return Err(Error::InconsistentAnswer {
                call: "ICorProfilerInfo2::GetClassLayout",
            });
        }
        let address = object.as_sys() + offset;
        if slot == Slot::Reference {
            // SAFETY: [object-no-gc] the slot lies inside the live object (checked against
            // GetObjectSize above) and the object stays put for 'a; a
            // pointer-sized read of plain bits, not yet taken as an ObjectID.
            let bits = unsafe { (address as *const usize).read_unaligned() };
            if bits == 0 {
                // SAFETY: [object-no-gc] null is the runtime's "no object" value; every
                // reader refuses a null ObjectId before calling the runtime.
                return Ok(Value::Object(unsafe { ObjectId::from_sys(0) }));
            }
            if !self.is_reference_slot(object, address)? {
                return Err(Error::InconsistentAnswer {
                    call: "ICorProfilerInfo10::EnumerateObjectReferences",
                });
            }
        }
        // SAFETY: [object-no-gc] the field lies inside the live object (checked against
        // GetObjectSize above) and has the type of its signature; a reference
        // slot is one the GC itself walks as a reference of this object
        // (checked above), so its bits are the ObjectID of a live object,
        // which stays in place as long as the object holding it ('a).
        Ok(unsafe { slot.read(address) })
    }

    /// `true` if the GC walks `address` as one of `object`'s non-null
    /// reference slots (`EnumerateObjectReferences`, Info10: the runtime's
    /// `ObjectReferenceCallback` receives the address of each slot).
    fn is_reference_slot(&self, object: ObjectId<'_>, address: usize) -> Result<bool> {
        const CALL: &str = "ICorProfilerInfo10::EnumerateObjectReferences";
        let i10 = self.raw_info10(CALL)?;
        let mut state = SlotSearch {
            address,
            found: false,
        };
        // SAFETY: [object-no-gc] `object` is a live object for this call (typed ID, not
        // null); the callback matches ObjectReferenceCallback and `state`
        // outlives the call, used only on this thread through the client data.
        let hr = unsafe {
            i10.EnumerateObjectReferences(
                object.as_sys(),
                Some(slot_visited),
                &mut state as *mut SlotSearch as *mut c_void,
            )
        };
        check(hr, CALL)?;
        Ok(state.found)
    }

    /// The value of the static field `name` of `class` (not its base
    /// classes), as seen in `app_domain` (for `[ThreadStatic]` fields: on the
    /// calling thread). Uses `GetStaticFieldInfo` and the matching
    /// `Get*StaticAddress` method; the runtime answers
    /// `CORPROF_E_DATAINCOMPLETE` until the class's static constructor has run.
    ///
    /// An object reference read here is valid until the next GC starts, so
    /// the value borrows this scope (`'s`), and the call fails with
    /// [`Error::GcMayRun`] unless [`gc_blocked`](Self::gc_blocked).
    pub fn static_field_value(
        &self,
        class: ClassId<'_>,
        name: &str,
        app_domain: AppDomainId<'_>,
    ) -> Result<Value<'s>> {
        self.require_gc_blocked("ProfilerInfo::static_field_value")?;
        let info = self.class_info(class)?;
        let metadata = self.module_metadata(info.module, MetaDataOpen::Read)?;
        let wide = crate::buffer::to_wide(name);
        let mut token = 0u32;
        // SAFETY: [id-scope, nul-terminated] `wide` is NUL-terminated and outlives the call; no signature
        // is given (null, 0); the out pointer is a local.
        let hr = unsafe {
            metadata.raw().FindField(
                info.type_def.0,
                wide.as_ptr(),
                core::ptr::null(),
                0,
                &mut token,
            )
        };
        if hr.0 < 0 || token == 0 {
            return Err(Error::Usage(format!(
                "static_field_value: the class has no field named {name:?}"
            )));
        }
        let field = MdFieldDef(token);
        let (_, _, _, sig) = metadata.field_props(field)?;
        let slot = Slot::of_sig(&TypeSig::parse_field(&sig)?);
        let kinds = self.static_field_info(class, field)?;
        let address = if kinds.contains(StaticFieldKinds::THREAD) {
            self.thread_static_address(class, field, None)?
        } else if kinds.contains(StaticFieldKinds::RVA) {
            self.rva_static_address(class, field)?
        } else if kinds.contains(StaticFieldKinds::APP_DOMAIN) {
            self.app_domain_static_address(class, field, app_domain)?
        } else {
            return Err(Error::Usage(format!(
                "static_field_value: {name:?} is not a static field with an address"
            )));
        };
        if address.is_null() {
            return Err(Error::InconsistentAnswer {
                call: "ICorProfilerInfo2::Get*StaticAddress",
            });
        }
        // SAFETY: [module-lifetime] the runtime returned the address of the field's storage,
        // valid while the class is loaded (which `class` guarantees for this
        // call); the value has the field's signature type. An object
        // reference in it stays valid for 's: this scope blocks garbage
        // collections (checked above), and only a GC moves or frees objects.
        Ok(unsafe { slot.read(address as usize) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_follow_signatures() {
        assert_eq!(
            Slot::of_sig(&TypeSig::Primitive(sys::ELEMENT_TYPE_I4 as u8)),
            Slot::I4
        );
        assert_eq!(
            Slot::of_sig(&TypeSig::Primitive(sys::ELEMENT_TYPE_STRING as u8)),
            Slot::Reference
        );
        assert_eq!(
            Slot::of_sig(&TypeSig::ValueType(MdToken(0x0200_0001))),
            Slot::Other
        );
        assert_eq!(
            Slot::of_array_element(CorElementType::Class),
            Slot::Reference
        );
        assert_eq!(Slot::R8.size(), Some(8));
        assert_eq!(Slot::Other.size(), None);
    }

    #[test]
    fn reads_values_of_each_slot() {
        let bytes: [u8; 8] = 0x0102_0304_0506_0708u64.to_le_bytes();
        let a = bytes.as_ptr() as usize;
        // SAFETY: [local-memory] `bytes` holds 8 readable bytes for the whole test.
        unsafe {
            assert_eq!(Slot::U8.read(a), Value::U64(0x0102_0304_0506_0708));
            assert_eq!(Slot::I4.read(a), Value::I32(0x0506_0708));
            assert_eq!(Slot::U1.read(a), Value::U8(8));
            assert_eq!(Slot::Other.read(a), Value::Unread { address: a });
        }
        assert_eq!(Value::U16(7).as_i64(), Some(7));
        assert_eq!(Value::F32(1.0).as_i64(), None);
    }

    mod fake {
        use super::super::*;
        use crate::testing::fake::FakeMetaData;
        use crate::testing::fake::{fake_ids, FakeClass, FakeModule, FakeObject, FakeRuntime};
        use std::sync::Arc;

        const M: usize = 0x2000;
        const STRING: usize = 0x3000;
        const OTHER: usize = 0x3100;
        const INTS: usize = 0x3200;
        const LONG: usize = 0x3300;

        /// A runtime whose objects live in `heap` (object IDs are addresses).
        fn world() -> FakeRuntime {
            world_of(FakeRuntime::new())
        }

        fn world_of(fake: FakeRuntime) -> FakeRuntime {
            {
                let mut st = fake.state();
                let md = FakeMetaData::default()
                    .with_type(0x0200_0001, "System.String")
                    .with_type(0x0200_0002, "Ns.Other")
                    .with_type(0x0200_0003, "System.Int64");
                st.modules.insert(
                    M,
                    FakeModule {
                        metadata: Arc::new(md),
                        ..Default::default()
                    },
                );
                for (class, td) in [(STRING, 1), (OTHER, 2)] {
                    st.classes.insert(
                        class,
                        FakeClass {
                            module: M,
                            type_def: 0x0200_0000 | td,
                            ..Default::default()
                        },
                    );
                }
                st.classes.insert(
                    LONG,
                    FakeClass {
                        module: M,
                        type_def: 0x0200_0003,
                        box_offset: Some(8),
                        ..Default::default()
                    },
                );
                st.classes.insert(
                    INTS,
                    FakeClass {
                        array: Some((sys::ELEMENT_TYPE_I4, 0, 1)),
                        ..Default::default()
                    },
                );
            }
            fake
        }

        fn object(fake: &FakeRuntime, address: usize, class: usize, size: u32) {
            fake.state().objects.insert(
                address,
                FakeObject {
                    class,
                    size,
                    array: None,
                },
            );
        }

        /// A 64-bit CoreCLR string object: method table, 32-bit length at 8, UTF-16 at 12.
        fn string_object(text: &str, claimed_len: Option<u32>) -> Vec<u8> {
            let units: Vec<u16> = text.encode_utf16().collect();
            let mut bytes = vec![0u8; 8];
            bytes.extend(claimed_len.unwrap_or(units.len() as u32).to_le_bytes());
            for u in units {
                bytes.extend(u.to_le_bytes());
            }
            bytes.extend([0, 0]);
            bytes
        }

        #[test]
        fn string_text_reads_a_string_and_checks_class_and_bounds() {
            let fake = world();
            // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
            let info = unsafe { fake.profiler_info() };
            let s = string_object("héllo ✓", None);
            let addr = s.as_ptr() as usize;
            object(&fake, addr, STRING, s.len() as u32);
            fake_ids!(fake; o = object_id(addr));
            assert_eq!(info.string_text(o).unwrap(), "héllo ✓");

            // Another class: refused before reading anything.
            fake.state().objects.get_mut(&addr).unwrap().class = OTHER;
            assert!(matches!(
                info.string_text(o),
                Err(Error::InvalidArgument(_))
            ));

            // A length that would run past the object's size: refused.
            let bad = string_object("ab", Some(1000));
            let bad_addr = bad.as_ptr() as usize;
            object(&fake, bad_addr, STRING, bad.len() as u32);
            fake_ids!(fake; b = object_id(bad_addr));
            assert!(matches!(
                info.string_text(b),
                Err(Error::InconsistentAnswer { .. })
            ));
        }

        #[test]
        fn array_elements_reads_ints_inside_the_object() {
            let fake = world();
            // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
            let info = unsafe { fake.profiler_info() };
            let mut heap = vec![0u8; 16];
            for v in [3i32, -1, 7, 42] {
                heap.extend(v.to_le_bytes());
            }
            let addr = heap.as_ptr() as usize;
            fake.state().objects.insert(
                addr,
                FakeObject {
                    class: INTS,
                    size: heap.len() as u32,
                    array: Some((vec![4], vec![0], addr + 16)),
                },
            );
            fake_ids!(fake; o = object_id(addr));
            let v: Vec<i64> = info
                .array_elements(o)
                .unwrap()
                .iter()
                .filter_map(Value::as_i64)
                .collect();
            assert_eq!(v, [3, -1, 7, 42]);

            // More elements than the object holds: refused.
            fake.state().objects.get_mut(&addr).unwrap().array =
                Some((vec![5], vec![0], addr + 16));
            assert!(matches!(
                info.array_elements(o),
                Err(Error::InconsistentAnswer { .. })
            ));
        }

        #[test]
        fn static_values_only_where_no_gc_can_run() {
            let fake = world();
            fake.state().app_domains.insert(0x9000, Default::default());
            fake_ids!(fake; c = class_id(STRING), ad = app_domain_id(0x9000));
            // SAFETY: [test-fake] no object memory is read in this test.
            let callback = unsafe { fake.profiler_info() };
            assert!(!callback.gc_blocked());
            let before = fake.state().calls.len();
            assert_eq!(
                callback.static_field_value(c, "Empty", ad).unwrap_err(),
                Error::GcMayRun {
                    call: "ProfilerInfo::static_field_value"
                }
            );
            assert_eq!(fake.state().calls.len(), before, "refused before any call");
            // Where no GC can run, the read goes ahead (and here fails later,
            // at the fake's metadata, which has no fields).
            // SAFETY: [test-fake] as above.
            let no_gc = unsafe { fake.profiler_info_no_gc() };
            assert!(no_gc.gc_blocked());
            assert!(!matches!(
                no_gc.static_field_value(c, "Empty", ad),
                Err(Error::GcMayRun { .. })
            ));
            assert!(fake.state().calls.len() > before);
        }

        const PAIR: usize = 0x3400;
        const HOLDER: usize = 0x3500;
        /// Field signatures: `long`, `string`.
        const SIG_LONG: [u8; 2] = [0x06, sys::ELEMENT_TYPE_I8 as u8];
        const SIG_STRING: [u8; 2] = [0x06, sys::ELEMENT_TYPE_STRING as u8];

        /// `world()` plus a value type `Ns.Pair { long Number; string Text; }`
        /// (offsets counted from the unboxed value, as GetClassLayout does
        /// for value types) and a class `Ns.Holder { string Text; long
        /// Number; }` (offsets counted from the object's start).
        fn world_with_fields() -> FakeRuntime {
            // Info10: EnumerateObjectReferences.
            let fake = world_of(FakeRuntime::with_info_version(10));
            {
                let mut st = fake.state();
                let md = FakeMetaData::default()
                    .with_type(0x0200_0001, "System.String")
                    .with_type(0x0200_0004, "Ns.Pair")
                    .with_type(0x0200_0005, "Ns.Holder")
                    .with_field(0x0400_0001, "Number", &SIG_LONG)
                    .with_field(0x0400_0002, "Text", &SIG_STRING);
                st.modules.get_mut(&M).unwrap().metadata = Arc::new(md);
                st.classes.insert(
                    PAIR,
                    FakeClass {
                        module: M,
                        type_def: 0x0200_0004,
                        fields: vec![(0x0400_0001, 0), (0x0400_0002, 8)],
                        size: 16,
                        box_offset: Some(8),
                        ..Default::default()
                    },
                );
                st.classes.insert(
                    HOLDER,
                    FakeClass {
                        module: M,
                        type_def: 0x0200_0005,
                        fields: vec![(0x0400_0002, 8), (0x0400_0001, 16)],
                        size: 24,
                        ..Default::default()
                    },
                );
            }
            fake
        }

        #[test]
        fn field_value_counts_a_boxed_value_types_offsets_from_the_value() {
            let fake = world_with_fields();
            // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
            let info = unsafe { fake.profiler_info() };
            let text = string_object("hi", None);
            let text_addr = text.as_ptr() as usize;
            object(&fake, text_addr, STRING, text.len() as u32);
            // A boxed Pair: method table, then the value (Number, Text).
            let mut boxed = 0x5151_5151_5151_5151u64.to_le_bytes().to_vec();
            boxed.extend(42i64.to_le_bytes());
            boxed.extend((text_addr as u64).to_le_bytes());
            let addr = boxed.as_ptr() as usize;
            object(&fake, addr, PAIR, boxed.len() as u32);
            fake.state()
                .heap
                .reference_slots
                .insert(addr, vec![addr + 16]);
            fake_ids!(fake; o = object_id(addr));
            // Read 8 bytes early, Number would be the method table and Text
            // the long 42 as an ObjectID.
            assert_eq!(info.field_value(o, "Number").unwrap(), Value::I64(42));
            let t = info.field_value(o, "Text").unwrap().as_object().unwrap();
            assert_eq!(t.as_sys(), text_addr);
            assert_eq!(info.string_text(t).unwrap(), "hi");
        }

        #[test]
        fn field_value_reads_a_class_from_the_objects_start() {
            let fake = world_with_fields();
            // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
            let info = unsafe { fake.profiler_info() };
            let text = string_object("yo", None);
            let text_addr = text.as_ptr() as usize;
            object(&fake, text_addr, STRING, text.len() as u32);
            let mut holder = 0x5151_5151_5151_5151u64.to_le_bytes().to_vec();
            holder.extend((text_addr as u64).to_le_bytes());
            holder.extend(7i64.to_le_bytes());
            let addr = holder.as_ptr() as usize;
            object(&fake, addr, HOLDER, holder.len() as u32);
            fake.state()
                .heap
                .reference_slots
                .insert(addr, vec![addr + 8]);
            fake_ids!(fake; o = object_id(addr));
            assert_eq!(info.field_value(o, "Number").unwrap(), Value::I64(7));
            let t = info.field_value(o, "Text").unwrap().as_object().unwrap();
            assert_eq!(info.string_text(t).unwrap(), "yo");
        }

        #[test]
        fn a_reference_the_gc_does_not_walk_is_refused() {
            let fake = world_with_fields();
            // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
            let info = unsafe { fake.profiler_info() };
            let mut holder = 0x5151_5151_5151_5151u64.to_le_bytes().to_vec();
            holder.extend(0xdead_beefu64.to_le_bytes());
            holder.extend(7i64.to_le_bytes());
            let addr = holder.as_ptr() as usize;
            object(&fake, addr, HOLDER, holder.len() as u32);
            // The GC walks another slot (the metadata says "string", the
            // object's reference map disagrees): no ObjectID is made.
            fake.state()
                .heap
                .reference_slots
                .insert(addr, vec![addr + 16]);
            fake_ids!(fake; o = object_id(addr));
            assert!(matches!(
                info.field_value(o, "Text"),
                Err(Error::InconsistentAnswer { .. })
            ));
            // A null reference needs no walk: it is no object.
            holder[8..16].copy_from_slice(&0u64.to_le_bytes());
            assert!(info
                .field_value(o, "Text")
                .unwrap()
                .as_object()
                .unwrap()
                .is_null());
        }

        #[test]
        fn array_element_field_reads_struct_elements_from_the_elements_start() {
            const PAIRS: usize = 0x3600;
            let fake = world_with_fields();
            fake.state().classes.insert(
                PAIRS,
                FakeClass {
                    array: Some((sys::ELEMENT_TYPE_VALUETYPE, PAIR, 1)),
                    ..Default::default()
                },
            );
            // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
            let info = unsafe { fake.profiler_info() };
            // Header (method table, length, padding), then two Pairs of 16 bytes.
            let mut heap = vec![0u8; 16];
            for n in [5i64, 6] {
                heap.extend(n.to_le_bytes());
                heap.extend(0u64.to_le_bytes());
            }
            let addr = heap.as_ptr() as usize;
            fake.state().objects.insert(
                addr,
                FakeObject {
                    class: PAIRS,
                    size: heap.len() as u32,
                    array: Some((vec![2], vec![0], addr + 16)),
                },
            );
            fake_ids!(fake; o = object_id(addr));
            assert_eq!(
                info.array_element_field(o, 1, "Number").unwrap(),
                Value::I64(6)
            );
            assert!(info
                .array_element_field(o, 0, "Text")
                .unwrap()
                .as_object()
                .unwrap()
                .is_null());
            assert!(matches!(
                info.array_element_field(o, 2, "Number"),
                Err(Error::InvalidArgument(_))
            ));
            // More elements than the object holds: refused before any read.
            fake.state().objects.get_mut(&addr).unwrap().array =
                Some((vec![3], vec![0], addr + 16));
            assert!(matches!(
                info.array_element_field(o, 2, "Number"),
                Err(Error::InconsistentAnswer { .. })
            ));
        }

        #[test]
        fn unboxed_value_reads_a_boxed_long() {
            let fake = world();
            // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
            let info = unsafe { fake.profiler_info() };
            let mut heap = vec![0u8; 8];
            heap.extend(1_234_567_890_123i64.to_le_bytes());
            let addr = heap.as_ptr() as usize;
            object(&fake, addr, LONG, heap.len() as u32);
            fake_ids!(fake; o = object_id(addr));
            assert_eq!(
                info.unboxed_value(o).unwrap(),
                Value::I64(1_234_567_890_123)
            );
            // Not a value type: the runtime's (here the fake's) refusal.
            object(&fake, addr, OTHER, heap.len() as u32);
            assert!(info.unboxed_value(o).is_err());
        }
    }
}
