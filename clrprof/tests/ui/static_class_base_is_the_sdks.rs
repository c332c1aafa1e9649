// Review 36: a class `MetaDataEmit::define_static_class` adds is read by
// the application's reflection (`Assembly.GetTypes()` loads every TypeDef
// of the module), so a base the class cannot have (a sealed class, a
// reference the module lacks) threw `ReflectionTypeLoadException` in the
// application. A static class can only derive from `System.Object`, which
// the SDK now names itself: there is no base to pass.
use clrprof::metadata_emit::MetaDataEmit;
use clrprof::{MdToken, MdTypeDef, Result};

fn derived_from_a_sealed_class(emit: &MetaDataEmit<'_>, sealed: MdToken) -> Result<MdTypeDef> {
    emit.define_static_class("Review.Injected", sealed)
}

fn main() {}
