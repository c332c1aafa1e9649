//! Safe access to a module's metadata (`IMetaDataImport`, `IMetaDataImport2`).
//!
//! Enough to name and describe things: type, method and field names with
//! their enclosing types, and signature blobs (decoded in [`crate::signature`]
//! when that module is present). Strings use the caller-allocated buffer
//! protocol of [`crate::buffer`].

use crate::buffer::fill_string;
use crate::error::{check, Error, Result};
use crate::ids::*;
use clrprof_sys as sys;
use windows_core::{IUnknown, Interface};

/// A module's metadata, read side (`IMetaDataImport`, plus `IMetaDataImport2`
/// when the runtime offers it).
#[derive(Clone)]
pub struct MetaDataImport {
    import: sys::IMetaDataImport,
    import2: Option<sys::IMetaDataImport2>,
}

// SAFETY: the runtime's metadata import objects are free-threaded for reading
// (the profiling API hands them out to be used from any callback thread);
// COM reference counting is thread-safe.
unsafe impl Send for MetaDataImport {}
// SAFETY: as above.
unsafe impl Sync for MetaDataImport {}

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

impl MetaDataImport {
    /// Wraps a metadata object returned by the runtime.
    pub fn from_unknown(unknown: &IUnknown) -> Result<Self> {
        let import: sys::IMetaDataImport = unknown
            .cast()
            .map_err(|e| Error::runtime(e.code(), "QueryInterface(IMetaDataImport)"))?;
        let import2 = unknown.cast().ok();
        Ok(MetaDataImport { import, import2 })
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
            // SAFETY: `buf` has `cap` WCHARs; other out pointers are locals. A
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
        // SAFETY: valid out pointer; the metadata checks the token.
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
            // SAFETY: `buf` has `cap` WCHARs; other out pointers are locals.
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
            // SAFETY: the metadata returns a pointer to `sig_len` bytes of its
            // signature heap, valid while the metadata object lives (we hold it).
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
}
