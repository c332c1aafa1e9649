//! Windows base types and metadata token types used by the profiling API.
//!
//! The profiling headers are written against the Windows SDK type names
//! (`ULONG`, `UINT_PTR`, `WCHAR`, ...). These aliases give them the widths the
//! runtime uses on every platform it supports: the PAL keeps `ULONG`/`LONG`
//! at 32 bits and `WCHAR` at 16 bits even on 64-bit Linux, and `*_PTR` types
//! follow the pointer width.

use core::ffi::c_void;

pub use windows_core::{IUnknown, IUnknown_Vtbl, Interface, GUID, HRESULT};

/// Win32 `BOOL`: a 32-bit integer where zero is false and anything else true.
pub type BOOL = i32;
/// Win32 `BYTE`: unsigned 8 bits.
pub type BYTE = u8;
/// Win32 `USHORT`: unsigned 16 bits.
pub type USHORT = u16;
/// Win32 `WCHAR`: one UTF-16 code unit (16 bits on every runtime platform).
pub type WCHAR = u16;
/// Win32 `LONG`: signed 32 bits (also on 64-bit Linux, via the PAL).
pub type LONG = i32;
/// Win32 `LONG32`: signed 32 bits.
pub type LONG32 = i32;
/// Win32 `ULONG`: unsigned 32 bits (also on 64-bit Linux, via the PAL).
pub type ULONG = u32;
/// Win32 `ULONG32`: unsigned 32 bits.
pub type ULONG32 = u32;
/// Win32 `DWORD`: unsigned 32 bits.
pub type DWORD = u32;
/// Win32 `UINT`: unsigned 32 bits.
pub type UINT = u32;
/// Win32 `INT`: signed 32 bits.
pub type INT = i32;
/// Win32 `UINT8`: unsigned 8 bits.
pub type UINT8 = u8;
/// Win32 `UINT32`: unsigned 32 bits.
pub type UINT32 = u32;
/// Win32 `UINT64`: unsigned 64 bits.
pub type UINT64 = u64;
/// Win32 `ULONGLONG`: unsigned 64 bits.
pub type ULONGLONG = u64;
/// Win32 `LONGLONG`: signed 64 bits.
pub type LONGLONG = i64;
/// Win32 `UINT_PTR`: unsigned, pointer-sized.
pub type UINT_PTR = usize;
/// Win32 `ULONG_PTR`: unsigned, pointer-sized.
pub type ULONG_PTR = usize;
/// Win32 `SIZE_T`: unsigned, pointer-sized.
pub type SIZE_T = usize;
/// Win32 `HANDLE`: an opaque OS handle (a thread handle in the profiling API).
pub type HANDLE = *mut c_void;
/// Win32 `LPCWSTR`: pointer to a NUL-terminated UTF-16 string the callee reads.
pub type LPCWSTR = *const WCHAR;
/// Win32 `LPWSTR`: pointer to a UTF-16 buffer the callee may write.
pub type LPWSTR = *mut WCHAR;
/// Win32 `LPCBYTE`: pointer to bytes the callee reads.
pub type LPCBYTE = *const BYTE;
/// Win32 `LPBYTE`: pointer to bytes the callee may write.
pub type LPBYTE = *mut BYTE;
/// Win32 `LPCGUID`: pointer to a GUID the callee reads.
pub type LPCGUID = *const GUID;
/// COM `REFGUID`: a GUID passed by reference.
pub type REFGUID = *const GUID;
/// COM `REFIID`: an interface ID passed by reference.
pub type REFIID = *const GUID;
/// COM `REFCLSID`: a class ID passed by reference.
pub type REFCLSID = *const GUID;

/// Mirrors `HCORENUM` (corhdr.h): the opaque cursor of a metadata enumeration;
/// null starts a new enumeration, and it must be released with `CloseEnum`.
pub type HCORENUM = *mut c_void;

/// Mirrors `mdToken` (corhdr.h): a metadata token, table kind in the high
/// byte and row ID (RID) in the low three bytes.
pub type mdToken = u32;
/// Mirrors `mdModule` (corhdr.h): a Module token (table 0x00).
pub type mdModule = mdToken;
/// Mirrors `mdTypeRef` (corhdr.h): a TypeRef token (table 0x01).
pub type mdTypeRef = mdToken;
/// Mirrors `mdTypeDef` (corhdr.h): a TypeDef token (table 0x02).
pub type mdTypeDef = mdToken;
/// Mirrors `mdFieldDef` (corhdr.h): a FieldDef token (table 0x04).
pub type mdFieldDef = mdToken;
/// Mirrors `mdMethodDef` (corhdr.h): a MethodDef token (table 0x06).
pub type mdMethodDef = mdToken;
/// Mirrors `mdParamDef` (corhdr.h): a ParamDef token (table 0x08).
pub type mdParamDef = mdToken;
/// Mirrors `mdInterfaceImpl` (corhdr.h): an InterfaceImpl token (table 0x09).
pub type mdInterfaceImpl = mdToken;
/// Mirrors `mdMemberRef` (corhdr.h): a MemberRef token (table 0x0a).
pub type mdMemberRef = mdToken;
/// Mirrors `mdCustomAttribute` (corhdr.h): a CustomAttribute token (table 0x0c).
pub type mdCustomAttribute = mdToken;
/// Mirrors `mdPermission` (corhdr.h): a DeclSecurity token (table 0x0e).
pub type mdPermission = mdToken;
/// Mirrors `mdSignature` (corhdr.h): a StandAloneSig token (table 0x11).
pub type mdSignature = mdToken;
/// Mirrors `mdEvent` (corhdr.h): an Event token (table 0x14).
pub type mdEvent = mdToken;
/// Mirrors `mdProperty` (corhdr.h): a Property token (table 0x17).
pub type mdProperty = mdToken;
/// Mirrors `mdModuleRef` (corhdr.h): a ModuleRef token (table 0x1a).
pub type mdModuleRef = mdToken;
/// Mirrors `mdTypeSpec` (corhdr.h): a TypeSpec token (table 0x1b).
pub type mdTypeSpec = mdToken;
/// Mirrors `mdAssembly` (corhdr.h): an Assembly token (table 0x20).
pub type mdAssembly = mdToken;
/// Mirrors `mdAssemblyRef` (corhdr.h): an AssemblyRef token (table 0x23).
pub type mdAssemblyRef = mdToken;
/// Mirrors `mdFile` (corhdr.h): a File token (table 0x26).
pub type mdFile = mdToken;
/// Mirrors `mdExportedType` (corhdr.h): an ExportedType token (table 0x27).
pub type mdExportedType = mdToken;
/// Mirrors `mdManifestResource` (corhdr.h): a ManifestResource token (table 0x28).
pub type mdManifestResource = mdToken;
/// Mirrors `mdGenericParam` (corhdr.h): a GenericParam token (table 0x2a).
pub type mdGenericParam = mdToken;
/// Mirrors `mdMethodSpec` (corhdr.h): a MethodSpec token (table 0x2b).
pub type mdMethodSpec = mdToken;
/// Mirrors `mdGenericParamConstraint` (corhdr.h): a GenericParamConstraint token (table 0x2c).
pub type mdGenericParamConstraint = mdToken;
/// Mirrors `mdString` (corhdr.h): a user-string heap token (0x70).
pub type mdString = mdToken;
/// Mirrors `mdCPToken` (corhdr.h): a constant-pool token.
pub type mdCPToken = mdToken;
/// Mirrors `RID` (corhdr.h): a row index inside one metadata table.
pub type RID = u32;

/// Mirrors `COR_SIGNATURE` (corhdr.h): one byte of a compressed metadata signature.
pub type COR_SIGNATURE = BYTE;
/// Mirrors `PCOR_SIGNATURE` (corhdr.h): a writable signature blob.
pub type PCOR_SIGNATURE = *mut COR_SIGNATURE;
/// Mirrors `PCCOR_SIGNATURE` (corhdr.h): a read-only signature blob.
pub type PCCOR_SIGNATURE = *const COR_SIGNATURE;
/// Mirrors `UVCP_CONSTANT` (cor.h): a pointer to a constant's value blob,
/// possibly unaligned.
pub type UVCP_CONSTANT = *const c_void;
/// Win32 `PVOID`: an untyped pointer.
pub type PVOID = *mut c_void;
/// Win32 `LPVOID`: an untyped pointer.
pub type LPVOID = *mut c_void;
/// Win32 `LPCVOID`: an untyped pointer to data the callee reads.
pub type LPCVOID = *const c_void;
/// Win32 `LPSTR`: pointer to a NUL-terminated 8-bit string buffer.
pub type LPSTR = *mut i8;
/// Win32 `LPCSTR`: pointer to a NUL-terminated 8-bit string the callee reads.
pub type LPCSTR = *const i8;
/// COM `CLSID`: a class ID.
pub type CLSID = GUID;
/// Win32 `INT32`: signed 32 bits.
pub type INT32 = i32;
/// Win32 `HMODULE`: a loaded module's handle.
pub type HMODULE = *mut c_void;
