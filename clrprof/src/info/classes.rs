//! Classes and objects: lookup, arrays, field layout, sizes
//! (`ICorProfilerInfo`, `ICorProfilerInfo2`, `ICorProfilerInfo3`).
//!
//! `GetObjectSize2` belongs to `ICorProfilerInfo4` and is not wrapped here.

use crate::buffer::fill;
use crate::error::{check, check_success, Error, Result};
use crate::ids::*;
use crate::info::ProfilerInfo;
use clrprof_sys as sys;

/// The element type of an array class or of a type in a signature
/// (`CorElementType`), as `IsArrayClass` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CorElementType {
    /// `ELEMENT_TYPE_BOOLEAN`.
    Boolean,
    /// `ELEMENT_TYPE_CHAR`.
    Char,
    /// `ELEMENT_TYPE_I1`.
    I1,
    /// `ELEMENT_TYPE_U1`.
    U1,
    /// `ELEMENT_TYPE_I2`.
    I2,
    /// `ELEMENT_TYPE_U2`.
    U2,
    /// `ELEMENT_TYPE_I4`.
    I4,
    /// `ELEMENT_TYPE_U4`.
    U4,
    /// `ELEMENT_TYPE_I8`.
    I8,
    /// `ELEMENT_TYPE_U8`.
    U8,
    /// `ELEMENT_TYPE_R4`.
    R4,
    /// `ELEMENT_TYPE_R8`.
    R8,
    /// `ELEMENT_TYPE_STRING`.
    String,
    /// `ELEMENT_TYPE_PTR`.
    Ptr,
    /// `ELEMENT_TYPE_BYREF`.
    ByRef,
    /// `ELEMENT_TYPE_VALUETYPE`.
    ValueType,
    /// `ELEMENT_TYPE_CLASS`.
    Class,
    /// `ELEMENT_TYPE_ARRAY` (multi-dimensional).
    Array,
    /// `ELEMENT_TYPE_GENERICINST`.
    GenericInst,
    /// `ELEMENT_TYPE_I` (native int).
    I,
    /// `ELEMENT_TYPE_U` (native unsigned int).
    U,
    /// `ELEMENT_TYPE_FNPTR`.
    FnPtr,
    /// `ELEMENT_TYPE_OBJECT`.
    Object,
    /// `ELEMENT_TYPE_SZARRAY` (single-dimensional, zero-based).
    SzArray,
    /// Any other value, kept as is.
    Other(u32),
}

impl CorElementType {
    /// Decodes the runtime's value.
    pub fn from_sys(v: sys::CorElementType) -> Self {
        use CorElementType::*;
        match v {
            sys::ELEMENT_TYPE_BOOLEAN => Boolean,
            sys::ELEMENT_TYPE_CHAR => Char,
            sys::ELEMENT_TYPE_I1 => I1,
            sys::ELEMENT_TYPE_U1 => U1,
            sys::ELEMENT_TYPE_I2 => I2,
            sys::ELEMENT_TYPE_U2 => U2,
            sys::ELEMENT_TYPE_I4 => I4,
            sys::ELEMENT_TYPE_U4 => U4,
            sys::ELEMENT_TYPE_I8 => I8,
            sys::ELEMENT_TYPE_U8 => U8,
            sys::ELEMENT_TYPE_R4 => R4,
            sys::ELEMENT_TYPE_R8 => R8,
            sys::ELEMENT_TYPE_STRING => String,
            sys::ELEMENT_TYPE_PTR => Ptr,
            sys::ELEMENT_TYPE_BYREF => ByRef,
            sys::ELEMENT_TYPE_VALUETYPE => ValueType,
            sys::ELEMENT_TYPE_CLASS => Class,
            sys::ELEMENT_TYPE_ARRAY => Array,
            sys::ELEMENT_TYPE_GENERICINST => GenericInst,
            sys::ELEMENT_TYPE_I => I,
            sys::ELEMENT_TYPE_U => U,
            sys::ELEMENT_TYPE_FNPTR => FnPtr,
            sys::ELEMENT_TYPE_OBJECT => Object,
            sys::ELEMENT_TYPE_SZARRAY => SzArray,
            o => Other(o),
        }
    }
}

/// `IsArrayClass` for an array class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArrayClassInfo<'a> {
    /// The element type (the runtime reports the verifier's view, e.g.
    /// `Class` for arrays of reference types).
    pub element_type: CorElementType,
    /// The element's class (null when the element type has none, e.g. for
    /// some primitives on older runtimes).
    pub element_class: ClassId<'a>,
    /// Number of dimensions.
    pub rank: u32,
}

/// `GetClassIDInfo`: where a class is defined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassDefinition<'a> {
    /// Its module.
    pub module: ModuleId<'a>,
    /// Its type definition token.
    pub type_def: MdTypeDef,
}

/// One instance field of `GetClassLayout` (`COR_FIELD_OFFSET`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FieldOffset {
    /// The field's definition token.
    pub field: MdFieldDef,
    /// Offset of the field. For a reference type it counts from the
    /// object's start (the method-table pointer included); for a value type
    /// from the start of the unboxed value, so inside a boxed instance the
    /// field is at [`box_class_layout`](ProfilerInfo::box_class_layout) +
    /// `offset` (the runtime adds the header only when the class is not a
    /// value type, proftoeeinterfaceimpl.cpp `GetClassLayout`).
    pub offset: u32,
}

/// `GetClassLayout`: the instance fields and size of a class.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassLayout {
    /// Instance fields, in the runtime's order.
    pub fields: Vec<FieldOffset>,
    /// For reference types the aligned base size including the object
    /// header; for value types the unboxed, unaligned size of the fields.
    pub size: u32,
}

/// `GetStringLayout`: offsets inside a `System.String` object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StringLayout {
    /// Offset of the buffer length. Strings no longer have one; CoreCLR
    /// reports the string length's offset here.
    pub buffer_length_offset: u32,
    /// Offset of the length (in UTF-16 units).
    pub string_length_offset: u32,
    /// Offset of the first character.
    pub buffer_offset: u32,
}

/// `GetStringLayout2`: offsets inside a `System.String` object.
///
/// Only the runtime's answer makes one: the SDK's readers follow these
/// offsets into string objects, so a hand-made layout must not reach them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StringLayout2 {
    pub(crate) string_length_offset: u32,
    pub(crate) buffer_offset: u32,
}

impl StringLayout2 {
    /// Offset of the 32-bit length (in UTF-16 units) from the object's start.
    pub fn string_length_offset(&self) -> u32 {
        self.string_length_offset
    }

    /// Offset of the first character from the object's start.
    pub fn buffer_offset(&self) -> u32 {
        self.buffer_offset
    }
}

/// `GetArrayObjectInfo`: the shape and data of an array object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArrayObjectInfo<'a> {
    /// Length of each dimension.
    pub dimensions: Vec<u32>,
    /// Lower bound of each dimension (0 for ordinary arrays).
    pub lower_bounds: Vec<i32>,
    /// The first element. Valid only as long as the object ID (`'a`): the
    /// next GC may move the array.
    pub data: *const u8,
    _object: core::marker::PhantomData<ObjectId<'a>>,
}

bitflags::bitflags! {
    /// `COR_PRF_STATIC_TYPE`: which kind of static a field is.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct StaticFieldKinds: u32 {
        /// `COR_PRF_FIELD_APP_DOMAIN_STATIC`: an ordinary static.
        const APP_DOMAIN = sys::COR_PRF_FIELD_APP_DOMAIN_STATIC;
        /// `COR_PRF_FIELD_THREAD_STATIC`: `[ThreadStatic]`.
        const THREAD = sys::COR_PRF_FIELD_THREAD_STATIC;
        /// `COR_PRF_FIELD_CONTEXT_STATIC`: context static (.NET Framework only).
        const CONTEXT = sys::COR_PRF_FIELD_CONTEXT_STATIC;
        /// `COR_PRF_FIELD_RVA_STATIC`: data at an RVA in the image.
        const RVA = sys::COR_PRF_FIELD_RVA_STATIC;
    }
}

/// The largest rank an array type may have in the CLR.
const MAX_ARRAY_RANK: u32 = 32;

impl<'s> ProfilerInfo<'s> {
    /// `GetClassFromObject`: the class of an object. For instances of generic
    /// types this is the exact instantiation. Needs a GC callback or managed
    /// code on the calling thread (`CORPROF_E_NOT_MANAGED_THREAD` /
    /// `CORPROF_E_UNSUPPORTED_CALL_SEQUENCE` otherwise).
    pub fn class_from_object<'a>(&self, object: ObjectId<'a>) -> Result<ClassId<'a>> {
        self.require_objects_readable("ICorProfilerInfo::GetClassFromObject")?;
        let mut c = 0usize;
        check(
            // SAFETY: [object-no-gc, plain-call] `object` is valid for 'a (typed ID: no GC since it was received).
            unsafe {
                self.raw_info1()?
                    .GetClassFromObject(object.as_sys(), &mut c)
            },
            "ICorProfilerInfo::GetClassFromObject",
        )?;
        // SAFETY: [id-derived] the class of a live object is loaded at least as long as the object lives.
        Ok(unsafe { ClassId::from_sys(c) })
    }

    // provenance: token-module
    /// `GetClassFromToken`: the class of a non-generic type definition of
    /// `module`, loading it if needed. Generic types fail with
    /// `CORPROF_E_TYPE_IS_PARAMETERIZED`; use
    /// [`class_from_token_and_type_args`](Self::class_from_token_and_type_args).
    /// Refused with [`Error::Usage`] where collections are blocked
    /// ([`gc_blocked`](Self::gc_blocked)): a type load can start a GC that
    /// moves the scope's objects. On .NET 9 it is refused with
    /// [`Error::RuntimeVersion`] (the runtime is not called) inside an
    /// assembly's load: in `AssemblyLoadStarted`, `AssemblyLoadFinished`,
    /// `ModuleLoadStarted`, `ModuleLoadFinished` and
    /// `ModuleAttachedToAssembly`, where a type load crashes that runtime
    /// (book: *IDs*, section 11); ask from a later callback, e.g. the
    /// module's first `ClassLoadFinished`.
    pub fn class_from_token<'a>(
        &self,
        module: ModuleId<'a>,
        type_def: MdTypeDef,
    ) -> Result<ClassId<'a>> {
        self.require_no_type_load("ICorProfilerInfo::GetClassFromToken")?;
        let mut c = 0usize;
        check(
            // SAFETY: [id-scope, no-type-load-in-assembly-load] `module` is valid for 'a; the runtime
            // checks the token; no assembly's load is under way on .NET 9 (require_no_type_load).
            unsafe {
                self.raw_info1()?
                    .GetClassFromToken(module.as_sys(), type_def.0, &mut c)
            },
            "ICorProfilerInfo::GetClassFromToken",
        )?;
        // SAFETY: [id-derived] a non-generic type of a loaded module lives as long as the module.
        Ok(unsafe { ClassId::from_sys(c) })
    }

    // provenance: token-module
    /// `GetClassFromTokenAndTypeArgs` (Info2): the instantiation of the type
    /// definition `type_def` of `module` with `type_args` (empty for a
    /// non-generic type), loading it if needed. Refused where collections
    /// are blocked, and on .NET 9 inside an assembly's load, as
    /// [`class_from_token`](Self::class_from_token).
    pub fn class_from_token_and_type_args<'a>(
        &self,
        module: ModuleId<'a>,
        type_def: MdTypeDef,
        type_args: &[ClassId<'a>],
    ) -> Result<ClassId<'a>> {
        self.require_no_type_load("ICorProfilerInfo2::GetClassFromTokenAndTypeArgs")?;
        let i2 = self.raw_info2("ICorProfilerInfo2::GetClassFromTokenAndTypeArgs")?;
        let n = u32::try_from(type_args.len())
            .map_err(|_| Error::InvalidArgument("too many type arguments"))?;
        let mut c = 0usize;
        check(
            // SAFETY: [id-scope, interface-version, no-type-load-in-assembly-load] IDs are valid for 'a;
            // `ClassId` is `repr(transparent)` over `ClassID`, so the slice is a `ClassID[n]`; no
            // assembly's load is under way on .NET 9 (require_no_type_load).
            unsafe {
                i2.GetClassFromTokenAndTypeArgs(
                    module.as_sys(),
                    type_def.0,
                    n,
                    type_args.as_ptr() as *const sys::ClassID,
                    &mut c,
                )
            },
            "ICorProfilerInfo2::GetClassFromTokenAndTypeArgs",
        )?;
        // SAFETY: [id-derived] the instantiation lives as long as its module and type arguments ('a).
        Ok(unsafe { ClassId::from_sys(c) })
    }

    /// `GetClassIDInfo`: module and token of a class; `None` for arrays and
    /// other types without a definition of their own (the runtime reports a
    /// null module for them). Prefer [`class_info`](Self::class_info) (Info2),
    /// which also reports type arguments.
    pub fn class_id_info<'a>(&self, class: ClassId<'a>) -> Result<Option<ClassDefinition<'a>>> {
        let (mut module, mut td) = (0usize, 0u32);
        check(
            // SAFETY: [id-scope, plain-call] `class` is valid for 'a; out pointers are locals.
            unsafe {
                self.raw_info1()?
                    .GetClassIDInfo(class.as_sys(), &mut module, &mut td)
            },
            "ICorProfilerInfo::GetClassIDInfo",
        )?;
        if module == 0 {
            return Ok(None);
        }
        Ok(Some(ClassDefinition {
            // SAFETY: [id-derived] the module of a loaded class is loaded while the class is.
            module: unsafe { ModuleId::from_sys(module) },
            type_def: MdTypeDef(td),
        }))
    }

    /// `IsArrayClass`: element type, element class and rank of an array
    /// class; `None` (the runtime's `S_FALSE`) for any other class.
    pub fn is_array_class<'a>(&self, class: ClassId<'a>) -> Result<Option<ArrayClassInfo<'a>>> {
        let (mut et, mut elem, mut rank) = (0u32, 0usize, 0u32);
        let hr = check_success(
            // SAFETY: [id-scope, plain-call] `class` is valid; out pointers are locals.
            unsafe {
                self.raw_info1()?
                    .IsArrayClass(class.as_sys(), &mut et, &mut elem, &mut rank)
            },
            "ICorProfilerInfo::IsArrayClass",
        )?;
        if hr.0 != 0 {
            return Ok(None);
        }
        Ok(Some(ArrayClassInfo {
            element_type: CorElementType::from_sys(et),
            // SAFETY: [id-derived] the element class of a loaded array class is loaded while it is.
            element_class: unsafe { ClassId::from_sys(elem) },
            rank,
        }))
    }

    /// `GetClassLayout` (Info2): instance field offsets and size. Fails with
    /// `E_INVALIDARG` for arrays and `System.String` (use
    /// [`array_object_info`](Self::array_object_info) /
    /// [`string_layout2`](Self::string_layout2)).
    ///
    /// The runtime reports the number of fields it *wrote* (not the number it
    /// has) when given a buffer, so the count is asked first with an empty
    /// buffer and the fields are read with exactly that capacity.
    pub fn class_layout(&self, class: ClassId<'_>) -> Result<ClassLayout> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetClassLayout")?;
        let mut size = 0u32;
        let mut raw: Vec<sys::COR_FIELD_OFFSET> = Vec::new();
        fill::<sys::COR_FIELD_OFFSET, 0>(
            "ICorProfilerInfo2::GetClassLayout",
            &mut raw,
            |cap, needed, buf| {
                // SAFETY: [id-scope, buffer-protocol] `class` is valid; `buf` has `cap` slots (none on the
                // counting call, which the runtime answers without writing).
                unsafe { i2.GetClassLayout(class.as_sys(), buf, cap, needed, &mut size) }
            },
        )?;
        Ok(ClassLayout {
            fields: raw
                .into_iter()
                .map(|f| FieldOffset {
                    field: MdFieldDef(f.ridOfField),
                    offset: f.ulOffset,
                })
                .collect(),
            size,
        })
    }

    /// `GetBoxClassLayout` (Info2): offset of the value inside a boxed
    /// instance of the value type `class` (`E_INVALIDARG` for other types).
    pub fn box_class_layout(&self, class: ClassId<'_>) -> Result<u32> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetBoxClassLayout")?;
        let mut offset = 0u32;
        check(
            // SAFETY: [id-scope, plain-call] `class` is valid; valid out pointer.
            unsafe { i2.GetBoxClassLayout(class.as_sys(), &mut offset) },
            "ICorProfilerInfo2::GetBoxClassLayout",
        )?;
        Ok(offset)
    }

    /// `GetStringLayout` (Info2). Prefer [`string_layout2`](Self::string_layout2).
    pub fn string_layout(&self) -> Result<StringLayout> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetStringLayout")?;
        let (mut a, mut b, mut c) = (0u32, 0u32, 0u32);
        check(
            // SAFETY: [plain-call] valid out pointers.
            unsafe { i2.GetStringLayout(&mut a, &mut b, &mut c) },
            "ICorProfilerInfo2::GetStringLayout",
        )?;
        Ok(StringLayout {
            buffer_length_offset: a,
            string_length_offset: b,
            buffer_offset: c,
        })
    }

    /// `GetStringLayout2` (Info3): where a string's length and characters are.
    pub fn string_layout2(&self) -> Result<StringLayout2> {
        let i3 = self.raw_info3("ICorProfilerInfo3::GetStringLayout2")?;
        let (mut len, mut buf) = (0u32, 0u32);
        check(
            // SAFETY: [plain-call] valid out pointers.
            unsafe { i3.GetStringLayout2(&mut len, &mut buf) },
            "ICorProfilerInfo3::GetStringLayout2",
        )?;
        Ok(StringLayout2 {
            string_length_offset: len,
            buffer_offset: buf,
        })
    }

    /// `GetArrayObjectInfo` (Info2): dimensions, lower bounds and data of an
    /// array object. The rank is found first (`GetClassFromObject` and
    /// `IsArrayClass`), since the runtime needs a buffer of at least that
    /// size and does not report it. Non-arrays fail with
    /// [`Error::InvalidArgument`].
    pub fn array_object_info<'a>(&self, object: ObjectId<'a>) -> Result<ArrayObjectInfo<'a>> {
        self.require_objects_readable("ICorProfilerInfo2::GetArrayObjectInfo")?;
        let i2 = self.raw_info2("ICorProfilerInfo2::GetArrayObjectInfo")?;
        let class = self.class_from_object(object)?;
        let rank = match self.is_array_class(class)? {
            Some(a) => a.rank,
            None => {
                return Err(Error::InvalidArgument(
                    "GetArrayObjectInfo: the object is not an array",
                ))
            }
        };
        if rank == 0 || rank > MAX_ARRAY_RANK {
            return Err(Error::InconsistentAnswer {
                call: "ICorProfilerInfo::IsArrayClass",
            });
        }
        let mut dimensions = vec![0u32; rank as usize];
        let mut lower_bounds = vec![0i32; rank as usize];
        let mut data = core::ptr::null_mut::<u8>();
        check(
            // SAFETY: [object-no-gc, local-memory] `object` is valid for 'a; both arrays have `rank` slots.
            unsafe {
                i2.GetArrayObjectInfo(
                    object.as_sys(),
                    rank,
                    dimensions.as_mut_ptr(),
                    lower_bounds.as_mut_ptr(),
                    &mut data,
                )
            },
            "ICorProfilerInfo2::GetArrayObjectInfo",
        )?;
        Ok(ArrayObjectInfo {
            dimensions,
            lower_bounds,
            data,
            _object: core::marker::PhantomData,
        })
    }

    /// `GetObjectSize`: size of an object in bytes. An object larger than
    /// 4 GiB fails with `COR_E_OVERFLOW` (`GetObjectSize2` of
    /// `ICorProfilerInfo4` reports it).
    pub fn object_size(&self, object: ObjectId<'_>) -> Result<u32> {
        self.require_objects_readable("ICorProfilerInfo::GetObjectSize")?;
        let mut size = 0u32;
        check(
            // SAFETY: [object-no-gc, plain-call] `object` is valid (typed ID); valid out pointer.
            unsafe { self.raw_info1()?.GetObjectSize(object.as_sys(), &mut size) },
            "ICorProfilerInfo::GetObjectSize",
        )?;
        Ok(size)
    }

    // provenance: field-class
    /// `GetStaticFieldInfo` (Info2): which kind of static `field` of `class`
    /// is (empty for instance fields).
    pub fn static_field_info(
        &self,
        class: ClassId<'_>,
        field: MdFieldDef,
    ) -> Result<StaticFieldKinds> {
        let i2 = self.raw_info2("ICorProfilerInfo2::GetStaticFieldInfo")?;
        let mut kind = 0u32;
        check(
            // SAFETY: [id-scope, plain-call] `class` is valid; valid out pointer; the runtime checks the token.
            unsafe { i2.GetStaticFieldInfo(class.as_sys(), field.0, &mut kind) },
            "ICorProfilerInfo2::GetStaticFieldInfo",
        )?;
        Ok(StaticFieldKinds::from_bits_retain(kind))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::KnownHresult;
    use crate::testing::fake::{
        fake_ids, FakeClass, FakeModule, FakeObject, FakeRuntime, FakeStatic,
    };

    const M: usize = 0x2000;
    const C: usize = 0x3000;
    const ARR: usize = 0x3100;
    const VT: usize = 0x3200;
    const GEN: usize = 0x3300;
    const O: usize = 0x9000;
    const OARR: usize = 0x9100;

    fn world() -> FakeRuntime {
        let fake = FakeRuntime::new();
        {
            let mut st = fake.state();
            st.classes.insert(
                C,
                FakeClass {
                    module: M,
                    type_def: 0x0200_0002,
                    fields: vec![(0x0400_0001, 8), (0x0400_0002, 16)],
                    size: 24,
                    ..Default::default()
                },
            );
            st.classes.insert(
                ARR,
                FakeClass {
                    array: Some((sys::ELEMENT_TYPE_CLASS, C, 2)),
                    ..Default::default()
                },
            );
            st.classes.insert(
                VT,
                FakeClass {
                    module: M,
                    type_def: 0x0200_0003,
                    size: 4,
                    box_offset: Some(8),
                    ..Default::default()
                },
            );
            st.classes.insert(
                GEN,
                FakeClass {
                    module: M,
                    type_def: 0x0200_0004,
                    type_args: vec![C],
                    ..Default::default()
                },
            );
            st.objects.insert(
                O,
                FakeObject {
                    class: C,
                    size: 24,
                    array: None,
                },
            );
            st.objects.insert(
                OARR,
                FakeObject {
                    class: ARR,
                    size: 80,
                    array: Some((vec![3, 4], vec![0, 1], 0x9120)),
                },
            );
            st.statics.insert(
                (C, 0x0400_0005),
                FakeStatic {
                    kind: sys::COR_PRF_FIELD_THREAD_STATIC,
                    address: 0x5000,
                },
            );
            let mut m = FakeModule::default();
            m.classes_by_token.insert(0x0200_0002, C);
            m.class_instantiations.push(((0x0200_0004, vec![C]), GEN));
            st.modules.insert(M, m);
        }
        fake
    }

    #[test]
    fn class_from_object_and_token() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; o = object_id(O), m = module_id(M), c = class_id(C));
        assert_eq!(info.class_from_object(o).unwrap().as_sys(), C);
        assert_eq!(
            info.class_from_token(m, MdTypeDef(0x0200_0002))
                .unwrap()
                .as_sys(),
            C
        );
        assert_eq!(
            fake.calls_of("GetClassFromToken")[0].args,
            vec![M, 0x0200_0002]
        );
        let g = info
            .class_from_token_and_type_args(m, MdTypeDef(0x0200_0004), &[c])
            .unwrap();
        assert_eq!(g.as_sys(), GEN);
        assert_eq!(
            fake.calls_of("GetClassFromTokenAndTypeArgs")[0].args,
            vec![M, 0x0200_0004, C]
        );
        assert!(info
            .class_from_token_and_type_args(m, MdTypeDef(0x0200_0004), &[])
            .is_err());
    }

    #[test]
    fn class_id_info_is_none_for_arrays() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; c = class_id(C), a = class_id(ARR));
        let d = info.class_id_info(c).unwrap().unwrap();
        assert_eq!((d.module.as_sys(), d.type_def), (M, MdTypeDef(0x0200_0002)));
        assert_eq!(info.class_id_info(a).unwrap(), None);
    }

    #[test]
    fn is_array_class_decodes_or_says_none() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; c = class_id(C), a = class_id(ARR));
        let arr = info.is_array_class(a).unwrap().unwrap();
        assert_eq!(arr.element_type, CorElementType::Class);
        assert_eq!(arr.element_class.as_sys(), C);
        assert_eq!(arr.rank, 2);
        assert_eq!(info.is_array_class(c).unwrap(), None);
        assert_eq!(CorElementType::from_sys(0x45), CorElementType::Other(0x45));
    }

    #[test]
    fn class_layout_asks_the_count_first_and_reads_every_field() {
        let fake = world();
        // 40 fields: the runtime reports only what it wrote, so a guessed
        // buffer would silently truncate.
        fake.state().classes.get_mut(&C).unwrap().fields =
            (1..=40).map(|i| (0x0400_0000 + i, i * 8)).collect();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; c = class_id(C), a = class_id(ARR));
        let layout = info.class_layout(c).unwrap();
        assert_eq!(layout.size, 24);
        assert_eq!(layout.fields.len(), 40);
        assert_eq!(
            layout.fields[39],
            FieldOffset {
                field: MdFieldDef(0x0400_0028),
                offset: 320
            }
        );
        let caps: Vec<usize> = fake
            .calls_of("GetClassLayout")
            .iter()
            .map(|c| c.args[1])
            .collect();
        assert_eq!(caps, vec![0, 40]);
        assert_eq!(
            info.class_layout(a).unwrap_err().hresult().0,
            KnownHresult::E_INVALIDARG as i32
        );
    }

    #[test]
    fn class_layout_follows_a_count_that_grows() {
        let fake = world();
        let mut n = 0;
        fake.on_call(move |st, m| {
            if m == "GetClassLayout" {
                n += 1;
                if n == 2 {
                    st.classes
                        .get_mut(&C)
                        .unwrap()
                        .fields
                        .push((0x0400_0003, 24));
                }
            }
        });
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; c = class_id(C));
        // Count 2, then 3 fields with room for 2: the runtime writes 2 and
        // says 2, which the protocol takes as complete. The growth shows in
        // the next call.
        let layout = info.class_layout(c).unwrap();
        assert_eq!(layout.fields.len(), 2);
        let layout = info.class_layout(c).unwrap();
        assert_eq!(layout.fields.len(), 3);
        assert_eq!(
            layout.fields[2],
            FieldOffset {
                field: MdFieldDef(0x0400_0003),
                offset: 24
            }
        );
    }

    #[test]
    fn box_and_string_layouts() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; v = class_id(VT), c = class_id(C));
        assert_eq!(info.box_class_layout(v).unwrap(), 8);
        assert!(info.box_class_layout(c).is_err());
        assert_eq!(
            info.string_layout().unwrap(),
            StringLayout {
                buffer_length_offset: 8,
                string_length_offset: 8,
                buffer_offset: 12
            }
        );
        assert_eq!(
            info.string_layout2().unwrap(),
            StringLayout2 {
                string_length_offset: 8,
                buffer_offset: 12
            }
        );
    }

    #[test]
    fn array_object_info_finds_the_rank_first() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; a = object_id(OARR), o = object_id(O));
        let arr = info.array_object_info(a).unwrap();
        assert_eq!(arr.dimensions, vec![3, 4]);
        assert_eq!(arr.lower_bounds, vec![0, 1]);
        assert_eq!(arr.data as usize, 0x9120);
        assert_eq!(fake.calls_of("GetArrayObjectInfo")[0].args, vec![OARR, 2]);
        assert_eq!(
            info.array_object_info(o).unwrap_err(),
            Error::InvalidArgument("GetArrayObjectInfo: the object is not an array")
        );
    }

    #[test]
    fn object_size_and_failure_mapping() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; o = object_id(O));
        assert_eq!(info.object_size(o).unwrap(), 24);
        fake.fail(
            "GetObjectSize",
            sys::HRESULT(KnownHresult::CORPROF_E_NOT_MANAGED_THREAD as i32),
        );
        let e = info.object_size(o).unwrap_err();
        assert_eq!(
            e,
            Error::Runtime {
                hr: sys::HRESULT(KnownHresult::CORPROF_E_NOT_MANAGED_THREAD as i32),
                call: "ICorProfilerInfo::GetObjectSize"
            }
        );
    }

    #[test]
    fn static_field_info_reads_kinds() {
        let fake = world();
        // SAFETY: [test-fake] the fake's objects and layouts describe memory this test owns.
        let info = unsafe { fake.profiler_info() };
        fake_ids!(fake; c = class_id(C));
        assert_eq!(
            info.static_field_info(c, MdFieldDef(0x0400_0005)).unwrap(),
            StaticFieldKinds::THREAD
        );
        assert!(info
            .static_field_info(c, MdFieldDef(0x0400_0001))
            .unwrap()
            .is_empty());
    }
}
