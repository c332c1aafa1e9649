#!/usr/bin/env bash
# Installs what clrprof's cross-target test legs and test rig need on a bare
# Debian 12 machine (run by `cargo xtask toolchain`):
#
#   rustup targets   aarch64-unknown-linux-gnu, x86_64-pc-windows-gnu,
#                    x86_64-pc-windows-msvc (built and checked, never linked:
#                    `cargo xtask msvc`)
#   Debian packages  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
#                    libstdc++6-arm64-cross (aarch64: cross linker, libc,
#                    user-mode emulator, and the C++ runtime the arm64 CoreCLR
#                    links against)
#                    gcc-mingw-w64-x86-64 wine64 (win-x64 legs)
#                    mono-mcs (Mono's C# compiler: the large third-party
#                    program some scenarios run)
#                    python3-pip python3-venv (pythonnet in a venv)
#                    valgrind (callgrind and its client-request header: the
#                    instruction-count gate, `cargo xtask bench gate`)
#                    protobuf-compiler (protoc: the trace-context scenario
#                    decodes OTLP with it, independently of the SDK)
#
# Idempotent: prints nothing and exits 0 when everything is present (checked
# in the active toolchain's sysroot, where both `rustup target add` and a
# rust-std installed by hand put a target's library, and with dpkg-query,
# before any rustup or apt-get).
# Exits 1 with a message saying what is missing when it cannot install
# (no rustup, not Debian/apt, not root and no password-less sudo, apt failed).
set -euo pipefail

RUST_TARGETS=(aarch64-unknown-linux-gnu x86_64-pc-windows-gnu x86_64-pc-windows-msvc)
DEB_PACKAGES=(
    gcc-aarch64-linux-gnu
    libc6-dev-arm64-cross
    qemu-user
    libstdc++6-arm64-cross
    gcc-mingw-w64-x86-64
    wine64
    mono-mcs
    python3-pip
    python3-venv
    valgrind
    protobuf-compiler
)

say() { echo "install-toolchains: $*" >&2; }

missing_targets=()
sysroot=$(rustc --print sysroot 2>/dev/null || true)
for target in "${RUST_TARGETS[@]}"; do
    if [ -z "$sysroot" ] || [ ! -d "$sysroot/lib/rustlib/$target/lib" ]; then
        missing_targets+=("$target")
    fi
done
if [ ${#missing_targets[@]} -gt 0 ] && ! command -v rustup >/dev/null 2>&1; then
    say "rustup not found; cannot add Rust targets ${missing_targets[*]}"
    exit 1
fi

package_installed() {
    dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing_packages=()
if command -v dpkg-query >/dev/null 2>&1; then
    for package in "${DEB_PACKAGES[@]}"; do
        if ! package_installed "$package"; then
            missing_packages+=("$package")
        fi
    done
else
    missing_packages=("${DEB_PACKAGES[@]}")
fi

if [ ${#missing_targets[@]} -eq 0 ] && [ ${#missing_packages[@]} -eq 0 ]; then
    exit 0
fi

# Keep going after a failure, so one unreachable source does not leave the
# other half uninstalled; exit 1 at the end if anything failed.
failed=0

if [ ${#missing_targets[@]} -gt 0 ]; then
    say "adding Rust targets: ${missing_targets[*]}"
    if ! rustup target add "${missing_targets[@]}"; then
        say "rustup target add failed for: ${missing_targets[*]} (is the Rust distribution server reachable?)"
        failed=1
    fi
fi

install_packages() {
    if ! command -v apt-get >/dev/null 2>&1 || [ ! -f /etc/debian_version ]; then
        say "not a Debian system with apt; install these packages (or their equivalents) by hand: ${missing_packages[*]}"
        return 1
    fi
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
            sudo=(sudo -n)
        else
            say "not root and no password-less sudo; as root run: apt-get install ${missing_packages[*]}"
            return 1
        fi
    fi
    say "installing Debian packages: ${missing_packages[*]}"
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq; then
        say "apt-get update failed"
        return 1
    fi
    if ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing_packages[@]}" >/dev/null; then
        say "apt-get install failed for: ${missing_packages[*]}"
        return 1
    fi
    local still_missing=()
    for package in "${missing_packages[@]}"; do
        package_installed "$package" || still_missing+=("$package")
    done
    if [ ${#still_missing[@]} -gt 0 ]; then
        say "still missing after apt-get install: ${still_missing[*]}"
        return 1
    fi
}

if [ ${#missing_packages[@]} -gt 0 ]; then
    install_packages || failed=1
fi

if [ "$failed" -ne 0 ]; then
    exit 1
fi
say "done"
