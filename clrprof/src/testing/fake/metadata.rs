//! [`FakeMetaData`]: the part of `IMetaDataImport` that names need
//! (`GetTypeDefProps`, `GetMethodProps`, `GetNestedClassProps`,
//! `GetTypeRefProps`, `GetMemberRefProps`); every other method answers
//! `E_NOTIMPL`.

use super::{give_str, put, Buffer, E_NOTIMPL, S_OK};
use crate::error::KnownHresult;
use clrprof_sys::*;
use core::ffi::c_void;
use std::collections::BTreeMap;
use std::sync::Arc;
use windows_core::implement;

/// A type definition.
#[derive(Clone, Debug, Default)]
pub struct FakeTypeDef {
    /// Name as metadata stores it (`Ns.Name`, or `Name` for nested types).
    pub name: String,
    /// `CorTypeAttr` flags.
    pub flags: u32,
    /// Base type token.
    pub extends: u32,
    /// Enclosing type, for nested types.
    pub enclosing: Option<u32>,
}

/// A method definition.
#[derive(Clone, Debug, Default)]
pub struct FakeMethodDef {
    /// Owning type.
    pub class: u32,
    /// Name.
    pub name: String,
    /// `CorMethodAttr` flags.
    pub attributes: u32,
    /// Signature blob.
    pub signature: Vec<u8>,
    /// RVA of the body.
    pub rva: u32,
    /// `CorMethodImpl` flags.
    pub impl_flags: u32,
}

/// A member reference.
#[derive(Clone, Debug, Default)]
pub struct FakeMemberRef {
    /// Parent token (TypeRef, TypeDef, ModuleRef, MethodDef or TypeSpec).
    pub parent: u32,
    /// Name.
    pub name: String,
    /// Signature blob.
    pub signature: Vec<u8>,
}

/// A module's metadata tables, as far as the fake knows them.
#[derive(Clone, Debug, Default)]
pub struct FakeMetaData {
    /// TypeDefs by token.
    pub type_defs: BTreeMap<u32, FakeTypeDef>,
    /// MethodDefs by token.
    pub methods: BTreeMap<u32, FakeMethodDef>,
    /// TypeRefs by token: `(resolution scope, name)`.
    pub type_refs: BTreeMap<u32, (u32, String)>,
    /// MemberRefs by token.
    pub member_refs: BTreeMap<u32, FakeMemberRef>,
    /// FieldDefs by token: `(name, signature blob)`.
    pub fields: BTreeMap<u32, (String, Vec<u8>)>,
}

impl FakeMetaData {
    /// Adds a field `name` with signature blob `signature`.
    pub fn with_field(mut self, token: u32, name: &str, signature: &[u8]) -> Self {
        self.fields.insert(token, (name.into(), signature.to_vec()));
        self
    }

    /// Adds a top-level type `name` (`Ns.Name`).
    pub fn with_type(mut self, token: u32, name: &str) -> Self {
        self.type_defs.insert(
            token,
            FakeTypeDef {
                name: name.into(),
                ..Default::default()
            },
        );
        self
    }

    /// Adds a type `name` nested in `enclosing`.
    pub fn with_nested_type(mut self, token: u32, name: &str, enclosing: u32) -> Self {
        self.type_defs.insert(
            token,
            FakeTypeDef {
                name: name.into(),
                enclosing: Some(enclosing),
                ..Default::default()
            },
        );
        self
    }

    /// Adds a method `name` of `class`.
    pub fn with_method(mut self, token: u32, class: u32, name: &str) -> Self {
        self.methods.insert(
            token,
            FakeMethodDef {
                class,
                name: name.into(),
                ..Default::default()
            },
        );
        self
    }
}

/// The COM object over a module's [`FakeMetaData`].
#[implement(IMetaDataImport)]
pub(crate) struct FakeMetaDataImport {
    pub(crate) tables: Arc<FakeMetaData>,
}

const CLDB_E_RECORD_NOTFOUND: HRESULT = HRESULT(KnownHresult::CLDB_E_RECORD_NOTFOUND as i32);

impl FakeMetaDataImport {
    unsafe fn do_GetTypeDefProps(
        &self,
        td: mdTypeDef,
        szTypeDef: LPWSTR,
        cchTypeDef: ULONG,
        pchTypeDef: *mut ULONG,
        pdwTypeDefFlags: *mut DWORD,
        ptkExtends: *mut mdToken,
    ) -> HRESULT {
        let Some(t) = self.tables.type_defs.get(&td) else {
            return CLDB_E_RECORD_NOTFOUND;
        };
        put(pdwTypeDefFlags, t.flags);
        put(ptkExtends, t.extends);
        give_str(
            &t.name,
            cchTypeDef,
            pchTypeDef,
            szTypeDef,
            Buffer::MetadataTruncate,
        )
    }

    unsafe fn do_GetMethodProps(
        &self,
        mb: mdMethodDef,
        pClass: *mut mdTypeDef,
        szMethod: LPWSTR,
        cchMethod: ULONG,
        pchMethod: *mut ULONG,
        pdwAttr: *mut DWORD,
        ppvSigBlob: *mut PCCOR_SIGNATURE,
        pcbSigBlob: *mut ULONG,
        pulCodeRVA: *mut ULONG,
        pdwImplFlags: *mut DWORD,
    ) -> HRESULT {
        let Some(m) = self.tables.methods.get(&mb) else {
            return CLDB_E_RECORD_NOTFOUND;
        };
        put(pClass, m.class);
        put(pdwAttr, m.attributes);
        put(ppvSigBlob, m.signature.as_ptr());
        put(pcbSigBlob, m.signature.len() as u32);
        put(pulCodeRVA, m.rva);
        put(pdwImplFlags, m.impl_flags);
        give_str(
            &m.name,
            cchMethod,
            pchMethod,
            szMethod,
            Buffer::MetadataTruncate,
        )
    }

    unsafe fn do_GetNestedClassProps(
        &self,
        tdNestedClass: mdTypeDef,
        ptdEnclosingClass: *mut mdTypeDef,
    ) -> HRESULT {
        match self
            .tables
            .type_defs
            .get(&tdNestedClass)
            .and_then(|t| t.enclosing)
        {
            Some(e) => {
                put(ptdEnclosingClass, e);
                S_OK
            }
            None => CLDB_E_RECORD_NOTFOUND,
        }
    }

    unsafe fn do_GetTypeRefProps(
        &self,
        tr: mdTypeRef,
        ptkResolutionScope: *mut mdToken,
        szName: LPWSTR,
        cchName: ULONG,
        pchName: *mut ULONG,
    ) -> HRESULT {
        let Some((scope, name)) = self.tables.type_refs.get(&tr) else {
            return CLDB_E_RECORD_NOTFOUND;
        };
        put(ptkResolutionScope, *scope);
        give_str(name, cchName, pchName, szName, Buffer::MetadataTruncate)
    }

    unsafe fn do_GetMemberRefProps(
        &self,
        mr: mdMemberRef,
        ptk: *mut mdToken,
        szMember: LPWSTR,
        cchMember: ULONG,
        pchMember: *mut ULONG,
        ppvSigBlob: *mut PCCOR_SIGNATURE,
        pbSig: *mut ULONG,
    ) -> HRESULT {
        let Some(m) = self.tables.member_refs.get(&mr) else {
            return CLDB_E_RECORD_NOTFOUND;
        };
        put(ptk, m.parent);
        put(ppvSigBlob, m.signature.as_ptr());
        put(pbSig, m.signature.len() as u32);
        give_str(
            &m.name,
            cchMember,
            pchMember,
            szMember,
            Buffer::MetadataTruncate,
        )
    }
}

// Every method below is either forwarded to the implementation above or
// answers E_NOTIMPL, as documented on the module.
impl IMetaDataImport_Impl for FakeMetaDataImport_Impl {
    unsafe fn CloseEnum(&self, hEnum: HCORENUM) {}
    unsafe fn CountEnum(&self, hEnum: HCORENUM, pulCount: *mut ULONG) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn ResetEnum(&self, hEnum: HCORENUM, ulPos: ULONG) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumTypeDefs(
        &self,
        phEnum: *mut HCORENUM,
        rTypeDefs: *mut mdTypeDef,
        cMax: ULONG,
        pcTypeDefs: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumInterfaceImpls(
        &self,
        phEnum: *mut HCORENUM,
        td: mdTypeDef,
        rImpls: *mut mdInterfaceImpl,
        cMax: ULONG,
        pcImpls: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumTypeRefs(
        &self,
        phEnum: *mut HCORENUM,
        rTypeRefs: *mut mdTypeRef,
        cMax: ULONG,
        pcTypeRefs: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn FindTypeDefByName(
        &self,
        szTypeDef: LPCWSTR,
        tkEnclosingClass: mdToken,
        ptd: *mut mdTypeDef,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetScopeProps(
        &self,
        szName: LPWSTR,
        cchName: ULONG,
        pchName: *mut ULONG,
        pmvid: *mut GUID,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetModuleFromScope(&self, pmd: *mut mdModule) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetTypeDefProps(
        &self,
        td: mdTypeDef,
        szTypeDef: LPWSTR,
        cchTypeDef: ULONG,
        pchTypeDef: *mut ULONG,
        pdwTypeDefFlags: *mut DWORD,
        ptkExtends: *mut mdToken,
    ) -> HRESULT {
        self.do_GetTypeDefProps(
            td,
            szTypeDef,
            cchTypeDef,
            pchTypeDef,
            pdwTypeDefFlags,
            ptkExtends,
        )
    }
    unsafe fn GetInterfaceImplProps(
        &self,
        iiImpl: mdInterfaceImpl,
        pClass: *mut mdTypeDef,
        ptkIface: *mut mdToken,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetTypeRefProps(
        &self,
        tr: mdTypeRef,
        ptkResolutionScope: *mut mdToken,
        szName: LPWSTR,
        cchName: ULONG,
        pchName: *mut ULONG,
    ) -> HRESULT {
        self.do_GetTypeRefProps(tr, ptkResolutionScope, szName, cchName, pchName)
    }
    unsafe fn ResolveTypeRef(
        &self,
        tr: mdTypeRef,
        riid: REFIID,
        ppIScope: *mut Option<IUnknown>,
        ptd: *mut mdTypeDef,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumMembers(
        &self,
        phEnum: *mut HCORENUM,
        cl: mdTypeDef,
        rMembers: *mut mdToken,
        cMax: ULONG,
        pcTokens: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumMembersWithName(
        &self,
        phEnum: *mut HCORENUM,
        cl: mdTypeDef,
        szName: LPCWSTR,
        rMembers: *mut mdToken,
        cMax: ULONG,
        pcTokens: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumMethods(
        &self,
        phEnum: *mut HCORENUM,
        cl: mdTypeDef,
        rMethods: *mut mdMethodDef,
        cMax: ULONG,
        pcTokens: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumMethodsWithName(
        &self,
        phEnum: *mut HCORENUM,
        cl: mdTypeDef,
        szName: LPCWSTR,
        rMethods: *mut mdMethodDef,
        cMax: ULONG,
        pcTokens: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumFields(
        &self,
        phEnum: *mut HCORENUM,
        cl: mdTypeDef,
        rFields: *mut mdFieldDef,
        cMax: ULONG,
        pcTokens: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumFieldsWithName(
        &self,
        phEnum: *mut HCORENUM,
        cl: mdTypeDef,
        szName: LPCWSTR,
        rFields: *mut mdFieldDef,
        cMax: ULONG,
        pcTokens: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumParams(
        &self,
        phEnum: *mut HCORENUM,
        mb: mdMethodDef,
        rParams: *mut mdParamDef,
        cMax: ULONG,
        pcTokens: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumMemberRefs(
        &self,
        phEnum: *mut HCORENUM,
        tkParent: mdToken,
        rMemberRefs: *mut mdMemberRef,
        cMax: ULONG,
        pcTokens: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumMethodImpls(
        &self,
        phEnum: *mut HCORENUM,
        td: mdTypeDef,
        rMethodBody: *mut mdToken,
        rMethodDecl: *mut mdToken,
        cMax: ULONG,
        pcTokens: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumPermissionSets(
        &self,
        phEnum: *mut HCORENUM,
        tk: mdToken,
        dwActions: DWORD,
        rPermission: *mut mdPermission,
        cMax: ULONG,
        pcTokens: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn FindMember(
        &self,
        td: mdTypeDef,
        szName: LPCWSTR,
        pvSigBlob: PCCOR_SIGNATURE,
        cbSigBlob: ULONG,
        pmb: *mut mdToken,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn FindMethod(
        &self,
        td: mdTypeDef,
        szName: LPCWSTR,
        pvSigBlob: PCCOR_SIGNATURE,
        cbSigBlob: ULONG,
        pmb: *mut mdMethodDef,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn FindField(
        &self,
        td: mdTypeDef,
        szName: LPCWSTR,
        pvSigBlob: PCCOR_SIGNATURE,
        cbSigBlob: ULONG,
        pmb: *mut mdFieldDef,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn FindMemberRef(
        &self,
        td: mdTypeRef,
        szName: LPCWSTR,
        pvSigBlob: PCCOR_SIGNATURE,
        cbSigBlob: ULONG,
        pmr: *mut mdMemberRef,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetMethodProps(
        &self,
        mb: mdMethodDef,
        pClass: *mut mdTypeDef,
        szMethod: LPWSTR,
        cchMethod: ULONG,
        pchMethod: *mut ULONG,
        pdwAttr: *mut DWORD,
        ppvSigBlob: *mut PCCOR_SIGNATURE,
        pcbSigBlob: *mut ULONG,
        pulCodeRVA: *mut ULONG,
        pdwImplFlags: *mut DWORD,
    ) -> HRESULT {
        self.do_GetMethodProps(
            mb,
            pClass,
            szMethod,
            cchMethod,
            pchMethod,
            pdwAttr,
            ppvSigBlob,
            pcbSigBlob,
            pulCodeRVA,
            pdwImplFlags,
        )
    }
    unsafe fn GetMemberRefProps(
        &self,
        mr: mdMemberRef,
        ptk: *mut mdToken,
        szMember: LPWSTR,
        cchMember: ULONG,
        pchMember: *mut ULONG,
        ppvSigBlob: *mut PCCOR_SIGNATURE,
        pbSig: *mut ULONG,
    ) -> HRESULT {
        self.do_GetMemberRefProps(mr, ptk, szMember, cchMember, pchMember, ppvSigBlob, pbSig)
    }
    unsafe fn EnumProperties(
        &self,
        phEnum: *mut HCORENUM,
        td: mdTypeDef,
        rProperties: *mut mdProperty,
        cMax: ULONG,
        pcProperties: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumEvents(
        &self,
        phEnum: *mut HCORENUM,
        td: mdTypeDef,
        rEvents: *mut mdEvent,
        cMax: ULONG,
        pcEvents: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetEventProps(
        &self,
        ev: mdEvent,
        pClass: *mut mdTypeDef,
        szEvent: LPCWSTR,
        cchEvent: ULONG,
        pchEvent: *mut ULONG,
        pdwEventFlags: *mut DWORD,
        ptkEventType: *mut mdToken,
        pmdAddOn: *mut mdMethodDef,
        pmdRemoveOn: *mut mdMethodDef,
        pmdFire: *mut mdMethodDef,
        rmdOtherMethod: *mut mdMethodDef,
        cMax: ULONG,
        pcOtherMethod: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumMethodSemantics(
        &self,
        phEnum: *mut HCORENUM,
        mb: mdMethodDef,
        rEventProp: *mut mdToken,
        cMax: ULONG,
        pcEventProp: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetMethodSemantics(
        &self,
        mb: mdMethodDef,
        tkEventProp: mdToken,
        pdwSemanticsFlags: *mut DWORD,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetClassLayout(
        &self,
        td: mdTypeDef,
        pdwPackSize: *mut DWORD,
        rFieldOffset: *mut COR_FIELD_OFFSET,
        cMax: ULONG,
        pcFieldOffset: *mut ULONG,
        pulClassSize: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetFieldMarshal(
        &self,
        tk: mdToken,
        ppvNativeType: *mut PCCOR_SIGNATURE,
        pcbNativeType: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetRVA(
        &self,
        tk: mdToken,
        pulCodeRVA: *mut ULONG,
        pdwImplFlags: *mut DWORD,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetPermissionSetProps(
        &self,
        pm: mdPermission,
        pdwAction: *mut DWORD,
        ppvPermission: *mut *const c_void,
        pcbPermission: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetSigFromToken(
        &self,
        mdSig: mdSignature,
        ppvSig: *mut PCCOR_SIGNATURE,
        pcbSig: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetModuleRefProps(
        &self,
        mur: mdModuleRef,
        szName: LPWSTR,
        cchName: ULONG,
        pchName: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumModuleRefs(
        &self,
        phEnum: *mut HCORENUM,
        rModuleRefs: *mut mdModuleRef,
        cmax: ULONG,
        pcModuleRefs: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetTypeSpecFromToken(
        &self,
        typespec: mdTypeSpec,
        ppvSig: *mut PCCOR_SIGNATURE,
        pcbSig: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetNameFromToken(&self, tk: mdToken, pszUtf8NamePtr: *mut MDUTF8CSTR) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumUnresolvedMethods(
        &self,
        phEnum: *mut HCORENUM,
        rMethods: *mut mdToken,
        cMax: ULONG,
        pcTokens: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetUserString(
        &self,
        stk: mdString,
        szString: LPWSTR,
        cchString: ULONG,
        pchString: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetPinvokeMap(
        &self,
        tk: mdToken,
        pdwMappingFlags: *mut DWORD,
        szImportName: LPWSTR,
        cchImportName: ULONG,
        pchImportName: *mut ULONG,
        pmrImportDLL: *mut mdModuleRef,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumSignatures(
        &self,
        phEnum: *mut HCORENUM,
        rSignatures: *mut mdSignature,
        cmax: ULONG,
        pcSignatures: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumTypeSpecs(
        &self,
        phEnum: *mut HCORENUM,
        rTypeSpecs: *mut mdTypeSpec,
        cmax: ULONG,
        pcTypeSpecs: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumUserStrings(
        &self,
        phEnum: *mut HCORENUM,
        rStrings: *mut mdString,
        cmax: ULONG,
        pcStrings: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetParamForMethodIndex(
        &self,
        md: mdMethodDef,
        ulParamSeq: ULONG,
        ppd: *mut mdParamDef,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn EnumCustomAttributes(
        &self,
        phEnum: *mut HCORENUM,
        tk: mdToken,
        tkType: mdToken,
        rCustomAttributes: *mut mdCustomAttribute,
        cMax: ULONG,
        pcCustomAttributes: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetCustomAttributeProps(
        &self,
        cv: mdCustomAttribute,
        ptkObj: *mut mdToken,
        ptkType: *mut mdToken,
        ppBlob: *mut *const c_void,
        pcbSize: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn FindTypeRef(
        &self,
        tkResolutionScope: mdToken,
        szName: LPCWSTR,
        ptr: *mut mdTypeRef,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetMemberProps(
        &self,
        mb: mdToken,
        pClass: *mut mdTypeDef,
        szMember: LPWSTR,
        cchMember: ULONG,
        pchMember: *mut ULONG,
        pdwAttr: *mut DWORD,
        ppvSigBlob: *mut PCCOR_SIGNATURE,
        pcbSigBlob: *mut ULONG,
        pulCodeRVA: *mut ULONG,
        pdwImplFlags: *mut DWORD,
        pdwCPlusTypeFlag: *mut DWORD,
        ppValue: *mut UVCP_CONSTANT,
        pcchValue: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetFieldProps(
        &self,
        mb: mdFieldDef,
        pClass: *mut mdTypeDef,
        szField: LPWSTR,
        cchField: ULONG,
        pchField: *mut ULONG,
        pdwAttr: *mut DWORD,
        ppvSigBlob: *mut PCCOR_SIGNATURE,
        pcbSigBlob: *mut ULONG,
        pdwCPlusTypeFlag: *mut DWORD,
        ppValue: *mut UVCP_CONSTANT,
        pcchValue: *mut ULONG,
    ) -> HRESULT {
        let _ = (pClass, pdwAttr, pdwCPlusTypeFlag, ppValue, pcchValue);
        let Some((name, sig)) = self.tables.fields.get(&mb) else {
            return CLDB_E_RECORD_NOTFOUND;
        };
        // SAFETY: [test-fake] out pointers are null or valid (COM contract); the blob
        // lives in the fake's tables as long as this metadata object.
        unsafe {
            put(ppvSigBlob, sig.as_ptr());
            put(pcbSigBlob, sig.len() as ULONG);
            give_str(name, cchField, pchField, szField, Buffer::MetadataTruncate)
        }
    }
    unsafe fn GetPropertyProps(
        &self,
        prop: mdProperty,
        pClass: *mut mdTypeDef,
        szProperty: LPCWSTR,
        cchProperty: ULONG,
        pchProperty: *mut ULONG,
        pdwPropFlags: *mut DWORD,
        ppvSig: *mut PCCOR_SIGNATURE,
        pbSig: *mut ULONG,
        pdwCPlusTypeFlag: *mut DWORD,
        ppDefaultValue: *mut UVCP_CONSTANT,
        pcchDefaultValue: *mut ULONG,
        pmdSetter: *mut mdMethodDef,
        pmdGetter: *mut mdMethodDef,
        rmdOtherMethod: *mut mdMethodDef,
        cMax: ULONG,
        pcOtherMethod: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetParamProps(
        &self,
        tk: mdParamDef,
        pmd: *mut mdMethodDef,
        pulSequence: *mut ULONG,
        szName: LPWSTR,
        cchName: ULONG,
        pchName: *mut ULONG,
        pdwAttr: *mut DWORD,
        pdwCPlusTypeFlag: *mut DWORD,
        ppValue: *mut UVCP_CONSTANT,
        pcchValue: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn GetCustomAttributeByName(
        &self,
        tkObj: mdToken,
        szName: LPCWSTR,
        ppData: *mut *const c_void,
        pcbData: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn IsValidToken(&self, tk: mdToken) -> BOOL {
        0
    }
    unsafe fn GetNestedClassProps(
        &self,
        tdNestedClass: mdTypeDef,
        ptdEnclosingClass: *mut mdTypeDef,
    ) -> HRESULT {
        self.do_GetNestedClassProps(tdNestedClass, ptdEnclosingClass)
    }
    unsafe fn GetNativeCallConvFromSig(
        &self,
        pvSig: *const c_void,
        cbSig: ULONG,
        pCallConv: *mut ULONG,
    ) -> HRESULT {
        E_NOTIMPL
    }
    unsafe fn IsGlobal(&self, pd: mdToken, pbGlobal: *mut i32) -> HRESULT {
        E_NOTIMPL
    }
}
