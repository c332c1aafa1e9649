/*
 * The yardstick of `cargo xtask bench elt`: a minimal CLR profiler written
 * by hand in C that counts calls per function through ELT hooks, with no
 * SDK. clrprof's call-tracer is compared against it.
 *
 * - COM: one static profiler object whose vtable answers every
 *   ICorProfilerCallback* method with S_OK except Initialize; a static
 *   class factory; DllGetClassObject / DllCanUnloadNow.
 * - Initialize: QueryInterface for ICorProfilerInfo3, SetEventMask,
 *   SetFunctionIDMapper2 (one heap counter per function, its address is the
 *   client ID), then SetEnterLeaveFunctionHooks3 with the stubs of
 *   baseline_x86_64_sysv.S (fast path) or SetEnterLeaveFunctionHooks3WithInfo
 *   with plain C functions, chosen by CLRPROF_ELT=fastpath|withinfo. On a
 *   runtime without ICorProfilerInfo12 (CoreCLR before .NET 5) the WithInfo
 *   enter hook is the stub of baseline_x86_64_sysv.S that keeps xmm2-xmm7:
 *   that runtime's Unix x64 stub does not restore them after the hook, so a
 *   C hook that may touch them (any hook that formats a double, copies a
 *   struct with SSE, ...) must keep them itself, as clrprof does.
 * - Every hooked call adds one to its function's counter (relaxed atomic
 *   add, like call-tracer). At Shutdown the total goes to
 *   CLRPROF_OUTPUT (or stderr) as {"event":"baseline-total","count":N}.
 *
 * Vtable slots and IIDs are those of corprof.idl.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int32_t HRESULT;
typedef struct { uint32_t d1; uint16_t d2, d3; uint8_t d4[8]; } GUID;
typedef uintptr_t FunctionID;
typedef int32_t BOOL;

#define S_OK 0
#define E_NOINTERFACE ((HRESULT)0x80004002)
#define CLASS_E_CLASSNOTAVAILABLE ((HRESULT)0x80040111)

/* COR_PRF_MONITOR flags used here. */
#define MONITOR_ENTERLEAVE 0x1000u
#define DISABLE_INLINING 0x200000u
#define ENABLE_FUNCTION_ARGS 0x2000000u
#define ENABLE_FUNCTION_RETVAL 0x4000000u
#define ENABLE_FRAME_INFO 0x8000000u

/* ICorProfilerInfo3 vtable slots. */
enum { INFO_QI = 0, INFO_RELEASE = 2, INFO_SET_EVENT_MASK = 16, INFO_SET_MAPPER2 = 59,
       INFO_SET_HOOKS3 = 61, INFO_SET_HOOKS3_WITH_INFO = 62 };

static const GUID IID_Info3 = {0xB555ED4F, 0x452A, 0x4E54, {0x8B, 0x39, 0xB5, 0x36, 0x0B, 0xAD, 0x32, 0xA0}};
static const GUID IID_Info12 = {0x27B24CCD, 0x1CB1, 0x47C5, {0x96, 0xEE, 0x98, 0x19, 0x0D, 0xC3, 0x09, 0x59}};
static const GUID CLSID_Baseline = {0x6D1F6A1E, 0x3C8B, 0x4F7A, {0x9E, 0x52, 0x1B, 0x7C, 0x2D, 0x40, 0xE1, 0x93}};

typedef void **Vtbl;
typedef struct { Vtbl *vtbl; } ComObject;

struct counter { uint64_t count; };

static uint64_t total_functions;
static struct counter **all_counters;
static size_t counters_len, counters_cap;

/* Called by the stubs (fast path) and by the runtime (WithInfo). */
__attribute__((visibility("hidden"))) void baseline_enter(uintptr_t client) {
    __atomic_fetch_add(&((struct counter *)client)->count, 1, __ATOMIC_RELAXED);
}
__attribute__((visibility("hidden"))) void baseline_leave(uintptr_t client) { (void)client; }
__attribute__((visibility("hidden"))) void baseline_enter_with_info(uintptr_t client, uintptr_t info) { (void)info; baseline_enter(client); }
static void leave_with_info(uintptr_t client, uintptr_t info) { (void)client; (void)info; }

void baseline_enter_stub(void);
void baseline_leave_stub(void);
void baseline_enter_with_info_netcore3_stub(uintptr_t client, uintptr_t info);

static uintptr_t mapper(FunctionID id, void *client_data, BOOL *hook) {
    (void)client_data;
    struct counter *c = calloc(1, sizeof *c);
    if (c == NULL) { *hook = 0; return id; }
    /* The mapper runs on JIT threads; a spin lock keeps the list consistent. */
    static int lock;
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE)) {}
    if (counters_len == counters_cap) {
        size_t cap = counters_cap ? counters_cap * 2 : 1024;
        struct counter **grown = realloc(all_counters, cap * sizeof *grown);
        if (grown) { all_counters = grown; counters_cap = cap; }
    }
    if (counters_len < counters_cap) all_counters[counters_len++] = c;
    total_functions++;
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
    *hook = 1;
    return (uintptr_t)c;
}

static HRESULT call_info(void *info, int slot, uintptr_t a, uintptr_t b, uintptr_t c) {
    Vtbl vt = *(Vtbl *)info;
    HRESULT (*f)(void *, uintptr_t, uintptr_t, uintptr_t) = (HRESULT (*)(void *, uintptr_t, uintptr_t, uintptr_t))vt[slot];
    return f(info, a, b, c);
}

static HRESULT ok(void) { return S_OK; }
static uint32_t addref(void *self) { (void)self; return 1; }
/* ICorProfilerCallback11::LoadAsNotificationOnly: no, a normal profiler. */
static HRESULT not_notification_only(void *self, BOOL *only) { (void)self; *only = 0; return S_OK; }
static HRESULT qi_self(void *self, const GUID *iid, void **out) { (void)iid; *out = self; return S_OK; }

static HRESULT initialize(void *self, void *unknown) {
    (void)self;
    void *info = NULL;
    Vtbl uvt = *(Vtbl *)unknown;
    HRESULT (*qi)(void *, const GUID *, void **) = (HRESULT (*)(void *, const GUID *, void **))uvt[0];
    HRESULT hr = qi(unknown, &IID_Info3, &info);
    if (hr < 0) return hr;
    const char *variant = getenv("CLRPROF_ELT");
    int with_info = variant && strcmp(variant, "withinfo") == 0;
    /* Counting needs only the enter hook; CLRPROF_ELT_LEAVE=1 adds the leave
       and tailcall hooks (the benchmark's enter+leave mode). */
    const char *leave_env = getenv("CLRPROF_ELT_LEAVE");
    int leave = leave_env && strcmp(leave_env, "1") == 0;
    uint32_t mask = MONITOR_ENTERLEAVE | DISABLE_INLINING;
    if (with_info) mask |= ENABLE_FUNCTION_ARGS | ENABLE_FUNCTION_RETVAL | ENABLE_FRAME_INFO;
    if ((hr = call_info(info, INFO_SET_EVENT_MASK, mask, 0, 0)) < 0) return hr;
    if ((hr = call_info(info, INFO_SET_MAPPER2, (uintptr_t)mapper, 0, 0)) < 0) return hr;
    /* Pre-.NET 5 runtimes answer no ICorProfilerInfo12. */
    void *info12 = NULL;
    int netcore3 = qi(unknown, &IID_Info12, &info12) < 0;
    if (!netcore3) {
        Vtbl vt12 = *(Vtbl *)info12;
        ((uint32_t (*)(void *))vt12[INFO_RELEASE])(info12);
    }
    uintptr_t enter_info_hook = netcore3 ? (uintptr_t)baseline_enter_with_info_netcore3_stub
                                         : (uintptr_t)baseline_enter_with_info;
    if (with_info)
        hr = call_info(info, INFO_SET_HOOKS3_WITH_INFO, enter_info_hook,
                       leave ? (uintptr_t)leave_with_info : 0, leave ? (uintptr_t)leave_with_info : 0);
    else
        hr = call_info(info, INFO_SET_HOOKS3, (uintptr_t)baseline_enter_stub,
                       leave ? (uintptr_t)baseline_leave_stub : 0, leave ? (uintptr_t)baseline_leave_stub : 0);
    return hr;
}

static HRESULT shutdown(void *self) {
    (void)self;
    uint64_t total = 0;
    for (size_t i = 0; i < counters_len; i++) total += all_counters[i]->count;
    const char *path = getenv("CLRPROF_OUTPUT");
    FILE *f = path ? fopen(path, "a") : NULL;
    fprintf(f ? f : stderr, "{\"event\":\"baseline-total\",\"count\":%llu,\"functions\":%llu}\n",
            (unsigned long long)total, (unsigned long long)total_functions);
    if (f) fclose(f);
    return S_OK;
}

#define CALLBACK_SLOTS 128
static void *callback_vtbl[CALLBACK_SLOTS];
static ComObject profiler_object = { (Vtbl *)callback_vtbl };

static HRESULT create_instance(void *self, void *outer, const GUID *iid, void **out) {
    (void)self; (void)outer; (void)iid;
    for (int i = 0; i < CALLBACK_SLOTS; i++) callback_vtbl[i] = (void *)ok;
    callback_vtbl[0] = (void *)qi_self;
    callback_vtbl[1] = (void *)addref;
    callback_vtbl[2] = (void *)addref;
    callback_vtbl[3] = (void *)initialize;
    callback_vtbl[4] = (void *)shutdown;
    callback_vtbl[97] = (void *)not_notification_only;
    *out = &profiler_object;
    return S_OK;
}

static void *factory_vtbl[5] = { (void *)qi_self, (void *)addref, (void *)addref,
                                 (void *)create_instance, (void *)ok };
static ComObject factory_object = { (Vtbl *)factory_vtbl };

__attribute__((visibility("default"))) HRESULT DllGetClassObject(const GUID *clsid, const GUID *iid, void **out) {
    (void)iid;
    if (memcmp(clsid, &CLSID_Baseline, sizeof(GUID)) != 0) return CLASS_E_CLASSNOTAVAILABLE;
    *out = &factory_object;
    return S_OK;
}

__attribute__((visibility("default"))) HRESULT DllCanUnloadNow(void) { return 1; /* S_FALSE */ }
