/*
 * clrprof's `dotnet` for a runtime root assembled from NuGet's runtime packs.
 *
 * NuGet serves the runtime (`Microsoft.NETCore.App.Runtime.<rid>`, which holds
 * hostfxr, hostpolicy and the framework) but no package holds the `dotnet`
 * executable itself. What that executable does for `dotnet app.dll` is small:
 * find `<its own folder>/host/fxr/<version>/` and hand the command line to that
 * hostfxr through `hostfxr_main_startupinfo` (exported by every hostfxr since
 * .NET Core 2.2), naming itself as the host and its folder as the root. This
 * program does exactly that, so the framework resolution, the runtimeconfig,
 * the deps files and the start of the runtime are the runtime's own code.
 *
 * Built by clrprof-testing's provisioning for each leg's target (the host's C
 * compiler, aarch64-linux-gnu-gcc, x86_64-w64-mingw32-gcc with -municode).
 * It must be named `dotnet` (`dotnet.exe`): hostfxr decides it runs as the
 * muxer from that name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
typedef wchar_t pchar;
#define P(s) L##s
#define SEP P("\\")
#define FXR_NAME P("hostfxr.dll")
#define plen wcslen
#define pcpy wcscpy
#define pcat wcscat
#else
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <unistd.h>
typedef char pchar;
#define P(s) s
#define SEP "/"
#ifdef __APPLE__
#define FXR_NAME "libhostfxr.dylib"
#else
#define FXR_NAME "libhostfxr.so"
#endif
#define plen strlen
#define pcpy strcpy
#define pcat strcat
#endif

#define PATH_CAP 4096

typedef int (*main_startupinfo_fn)(int argc, const pchar **argv,
                                   const pchar *host_path,
                                   const pchar *dotnet_root,
                                   const pchar *app_path);

/* Compares two dotted versions numerically, part by part ("10.0.1" > "9.0.23"). */
static int version_cmp(const pchar *a, const pchar *b)
{
    while (*a || *b) {
        unsigned long x = 0, y = 0;
        while (*a >= P('0') && *a <= P('9')) x = x * 10 + (unsigned long)(*a++ - P('0'));
        while (*b >= P('0') && *b <= P('9')) y = y * 10 + (unsigned long)(*b++ - P('0'));
        if (x != y) return x < y ? -1 : 1;
        /* Skip the separator (or a pre-release tail, compared as text below). */
        if (*a != *b) return *a < *b ? -1 : 1;
        if (*a) { a++; b++; }
    }
    return 0;
}

static void fail(const char *what)
{
    fprintf(stderr, "clrprof dotnet: %s\n", what);
    exit(131);
}

static int append(pchar *dst, const pchar *part)
{
    if (plen(dst) + plen(part) + 1 > PATH_CAP) return 0;
    pcat(dst, part);
    return 1;
}

#ifdef _WIN32
int wmain(int argc, const wchar_t **argv)
#else
int main(int argc, const char **argv)
#endif
{
    static pchar host_path[PATH_CAP], root[PATH_CAP], fxr_dir[PATH_CAP];
    static pchar fxr_path[PATH_CAP], app_path[PATH_CAP], best[256];
    pchar *slash;

#ifdef _WIN32
    DWORD n = GetModuleFileNameW(NULL, host_path, PATH_CAP);
    if (n == 0 || n >= PATH_CAP) fail("cannot read the path of this executable");
    pcpy(root, host_path);
    slash = wcsrchr(root, L'\\');
#else
    ssize_t n = readlink("/proc/self/exe", host_path, PATH_CAP - 1);
    if (n <= 0) {
        /* No /proc (or macOS): the path the program was started with. */
        if (!argv[0] || !realpath(argv[0], host_path)) fail("cannot read the path of this executable");
    } else {
        host_path[n] = 0;
    }
    pcpy(root, host_path);
    slash = strrchr(root, '/');
#endif
    if (!slash) fail("this executable's path has no folder");
    *slash = 0;

    pcpy(fxr_dir, root);
    if (!append(fxr_dir, SEP P("host") SEP P("fxr"))) fail("path too long");

    best[0] = 0;
#ifdef _WIN32
    {
        static wchar_t pattern[PATH_CAP];
        WIN32_FIND_DATAW found;
        HANDLE h;
        pcpy(pattern, fxr_dir);
        if (!append(pattern, L"\\*")) fail("path too long");
        h = FindFirstFileW(pattern, &found);
        if (h != INVALID_HANDLE_VALUE) {
            do {
                if ((found.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) && found.cFileName[0] != L'.' &&
                    wcslen(found.cFileName) < 256 && (!best[0] || version_cmp(found.cFileName, best) > 0))
                    pcpy(best, found.cFileName);
            } while (FindNextFileW(h, &found));
            FindClose(h);
        }
    }
#else
    {
        DIR *d = opendir(fxr_dir);
        struct dirent *e;
        if (d) {
            while ((e = readdir(d)) != NULL) {
                if (e->d_name[0] != '.' && strlen(e->d_name) < 256 &&
                    (!best[0] || version_cmp(e->d_name, best) > 0))
                    pcpy(best, e->d_name);
            }
            closedir(d);
        }
    }
#endif
    if (!best[0]) fail("no host/fxr/<version> folder beside this executable");

    pcpy(fxr_path, fxr_dir);
    if (!append(fxr_path, SEP) || !append(fxr_path, best) || !append(fxr_path, SEP) ||
        !append(fxr_path, FXR_NAME))
        fail("path too long");
    /* hostfxr takes the muxer's own name with `.dll` as the app path when no app is given. */
    pcpy(app_path, root);
    if (!append(app_path, SEP P("dotnet.dll"))) fail("path too long");

    {
        main_startupinfo_fn entry;
#ifdef _WIN32
        HMODULE lib = LoadLibraryExW(fxr_path, NULL, LOAD_WITH_ALTERED_SEARCH_PATH);
        if (!lib) fail("cannot load hostfxr.dll");
        entry = (main_startupinfo_fn)(void *)GetProcAddress(lib, "hostfxr_main_startupinfo");
#else
        void *lib = dlopen(fxr_path, RTLD_LAZY | RTLD_GLOBAL);
        if (!lib) {
            fprintf(stderr, "clrprof dotnet: %s\n", dlerror());
            return 131;
        }
        *(void **)(&entry) = dlsym(lib, "hostfxr_main_startupinfo");
#endif
        if (!entry) fail("hostfxr has no hostfxr_main_startupinfo (older than .NET Core 2.2)");
        return entry(argc, argv, host_path, root, app_path);
    }
}
