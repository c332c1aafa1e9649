//! The declarations the generator understands, independent of the source syntax.

/// A C type as written in a declaration: `const WCHAR *`, `ObjectID`, `IUnknown **`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CType {
    /// The named base type (`void`, `ULONG`, `IUnknown`, `int`, ...).
    pub base: String,
    /// `const` applies to the base type (the pointee for pointers).
    pub const_base: bool,
    /// Number of `*` after the base type.
    pub ptrs: usize,
}

/// A declarator suffix: `x[]` or `x[4]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArraySuffix {
    None,
    /// `[]` or `[n]` on a parameter: decays to a pointer.
    Unsized,
    /// `[n]` on a struct field.
    Fixed(u64),
}

/// A parameter of a method or function-pointer typedef.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub ty: CType,
    pub array: ArraySuffix,
    /// MIDL `[in]`.
    pub is_in: bool,
    /// MIDL `[out]`.
    pub is_out: bool,
}

/// A struct or union field.
#[derive(Clone, Debug)]
pub struct Field {
    pub name: String,
    pub ty: CType,
    pub array: ArraySuffix,
}

/// `typedef enum { A = 1, B } Name;`
#[derive(Clone, Debug)]
pub struct EnumDef {
    pub name: String,
    /// Member name, value expression tokens as written (empty: previous + 1).
    pub members: Vec<(String, Vec<String>)>,
}

/// `typedef struct {..} Name;` or `typedef union {..} Name;`
#[derive(Clone, Debug)]
pub struct StructDef {
    pub name: String,
    pub is_union: bool,
    pub fields: Vec<Field>,
}

/// `typedef RET [callconv] Name(params);` or `typedef RET (*Name)(params);`
#[derive(Clone, Debug)]
pub struct FnTypedef {
    pub name: String,
    pub ret: CType,
    pub params: Vec<Param>,
    /// Declared as `(*Name)`: the typedef is already a pointer.
    pub is_pointer: bool,
}

/// `typedef T Name;`
#[derive(Clone, Debug)]
pub struct Alias {
    pub name: String,
    pub ty: CType,
}

/// One method of a COM interface.
#[derive(Clone, Debug)]
pub struct Method {
    pub name: String,
    pub ret: CType,
    pub params: Vec<Param>,
}

/// A COM interface.
#[derive(Clone, Debug)]
pub struct InterfaceDef {
    pub name: String,
    pub base: String,
    /// IID as `XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX`, upper case.
    pub iid: String,
    pub methods: Vec<Method>,
}

/// A top-level item, in source order.
#[derive(Clone, Debug)]
pub enum Item {
    Enum(EnumDef),
    Struct(StructDef),
    FnType(FnTypedef),
    Alias(Alias),
    Interface(InterfaceDef),
}

impl Item {
    pub fn name(&self) -> &str {
        match self {
            Item::Enum(e) => &e.name,
            Item::Struct(s) => &s.name,
            Item::FnType(f) => &f.name,
            Item::Alias(a) => &a.name,
            Item::Interface(i) => &i.name,
        }
    }
}
