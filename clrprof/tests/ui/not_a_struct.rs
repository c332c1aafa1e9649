use clrprof::profiler;

#[profiler(clsid = "{8C3D4D6A-2E7B-4F0E-9B61-3A1B2C4D5E60}")]
enum P {
    A,
}

fn main() {}
