//! The `#[profiler]` attribute of clrprof.
//!
//! ```ignore
//! #[clrprof::profiler(clsid = "{9E2B38F2-7355-4C61-A54F-434B7AC266C0}")]
//! #[derive(Default)]
//! struct MyProfiler { /* Send + Sync state */ }
//! impl clrprof::Profiler for MyProfiler { /* callbacks */ }
//! ```
//!
//! Generates, next to the struct:
//! - an exported class entry `clrprof_class_<HEX>` named after the CLSID
//!   (a marker, the CLSID and the creation function), which the
//!   `DllGetClassObject` export of clrprof finds by name and checks (so
//!   several profilers with different CLSIDs can share one library); two
//!   profilers with the same CLSID in one crate collide on that symbol;
//! - a constructor used once per `IClassFactory::CreateInstance`
//!   (`Default::default()`, or the function named by `new = path`);
//! - an exported marker symbol `clrprof_profiler_clsid_<HEX>` holding the
//!   ASCII text `CLRPROF_CLSID:{...}`, which `clrprof clsid LIB` reads from
//!   the file without loading it;
//! - a compile-time check that the struct is `Send + Sync`.

#![deny(missing_docs)]

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{format_ident, quote};
use syn::{parse_macro_input, Item, LitStr, Path};

/// Marks a struct as a CLR profiler served under the given CLSID. See the
/// crate documentation.
#[proc_macro_attribute]
pub fn profiler(args: TokenStream, item: TokenStream) -> TokenStream {
    let mut clsid: Option<LitStr> = None;
    let mut ctor: Option<Path> = None;
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("clsid") {
            clsid = Some(meta.value()?.parse()?);
            Ok(())
        } else if meta.path.is_ident("new") {
            ctor = Some(meta.value()?.parse()?);
            Ok(())
        } else {
            Err(meta.error("unknown #[profiler] argument; expected `clsid = \"{...}\"` or `new = path::to::constructor`"))
        }
    });
    parse_macro_input!(args with parser);

    let item = parse_macro_input!(item as Item);
    match expand(item, clsid, ctor) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn expand(
    item: Item,
    clsid: Option<LitStr>,
    ctor: Option<Path>,
) -> syn::Result<proc_macro2::TokenStream> {
    let strukt = match item {
        Item::Struct(s) => s,
        other => {
            let what = match other {
                Item::Enum(_) => "an enum",
                Item::Fn(_) => "a function",
                Item::Impl(_) => "an impl block",
                Item::Trait(_) => "a trait",
                Item::Mod(_) => "a module",
                Item::Union(_) => "a union",
                _ => "this item",
            };
            return Err(syn::Error::new_spanned(
                other,
                format!("#[profiler] goes on a struct (the profiler's state), not on {what}; put `impl clrprof::Profiler for YourStruct` next to it"),
            ));
        }
    };
    if !strukt.generics.params.is_empty() {
        return Err(syn::Error::new_spanned(
            &strukt.generics,
            "a #[profiler] struct cannot be generic: the runtime creates it by CLSID, with no type arguments",
        ));
    }
    let clsid = clsid.ok_or_else(|| {
        syn::Error::new(Span::call_site(), "#[profiler] needs a CLSID: #[profiler(clsid = \"{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}\")]")
    })?;
    let value = parse_clsid(&clsid.value()).ok_or_else(|| {
        syn::Error::new_spanned(
            &clsid,
            format!(
                "invalid CLSID {:?}: expected 32 hex digits in the form {{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}} (braces optional)",
                clsid.value()
            ),
        )
    })?;
    let canonical = format_clsid(value);
    let marker = format!("CLRPROF_CLSID:{canonical}");
    let marker_len = marker.len();
    let marker_bytes = syn::LitByteStr::new(marker.as_bytes(), clsid.span());
    let ident = &strukt.ident;
    let marker_ident = format_ident!("clrprof_profiler_clsid_{:032X}", value);
    let create_ident = format_ident!("clrprof_class_{:032X}", value);
    let make = match ctor {
        Some(path) => quote! { #path() },
        None => quote! { <#ident as ::core::default::Default>::default() },
    };

    let unique_ident = format_ident!(
        "PROFILER_CLSID_{}",
        canonical
            .trim_matches(|c| c == '{' || c == '}')
            .replace('-', "_")
    );

    Ok(quote! {
        #strukt

        /// Two `#[profiler]` structs with the same CLSID in one module clash on
        /// this name at `cargo check` time (across modules, on the exported
        /// `clrprof_class_*` symbol when building).
        #[doc(hidden)]
        #[allow(dead_code)]
        const #unique_ident: () = ();

        const _: () = {
            /// Marker read by `clrprof clsid` from the file.
            // SAFETY (no_mangle): the name is derived from this class's CLSID.
            #[unsafe(no_mangle)]
            #[used]
            pub static #marker_ident: [u8; #marker_len] = *#marker_bytes;

            #[allow(dead_code)]
            fn __clrprof_assert_thread_safe<T: ?Sized + ::clrprof::__private::ThreadSafeProfiler>() {}
            #[allow(dead_code)]
            fn __clrprof_check() {
                __clrprof_assert_thread_safe::<#ident>();
            }

            /// Creates this profiler class.
            unsafe extern "system" fn __clrprof_create(
                riid: *const ::clrprof::__private::GUID,
                ppv: *mut *mut ::core::ffi::c_void,
            ) -> ::clrprof::HRESULT {
                // SAFETY: forwarded from IClassFactory::CreateInstance, whose
                // caller guarantees valid `riid` and `ppv` pointers.
                unsafe { ::clrprof::__private::create_instance::<#ident>(|| #make, riid, ppv) }
            }

            /// This class's entry, found by `DllGetClassObject` by name.
            // SAFETY (no_mangle): the name is derived from this class's CLSID,
            // so it is unique per class; two classes with one CLSID collide
            // at link time rather than shadow each other.
            #[unsafe(no_mangle)]
            pub static #create_ident: ::clrprof::factory::ClassEntry = ::clrprof::factory::ClassEntry {
                magic: ::clrprof::factory::CLASS_ENTRY_MAGIC,
                clsid: #value,
                create: __clrprof_create,
            };
        };
    })
}

/// Parses `{XXXXXXXX-XXXX-XXXX-XXXX-XXXXXXXXXXXX}` (braces optional) into the
/// GUID's 128-bit value in `GUID::from_u128` order.
fn parse_clsid(s: &str) -> Option<u128> {
    let s = s.trim();
    let s = s
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .unwrap_or(s);
    let groups: Vec<&str> = s.split('-').collect();
    let lens = [8, 4, 4, 4, 12];
    if groups.len() != 5
        || groups
            .iter()
            .zip(lens)
            .any(|(g, l)| g.len() != l || !g.chars().all(|c| c.is_ascii_hexdigit()))
    {
        return None;
    }
    u128::from_str_radix(&groups.concat(), 16).ok()
}

fn format_clsid(v: u128) -> String {
    let h = format!("{v:032X}");
    format!(
        "{{{}-{}-{}-{}-{}}}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats_clsids() {
        let v = parse_clsid("{9e2b38f2-7355-4c61-a54f-434b7ac266c0}").unwrap();
        assert_eq!(format_clsid(v), "{9E2B38F2-7355-4C61-A54F-434B7AC266C0}");
        assert_eq!(parse_clsid("9E2B38F2-7355-4C61-A54F-434B7AC266C0"), Some(v));
        assert_eq!(parse_clsid("{9E2B38F2-7355-4C61-A54F-434B7AC266C}"), None);
        assert_eq!(parse_clsid("{9E2B38F2-7355-4C61-A54F-434B7AC266CG}"), None);
        assert_eq!(parse_clsid("not a guid"), None);
    }
}
