//! The side-by-side host as a program (see `clrprof_testing::sxs`).
fn main() {
    std::process::exit(clrprof_testing::sxs::host_main());
}
