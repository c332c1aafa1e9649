#!/bin/sh
# Cargo `runner` for x86_64-pc-windows-gnu (see .cargo/config.toml): runs a
# Windows test executable under Wine and exits with its exit code, so a
# failing test fails the cargo run.
#
# The Wine prefix lives under the cargo target directory and is set up on
# first use (a few seconds); CLRPROF_WINEPREFIX overrides its location.
#
# Rust's standard library for Windows imports ProcessPrng from
# bcryptprimitives.dll, which Wine 8 lacks, so a program built by current
# Rust fails to start there (status c0000135). On first use this script
# builds a one-function stand-in with the mingw-w64 compiler (random bytes
# from advapi32's RtlGenRandom, which Wine has) into the prefix's system32.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)
target_dir=${CARGO_TARGET_DIR:-$repo/target}
WINEPREFIX=${CLRPROF_WINEPREFIX:-$target_dir/wine-prefix}
WINEDEBUG=${WINEDEBUG:--all}
export WINEPREFIX WINEDEBUG

wine=
for candidate in /usr/lib/wine/wine64 wine64 wine; do
    if command -v "$candidate" >/dev/null 2>&1; then
        wine=$candidate
        break
    fi
done
if [ -z "$wine" ]; then
    echo "wine-runner: no wine64 found; run 'cargo xtask toolchain'" >&2
    exit 127
fi

if [ ! -f "$WINEPREFIX/system.reg" ]; then
    mkdir -p "$WINEPREFIX"
    # No Wine Mono or Gecko installers in the new prefix. (Only here: with
    # mscoree disabled at run time, .NET 8 cannot load its mscorlib facade.)
    WINEDLLOVERRIDES="mscoree,mshtml=" "$wine" wineboot --init >/dev/null 2>&1 || true
    server=$(dirname "$(command -v "$wine")")/wineserver
    [ -x "$server" ] || server=wineserver
    "$server" -w >/dev/null 2>&1 || true
fi

shim="$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"
if [ ! -f "$shim" ]; then
    work=$(mktemp -d)
    cat >"$work/bcryptprimitives.c" <<'CSRC'
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
    while (length > 0) {
        ULONG chunk = length > 0x10000000 ? 0x10000000 : (ULONG)length;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        length -= chunk;
    }
    return TRUE;
}
CSRC
    if ! x86_64-w64-mingw32-gcc -shared -O2 -o "$work/bcryptprimitives.dll" \
            "$work/bcryptprimitives.c" -ladvapi32; then
        echo "wine-runner: cannot build the bcryptprimitives.dll stand-in" >&2
        rm -rf "$work"
        exit 127
    fi
    mkdir -p "$(dirname "$shim")"
    cp "$work/bcryptprimitives.dll" "$shim"
    rm -rf "$work"
fi

exec "$wine" "$@"
