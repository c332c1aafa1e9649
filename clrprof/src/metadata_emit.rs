//! Writing to a module's metadata (`IMetaDataEmit`): the references and
//! signatures injected IL needs, with lookups of existing ones first.
//!
//! The profiler opens a module's metadata for writing with
//! [`ProfilerInfo::module_metadata_emit`] (`GetModuleMetaData` with
//! `ofRead | ofWrite`). CoreCLR allows new tokens to be defined while the
//! module is loaded, typically from `ModuleLoadFinished` or just before the
//! IL that uses them is set (`JITCompilationStarted`, `GetReJITParameters`);
//! existing rows cannot be changed. Signature blobs are built with
//! [`SigBuilder`].

use crate::buffer::to_wide;
use crate::error::{check, Error, KnownHresult, Result, HRESULT};
use crate::ids::*;
use crate::info::ProfilerInfo;
use crate::metadata::MetaDataImport;
use clrprof_sys as sys;
use windows_core::{IUnknown, Interface};

/// A module's metadata, write side (`IMetaDataEmit`), with its read side.
///
/// Like [`MetaDataImport`] it borrows the module it writes (`'m`): it
/// cannot be kept past the module's scope; open it again from a scope that
/// holds the module.
#[derive(Clone)]
pub struct MetaDataEmit<'m> {
    emit: sys::IMetaDataEmit,
    import: MetaDataImport<'m>,
}

// SAFETY: [free-threaded] the runtime's metadata objects serialize writers internally (the
// RegMeta implementation takes its own lock around every emit and import
// call), and COM reference counting is thread-safe.
unsafe impl Send for MetaDataEmit<'_> {}
// SAFETY: [free-threaded] &MetaDataEmit only calls emit and import methods, which RegMeta
// serializes with its own lock, so concurrent calls are allowed.
unsafe impl Sync for MetaDataEmit<'_> {}

impl<'s> ProfilerInfo<'s> {
    /// `GetModuleMetaData(ofRead | ofWrite, IID_IMetaDataEmit)`: the module's
    /// metadata for defining new tokens. Fails for modules whose metadata is
    /// read-only (e.g. some dynamic modules).
    pub fn module_metadata_emit<'a>(&self, module: ModuleId<'a>) -> Result<MetaDataEmit<'a>> {
        let mut unk: Option<IUnknown> = None;
        check(
            // SAFETY: [id-scope, com-ownership] `module` is valid; the IID is IMetaDataEmit's; `unk`
            // receives an owned reference.
            unsafe {
                self.raw_info1()?.GetModuleMetaData(
                    module.as_sys(),
                    sys::ofRead | sys::ofWrite,
                    &sys::IMetaDataEmit::IID,
                    &mut unk,
                )
            },
            "ICorProfilerInfo::GetModuleMetaData",
        )?;
        let unk = unk.ok_or(Error::runtime(
            HRESULT(KnownHresult::E_NOINTERFACE as i32),
            "ICorProfilerInfo::GetModuleMetaData",
        ))?;
        // SAFETY: [id-scope, module-lifetime] the metadata of `module`, which is loaded for 'a (typed ID).
        unsafe { MetaDataEmit::from_unknown(&unk) }
    }
}

fn len_u32(n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::InvalidArgument("metadata blob or string too long"))
}

/// A static method's signature: present, without `HASTHIS` (0x20), and not
/// a field or local signature.
fn check_static_signature(signature: &[u8]) -> Result<()> {
    match signature.first() {
        Some(&c) if c & 0x20 == 0 && c & 0x0f != 0x06 && c & 0x0f != 0x07 => Ok(()),
        _ => Err(Error::InvalidArgument(
            "define_static_method needs a static method signature (no HASTHIS)",
        )),
    }
}

/// `true` for the "not found" answer of the Find* methods.
fn not_found(e: &Error) -> bool {
    e.hresult().0 == KnownHresult::CLDB_E_RECORD_NOTFOUND as i32
}

// provenance: token-module
impl<'m> MetaDataEmit<'m> {
    /// Wraps a metadata object that implements `IMetaDataEmit` and
    /// `IMetaDataImport`.
    ///
    /// # Safety
    /// As [`MetaDataImport::from_unknown`]: `unknown` is the metadata of a
    /// module that stays loaded for `'m`.
    pub unsafe fn from_unknown(unknown: &IUnknown) -> Result<Self> {
        let emit = unknown
            .cast()
            .map_err(|e| Error::runtime(e.code(), "QueryInterface(IMetaDataEmit)"))?;
        Ok(MetaDataEmit {
            emit,
            // SAFETY: [caller-contract] the same object and module (this function's contract).
            import: unsafe { MetaDataImport::from_unknown(unknown)? },
        })
    }

    /// The read side of the same metadata.
    pub fn import(&self) -> &MetaDataImport<'m> {
        &self.import
    }

    /// The raw `IMetaDataEmit`.
    pub fn raw(&self) -> &sys::IMetaDataEmit {
        &self.emit
    }

    /// `GetTokenFromSig`: the StandAloneSig token for a signature blob (a
    /// `calli` site or a locals signature). The metadata returns the
    /// existing token when the same blob is already defined.
    pub fn token_from_sig(&self, signature: &[u8]) -> Result<MdSignature> {
        let mut tok = 0u32;
        check(
            // SAFETY: [local-memory] `signature` is `len` readable bytes; the metadata copies them.
            unsafe {
                self.emit
                    .GetTokenFromSig(signature.as_ptr(), len_u32(signature.len())?, &mut tok)
            },
            "IMetaDataEmit::GetTokenFromSig",
        )?;
        Ok(MdSignature(tok))
    }

    /// `DefineMemberRef`: a reference to member `name` with `signature` of
    /// `parent` (TypeRef, TypeDef, TypeSpec, ModuleRef or MethodDef). Defines
    /// a new row each time; see [`member_ref`](Self::member_ref) to reuse.
    pub fn define_member_ref(
        &self,
        parent: MdToken,
        name: &str,
        signature: &[u8],
    ) -> Result<MdMemberRef> {
        let wname = to_wide(name);
        let mut tok = 0u32;
        check(
            // SAFETY: [nul-terminated, local-memory] `wname` is NUL-terminated; `signature` is `len` readable
            // bytes; the metadata copies both.
            unsafe {
                self.emit.DefineMemberRef(
                    parent.0,
                    wname.as_ptr(),
                    signature.as_ptr(),
                    len_u32(signature.len())?,
                    &mut tok,
                )
            },
            "IMetaDataEmit::DefineMemberRef",
        )?;
        Ok(MdMemberRef(tok))
    }

    /// `FindMemberRef`: an existing reference to `name` with `signature` on
    /// `parent`, if any.
    pub fn find_member_ref(
        &self,
        parent: MdToken,
        name: &str,
        signature: &[u8],
    ) -> Result<Option<MdMemberRef>> {
        let wname = to_wide(name);
        let mut tok = 0u32;
        // SAFETY: [nul-terminated, local-memory] as in `define_member_ref`; read-only lookup.
        let hr = unsafe {
            self.import.raw().FindMemberRef(
                parent.0,
                wname.as_ptr(),
                signature.as_ptr(),
                len_u32(signature.len())?,
                &mut tok,
            )
        };
        match check(hr, "IMetaDataImport::FindMemberRef") {
            Ok(()) => Ok(Some(MdMemberRef(tok))),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The reference to `name` with `signature` on `parent`: the existing one
    /// or a new one.
    pub fn member_ref(&self, parent: MdToken, name: &str, signature: &[u8]) -> Result<MdMemberRef> {
        match self.find_member_ref(parent, name, signature)? {
            Some(t) => Ok(t),
            None => self.define_member_ref(parent, name, signature),
        }
    }

    /// `FindTypeRef`: an existing reference to type `name` (`Namespace.Name`)
    /// in `scope` (an AssemblyRef, ModuleRef or, for nested types, TypeRef).
    pub fn find_type_ref(&self, scope: MdToken, name: &str) -> Result<Option<MdTypeRef>> {
        let wname = to_wide(name);
        let mut tok = 0u32;
        // SAFETY: [nul-terminated] `wname` is NUL-terminated; read-only lookup.
        let hr = unsafe {
            self.import
                .raw()
                .FindTypeRef(scope.0, wname.as_ptr(), &mut tok)
        };
        match check(hr, "IMetaDataImport::FindTypeRef") {
            Ok(()) => Ok(Some(MdTypeRef(tok))),
            Err(e) if not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GetTokenFromTypeSpec`: the TypeSpec token of an encoded type (e.g. a
    /// parameter's type cut from a method signature, for `box`); the
    /// metadata returns the existing token when the same blob is defined.
    pub fn type_spec(&self, signature: &[u8]) -> Result<MdTypeSpec> {
        let mut tok = 0u32;
        check(
            // SAFETY: [local-memory] `signature` is `len` readable bytes; the metadata copies them.
            unsafe {
                self.emit.GetTokenFromTypeSpec(
                    signature.as_ptr(),
                    len_u32(signature.len())?,
                    &mut tok,
                )
            },
            "IMetaDataEmit::GetTokenFromTypeSpec",
        )?;
        Ok(MdTypeSpec(tok))
    }

    /// `IMetaDataAssemblyEmit::DefineAssemblyRef`: a reference to assembly
    /// `name` of `version` (major, minor, build, revision), culture neutral,
    /// without a public key (what a name-only bind in the default load
    /// context matches).
    pub fn assembly_ref(&self, name: &str, version: [u16; 4]) -> Result<MdAssemblyRef> {
        let assembly: sys::IMetaDataAssemblyEmit = self.emit.cast().map_err(|e| {
            Error::runtime(HRESULT(e.code().0), "QueryInterface(IMetaDataAssemblyEmit)")
        })?;
        let wname = to_wide(name);
        let meta = sys::ASSEMBLYMETADATA {
            usMajorVersion: version[0],
            usMinorVersion: version[1],
            usBuildNumber: version[2],
            usRevisionNumber: version[3],
            szLocale: core::ptr::null_mut(),
            cbLocale: 0,
            rProcessor: core::ptr::null_mut(),
            ulProcessor: 0,
            rOS: core::ptr::null_mut(),
            ulOS: 0,
        };
        let mut tok = 0u32;
        check(
            // SAFETY: [nul-terminated, local-memory] `wname` is NUL-terminated and `meta` a local
            // whose pointers are null with zero counts; no key or hash (null, 0); the
            // metadata copies what it keeps.
            unsafe {
                assembly.DefineAssemblyRef(
                    core::ptr::null(),
                    0,
                    wname.as_ptr(),
                    &meta,
                    core::ptr::null(),
                    0,
                    0,
                    &mut tok,
                )
            },
            "IMetaDataAssemblyEmit::DefineAssemblyRef",
        )?;
        Ok(MdAssemblyRef(tok))
    }

    /// `DefineTypeRefByName`: a reference to type `name` in `scope`; the
    /// metadata returns the existing row when there is one.
    pub fn type_ref(&self, scope: MdToken, name: &str) -> Result<MdTypeRef> {
        let wname = to_wide(name);
        let mut tok = 0u32;
        check(
            // SAFETY: [nul-terminated] `wname` is NUL-terminated; the metadata copies it.
            unsafe {
                self.emit
                    .DefineTypeRefByName(scope.0, wname.as_ptr(), &mut tok)
            },
            "IMetaDataEmit::DefineTypeRefByName",
        )?;
        Ok(MdTypeRef(tok))
    }

    /// `FindTypeDefByName`: a type defined in this module (see
    /// [`MetaDataImport::find_type_def`]).
    pub fn find_type_def(
        &self,
        name: &str,
        enclosing: Option<MdTypeDef>,
    ) -> Result<Option<MdTypeDef>> {
        self.import.find_type_def(name, enclosing)
    }

    /// `FindMethod`: a method of `type_def` by name and signature (see
    /// [`MetaDataImport::find_method`]).
    pub fn find_method(
        &self,
        type_def: MdTypeDef,
        name: &str,
        signature: &[u8],
    ) -> Result<Option<MdMethodDef>> {
        self.import.find_method(type_def, name, signature)
    }

    /// The token this module names `System.Object` by: the TypeDef in
    /// CoreLib itself; elsewhere its TypeRef through one of its references
    /// to a core library (`System.Runtime`, `System.Private.CoreLib`,
    /// `mscorlib`, `netstandard`, which all forward `System.Object` to
    /// CoreLib's), defined through such a reference when the module has
    /// none to `System.Object` yet.
    fn object_type(&self) -> Result<MdToken> {
        const CORE: &[&str] = &[
            "System.Runtime",
            "System.Private.CoreLib",
            "mscorlib",
            "netstandard",
        ];
        if self.import.assembly_props()?.name == "System.Private.CoreLib" {
            if let Some(object) = self.import.find_type_def("System.Object", None)? {
                return Ok(MdToken(object.0));
            }
        }
        let mut core_scope = None;
        for type_ref in self.import.type_refs()? {
            let (name, scope) = self.import.type_ref_props(type_ref)?;
            if scope.table() != sys::mdtAssemblyRef || scope.rid() == 0 {
                continue;
            }
            let assembly = self.import.assembly_ref_name(MdAssemblyRef(scope.0))?;
            if !CORE.contains(&assembly.as_str()) {
                continue;
            }
            if name == "System.Object" {
                return Ok(MdToken(type_ref.0));
            }
            core_scope.get_or_insert(scope);
        }
        match core_scope {
            Some(scope) => Ok(MdToken(self.type_ref(scope, "System.Object")?.0)),
            None => Err(Error::Usage(
                "the module references no core library (System.Runtime, \
                 System.Private.CoreLib, mscorlib or netstandard), so it has no name for \
                 System.Object to derive a class from"
                    .to_string(),
            )),
        }
    }

    /// `DefineTypeDef` of a new public static class `name` (`Namespace.Name`;
    /// abstract, sealed, `beforefieldinit`) deriving from `System.Object`,
    /// which the SDK names itself (the module's own reference to it, see
    /// below): a static class can have no other base, and the runtime loads
    /// every TypeDef of a module when the application asks for them
    /// (`Assembly.GetTypes()`), so a base it cannot derive from (a sealed
    /// class, a reference the module does not have) would throw
    /// `ReflectionTypeLoadException` in the application (review 36).
    /// Refuses ([`Error::Usage`]) a name the module already defines (two
    /// TypeDefs of one name make the module's types fail to load) and a
    /// module that references no core library.
    ///
    /// `System.Object` is CoreLib's own TypeDef in CoreLib, and elsewhere
    /// the module's TypeRef to it through one of its references to a core
    /// library (`System.Runtime`, `System.Private.CoreLib`, `mscorlib` or
    /// `netstandard`), defined through such a reference if the module has
    /// no TypeRef to `System.Object` yet.
    ///
    /// Add methods with [`define_static_method`](Self::define_static_method);
    /// after the module's `ModuleLoadFinished`,
    /// [`ProfilerInfo::apply_metadata`](crate::ProfilerInfo::apply_metadata)
    /// makes the runtime find the new type.
    pub fn define_static_class(&self, name: &str) -> Result<MdTypeDef> {
        if name.is_empty() {
            return Err(Error::InvalidArgument("a class needs a name"));
        }
        if self.import.find_type_def(name, None)?.is_some() {
            return Err(Error::Usage(format!(
                "the module already defines a type named `{name}`; a second TypeDef of that \
                 name would make its types fail to load (Assembly.GetTypes() in the \
                 application included)"
            )));
        }
        let extends = self.object_type()?;
        let wname = to_wide(name);
        let mut tok = 0u32;
        let flags =
            sys::tdPublic | sys::tdClass | sys::tdAbstract | sys::tdSealed | sys::tdBeforeFieldInit;
        let mut no_interfaces = [0u32];
        // SAFETY: [nul-terminated, local-memory] `wname` is NUL-terminated; the interface list is the
        // nil-terminated empty list; the metadata copies both.
        let hr = unsafe {
            self.emit.DefineTypeDef(
                wname.as_ptr(),
                flags,
                extends.0,
                no_interfaces.as_mut_ptr(),
                &mut tok,
            )
        };
        check(hr, "IMetaDataEmit::DefineTypeDef")?;
        Ok(MdTypeDef(tok))
    }

    /// `DefineMethod` of a new public static IL method `name` with
    /// `signature` (a static method signature, e.g. from
    /// [`SigBuilder::static_method`]) on `class`, without a body (RVA 0):
    /// give it one with
    /// [`ProfilerInfo::set_il_function_body`](crate::ProfilerInfo::set_il_function_body)
    /// before it is first called, and after `ModuleLoadFinished` call
    /// [`ProfilerInfo::apply_metadata`](crate::ProfilerInfo::apply_metadata)
    /// before IL that calls it is compiled. Refuses ([`Error::Usage`]) a
    /// name and signature `class` already has: the runtime's type loader
    /// reads the class's method rows when the class loads (also for the
    /// application's reflection), and two of one name and signature are
    /// one member defined twice.
    pub fn define_static_method(
        &self,
        class: MdTypeDef,
        name: &str,
        signature: &[u8],
    ) -> Result<MdMethodDef> {
        check_static_signature(signature)?;
        // A row of this module's TypeDef table (an error otherwise).
        self.import.type_def_props(class)?;
        if self.import.find_method(class, name, signature)?.is_some() {
            return Err(Error::Usage(format!(
                "`{}` already has a method `{name}` of this signature",
                self.import
                    .type_name(class)
                    .unwrap_or_else(|_| format!("{:#010x}", class.0))
            )));
        }
        let wname = to_wide(name);
        let mut tok = 0u32;
        let flags = sys::mdPublic | sys::mdStatic | sys::mdHideBySig;
        // SAFETY: [nul-terminated, local-memory] `wname` is NUL-terminated; `signature` is `len` readable
        // bytes; the metadata copies both.
        let hr = unsafe {
            self.emit.DefineMethod(
                class.0,
                wname.as_ptr(),
                flags,
                signature.as_ptr(),
                len_u32(signature.len())?,
                0,
                sys::miIL | sys::miManaged,
                &mut tok,
            )
        };
        check(hr, "IMetaDataEmit::DefineMethod")?;
        Ok(MdMethodDef(tok))
    }

    /// `DefineUserString`: the token `ldstr` uses for `s` (existing strings
    /// are reused by the metadata).
    pub fn define_user_string(&self, s: &str) -> Result<MdString> {
        let w: Vec<u16> = s.encode_utf16().collect();
        let mut tok = 0u32;
        // SAFETY: [local-memory] `w` is `len` UTF-16 units (no terminator needed: the length
        // is passed); the metadata copies them.
        let hr = unsafe {
            self.emit
                .DefineUserString(w.as_ptr(), len_u32(w.len())?, &mut tok)
        };
        check(hr, "IMetaDataEmit::DefineUserString")?;
        Ok(MdString(tok))
    }
}

/// Builds signature blobs (ECMA-335 II.23.2) for the references injected IL
/// uses.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SigBuilder {
    bytes: Vec<u8>,
}

/// The element types a signature encodes in one byte (`CorElementType`:
/// `ELEMENT_TYPE_VOID` … `ELEMENT_TYPE_OBJECT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PrimitiveType {
    /// `void` (`ELEMENT_TYPE_VOID`), for return types.
    Void = sys::ELEMENT_TYPE_VOID as u8,
    /// `bool`.
    Boolean = sys::ELEMENT_TYPE_BOOLEAN as u8,
    /// `char`.
    Char = sys::ELEMENT_TYPE_CHAR as u8,
    /// `sbyte`.
    I1 = sys::ELEMENT_TYPE_I1 as u8,
    /// `byte`.
    U1 = sys::ELEMENT_TYPE_U1 as u8,
    /// `short`.
    I2 = sys::ELEMENT_TYPE_I2 as u8,
    /// `ushort`.
    U2 = sys::ELEMENT_TYPE_U2 as u8,
    /// `int`.
    I4 = sys::ELEMENT_TYPE_I4 as u8,
    /// `uint`.
    U4 = sys::ELEMENT_TYPE_U4 as u8,
    /// `long`.
    I8 = sys::ELEMENT_TYPE_I8 as u8,
    /// `ulong`.
    U8 = sys::ELEMENT_TYPE_U8 as u8,
    /// `float`.
    R4 = sys::ELEMENT_TYPE_R4 as u8,
    /// `double`.
    R8 = sys::ELEMENT_TYPE_R8 as u8,
    /// `string`.
    String = sys::ELEMENT_TYPE_STRING as u8,
    /// `TypedReference`.
    TypedByRef = sys::ELEMENT_TYPE_TYPEDBYREF as u8,
    /// `nint`.
    I = sys::ELEMENT_TYPE_I as u8,
    /// `nuint`.
    U = sys::ELEMENT_TYPE_U as u8,
    /// `object`.
    Object = sys::ELEMENT_TYPE_OBJECT as u8,
}

/// Unmanaged calling conventions for a `calli` to native code
/// (`IMAGE_CEE_CS_CALLCONV_C`, `_STDCALL`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnmanagedCallConv {
    /// `cdecl` (`IMAGE_CEE_CS_CALLCONV_C`).
    C,
    /// `stdcall` (`IMAGE_CEE_CS_CALLCONV_STDCALL`). On x86_64 and aarch64
    /// every one of these is the platform's one C convention: what Rust's
    /// `extern "system"` (and `extern "C"`) compiles to.
    StdCall,
}

impl SigBuilder {
    /// An empty blob.
    pub fn new() -> Self {
        SigBuilder::default()
    }

    /// A static managed method: `DEFAULT`, parameter count, return type and
    /// parameters (each an encoded type, e.g. [`SigBuilder::primitive`]).
    pub fn static_method(ret: &[u8], params: &[&[u8]]) -> Result<Vec<u8>> {
        Self::method(sys::IMAGE_CEE_CS_CALLCONV_DEFAULT as u8, ret, params)
    }

    /// An instance method (`HASTHIS`).
    pub fn instance_method(ret: &[u8], params: &[&[u8]]) -> Result<Vec<u8>> {
        Self::method(
            (sys::IMAGE_CEE_CS_CALLCONV_DEFAULT | sys::IMAGE_CEE_CS_CALLCONV_HASTHIS) as u8,
            ret,
            params,
        )
    }

    /// A stand-alone signature for `calli` to a native function pointer.
    pub fn unmanaged_calli(
        conv: UnmanagedCallConv,
        ret: &[u8],
        params: &[&[u8]],
    ) -> Result<Vec<u8>> {
        let c = match conv {
            UnmanagedCallConv::C => sys::IMAGE_CEE_CS_CALLCONV_C,
            UnmanagedCallConv::StdCall => sys::IMAGE_CEE_CS_CALLCONV_STDCALL,
        };
        Self::method(c as u8, ret, params)
    }

    fn method(conv: u8, ret: &[u8], params: &[&[u8]]) -> Result<Vec<u8>> {
        let mut b = SigBuilder::new();
        b.bytes.push(conv);
        b.compressed(
            u32::try_from(params.len())
                .map_err(|_| Error::InvalidArgument("too many parameters"))?,
        )?;
        b.bytes.extend_from_slice(ret);
        for p in params {
            b.bytes.extend_from_slice(p);
        }
        Ok(b.bytes)
    }

    /// A primitive type, encoded (one byte).
    pub fn primitive(element_type: PrimitiveType) -> [u8; 1] {
        [element_type as u8]
    }

    /// Appends an unsigned integer in the compressed form (II.23.2); values
    /// above `0x1FFF_FFFF` do not fit.
    pub fn compressed(&mut self, v: u32) -> Result<&mut Self> {
        match v {
            0..=0x7f => self.bytes.push(v as u8),
            0x80..=0x3fff => self
                .bytes
                .extend_from_slice(&((v as u16) | 0x8000).to_be_bytes()),
            0x4000..=0x1fff_ffff => self
                .bytes
                .extend_from_slice(&(v | 0xc000_0000).to_be_bytes()),
            _ => {
                return Err(Error::InvalidArgument(
                    "value too large for a compressed integer",
                ))
            }
        }
        Ok(self)
    }

    /// Appends a TypeDef, TypeRef or TypeSpec token in the compressed
    /// `TypeDefOrRefOrSpecEncoded` form.
    pub fn type_token(&mut self, token: MdToken) -> Result<&mut Self> {
        let tag = match token.table() {
            t if t == sys::mdtTypeDef => 0,
            t if t == sys::mdtTypeRef => 1,
            t if t == sys::mdtTypeSpec => 2,
            _ => {
                return Err(Error::InvalidArgument(
                    "not a TypeDef, TypeRef or TypeSpec token",
                ))
            }
        };
        self.compressed((token.rid() << 2) | tag)
    }

    /// Appends raw bytes (an already encoded type).
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    /// The blob.
    pub fn finish(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::il::CallSite;

    #[test]
    fn calli_signature_is_the_ecma_encoding() {
        let sig = SigBuilder::unmanaged_calli(
            UnmanagedCallConv::StdCall,
            &SigBuilder::primitive(PrimitiveType::Void),
            &[&SigBuilder::primitive(PrimitiveType::I4)],
        )
        .unwrap();
        assert_eq!(sig, vec![0x02, 0x01, 0x01, 0x08]);
        let site = CallSite::from_signature(&sig).unwrap();
        assert_eq!(
            site,
            CallSite {
                params: 1,
                has_this: false,
                returns_value: false
            }
        );
    }

    #[test]
    fn compressed_integers_and_type_tokens() {
        let mut b = SigBuilder::new();
        b.compressed(0x03).unwrap();
        b.compressed(0x80).unwrap();
        b.compressed(0x3fff).unwrap();
        b.compressed(0x4000).unwrap();
        b.type_token(MdToken(0x0100_0012)).unwrap();
        assert!(b.compressed(0x2000_0000).is_err());
        assert_eq!(
            b.finish(),
            vec![0x03, 0x80, 0x80, 0xbf, 0xff, 0xc0, 0x00, 0x40, 0x00, 0x49]
        );
        let inst = SigBuilder::instance_method(&[0x08], &[&[0x0e], &[0x08]]).unwrap();
        assert_eq!(inst, vec![0x20, 0x02, 0x08, 0x0e, 0x08]);
        let site = CallSite::from_signature(&inst).unwrap();
        assert_eq!(site.pops(crate::il::OpCode::CALLVIRT), 3);
        assert_eq!(site.pops(crate::il::OpCode::NEWOBJ), 2);
        assert_eq!(site.pushes(crate::il::OpCode::NEWOBJ), 1);
    }

    #[test]
    fn define_static_method_takes_only_static_method_signatures() {
        let int32 = SigBuilder::primitive(PrimitiveType::I4);
        let stat = SigBuilder::static_method(&int32, &[&int32]).unwrap();
        let inst = SigBuilder::instance_method(&int32, &[&int32]).unwrap();
        assert!(check_static_signature(&stat).is_ok());
        assert!(check_static_signature(&inst).is_err());
        assert!(
            check_static_signature(&[0x06, 0x08]).is_err(),
            "a field signature"
        );
        assert!(check_static_signature(&[]).is_err());
    }
}
