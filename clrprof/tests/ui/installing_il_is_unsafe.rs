// Installing an IL body is unsafe: a well-formed body can read any address
// (`ldc.i8 <address>; conv.i; ldind.i4`), and the JIT compiles what it is
// given. Safe code cannot install IL, neither at JIT time nor through ReJIT.
use clrprof::info::IlBuffer;
use clrprof::rejit::FunctionControl;
use clrprof::{MdMethodDef, ModuleId, ProfilerInfo};

fn at_jit<'a>(info: &ProfilerInfo, module: ModuleId<'a>, method: MdMethodDef, body: IlBuffer<'a>) {
    let _ = info.set_il_function_body(module, method, body);
}

fn at_rejit(control: &FunctionControl) {
    // ldc.i8 0x1000; conv.i; ldind.i4; ret
    let _ = control.set_il_function_body(&[
        0x32, 0x21, 0x00, 0x10, 0, 0, 0, 0, 0, 0, 0xD3, 0x4A, 0x2A,
    ]);
}

fn main() {}
