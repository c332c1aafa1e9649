/*
 * The yardstick of `cargo xtask bench dispatch`: a CLR profiler written by
 * hand in C, with no SDK, whose callbacks do as little as a profiler can.
 *
 * - COM: one static callback object answering ICorProfilerCallback through
 *   ICorProfilerCallback11 (the level clrprof's callback object answers,
 *   so the runtime makes the same calls to both: e.g. MovedReferences2 and
 *   SurvivingReferences2, which it calls only for Callback4 and later), a
 *   static class factory, DllGetClassObject / DllCanUnloadNow.
 * - Initialize: QueryInterface for ICorProfilerInfo3, SetEventMask,
 *   GetEventMask to report what the runtime took. The mask: the events of
 *   CLRPROF_DISPATCH_EVENTS (`object_allocated`, `exception_thrown`,
 *   `moved_references`, `jit_compilation_started`: the one callback kind a
 *   workload measures; unset: all four), plus what the clrprof SDK adds to
 *   every profiler's own mask (exceptions and stack snapshots, for its
 *   unhandled-exception watch), so the runtime does the same work for both
 *   profilers; the clrprof profiler reads the same variable.
 * - Mode `empty` (CLRPROF_DISPATCH_MODE unset or `empty`): ObjectAllocated,
 *   ExceptionThrown, MovedReferences2, SurvivingReferences2 and
 *   JITCompilationStarted each add one to their own counter (relaxed
 *   atomic add, as the clrprof profiler of benches/dispatch/profiler does),
 *   so the benchmark can check that the callbacks arrived.
 * - Mode `count`: the work of examples/alloc-tracer per allocation, done
 *   the C way: GetObjectSize, then an open-addressing hash table keyed by
 *   ClassID (linear probing, atomic counters, a slot claimed by
 *   compare-and-swap) adds one to the class's count and the size to its
 *   bytes. Mask: alloc-tracer's (ObjectAllocated and GC) plus what the
 *   clrprof SDK itself adds to every profiler's mask (exceptions and stack
 *   snapshots, for its unhandled-exception watch), so the runtime does the
 *   same work for both.
 *
 * At Shutdown (or process exit, whichever comes first) one JSON line goes
 * to CLRPROF_OUTPUT (or stderr):
 *   {"event":"dispatch_counts","mode":"empty|count","mask":M,"mask_read":R,
 *    "allocations":A,"exceptions":E,"moved":MV,"moved_ranges":MR,
 *    "surviving":S,"jit":J,"classes":C,"top_class_count":T}
 * (classes / top_class_count: in mode count, the classes counted and the
 * largest count of one class).
 *
 * Vtable slots and IIDs are those of corprof.idl.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef _WIN32
#define EXPORT __declspec(dllexport)
#else
#define EXPORT __attribute__((visibility("default")))
#endif

typedef int32_t HRESULT;
typedef struct { uint32_t d1; uint16_t d2, d3; uint8_t d4[8]; } GUID;
typedef int32_t BOOL;
typedef uintptr_t ID;

#define S_OK 0
#define E_NOINTERFACE ((HRESULT)0x80004002)
#define CLASS_E_CLASSNOTAVAILABLE ((HRESULT)0x80040111)

/* COR_PRF_MONITOR flags. */
#define MONITOR_GC 0x80u
#define MONITOR_JIT_COMPILATION 0x20u
#define MONITOR_EXCEPTIONS 0x40u
#define MONITOR_OBJECT_ALLOCATED 0x100u
#define ENABLE_STACK_SNAPSHOT 0x10000000u
#define ENABLE_OBJECT_ALLOCATED 0x800000u

/* The clrprof SDK adds these to every profiler's own mask. */
#define SDK_MASK (MONITOR_EXCEPTIONS | ENABLE_STACK_SNAPSHOT)
#define ALLOCATIONS_MASK (MONITOR_OBJECT_ALLOCATED | ENABLE_OBJECT_ALLOCATED)

/* The mask of mode `empty`. */
static uint32_t dispatch_mask(void) {
    const char *events = getenv("CLRPROF_DISPATCH_EVENTS");
    const char *watch = getenv("CLRPROF_DISPATCH_WATCH");
    /* "0": the clrprof profiler turns its unhandled-exception watch off. */
    uint32_t mask = watch != NULL && strcmp(watch, "0") == 0 ? 0 : SDK_MASK;
    int all = events == NULL || *events == 0;
    if (all || strcmp(events, "object_allocated") == 0) mask |= ALLOCATIONS_MASK;
    if (all || strcmp(events, "exception_thrown") == 0) mask |= MONITOR_EXCEPTIONS;
    if (all || strcmp(events, "moved_references") == 0) mask |= MONITOR_GC;
    if (all || strcmp(events, "jit_compilation_started") == 0) mask |= MONITOR_JIT_COMPILATION;
    return mask;
}
#define COUNT_MASK (ALLOCATIONS_MASK | MONITOR_GC | SDK_MASK)

static const GUID CLSID_Dispatch = {0x3D15A7C0, 0x5B1E, 0x4C8A, {0x9F, 0x20, 0x6E, 0x4B, 0xD1, 0x07, 0xA3, 0x58}};
static const GUID IID_IUnknown = {0x00000000, 0x0000, 0x0000, {0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46}};
static const GUID IID_IClassFactory = {0x00000001, 0x0000, 0x0000, {0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46}};
/* ICorProfilerCallback .. ICorProfilerCallback11 */
static const GUID IID_Callback[11] = {
    {0x176FBED1, 0xA55C, 0x4796, {0x98, 0xCA, 0xA9, 0xDA, 0x0E, 0xF8, 0x83, 0xE7}},
    {0x8A8CC829, 0xCCF2, 0x49FE, {0xBB, 0xAE, 0x0F, 0x02, 0x22, 0x28, 0x07, 0x1A}},
    {0x4FD2ED52, 0x7731, 0x4B8D, {0x94, 0x69, 0x03, 0xD2, 0xCC, 0x30, 0x86, 0xC5}},
    {0x7B63B2E3, 0x107D, 0x4D48, {0xB2, 0xF6, 0xF6, 0x1E, 0x22, 0x94, 0x70, 0xD2}},
    {0x8DFBA405, 0x8C9F, 0x45F8, {0xBF, 0xFA, 0x83, 0xB1, 0x4C, 0xEF, 0x78, 0xB5}},
    {0xFC13DF4B, 0x4448, 0x4F4F, {0x95, 0x0C, 0xBA, 0x8D, 0x19, 0xD0, 0x0C, 0x36}},
    {0xF76A2DBA, 0x1D52, 0x4539, {0x86, 0x6C, 0x2A, 0xA5, 0x18, 0xF9, 0xEF, 0xC3}},
    {0x5BED9B15, 0xC079, 0x4D47, {0xBF, 0xE2, 0x21, 0x5A, 0x14, 0x0C, 0x07, 0xE0}},
    {0x27583EC3, 0xC8F5, 0x482F, {0x80, 0x52, 0x19, 0x4B, 0x8C, 0xE4, 0x70, 0x5A}},
    {0xCEC5B60E, 0xC69C, 0x495F, {0x87, 0xF6, 0x84, 0xD2, 0x8E, 0xE1, 0x6F, 0xFB}},
    {0x42350846, 0xAAED, 0x47F7, {0xB1, 0x28, 0xFD, 0x0C, 0x98, 0x88, 0x1C, 0xDE}},
};
static const GUID IID_Info3 = {0xB555ED4F, 0x452A, 0x4E54, {0x8B, 0x39, 0xB5, 0x36, 0x0B, 0xAD, 0x32, 0xA0}};

/* Callback slots: IUnknown 0-2, then the methods in corprof.idl order. */
enum {
    CB_INITIALIZE = 3, CB_SHUTDOWN = 4, CB_JIT_STARTED = 23, CB_OBJECT_ALLOCATED = 50,
    CB_EXCEPTION_THROWN = 54, CB_MOVED_REFERENCES2 = 87, CB_SURVIVING_REFERENCES2 = 88,
    CB_LOAD_AS_NOTIFICATION_ONLY = 97, CALLBACK_SLOTS = 98
};
/* ICorProfilerInfo slots. */
enum { INFO_QI = 0, INFO_GET_EVENT_MASK = 6, INFO_GET_OBJECT_SIZE = 10, INFO_SET_EVENT_MASK = 16 };

typedef void **Vtbl;
typedef struct { Vtbl *vtbl; } ComObject;

static int count_mode;
static uint32_t mask_set, mask_read;
static void *info3;
static uint64_t allocations, exceptions, moved, moved_ranges, surviving, jit;
static int written;

/* Mode count: ClassID -> count, bytes. A power of two; the tables of a
 * small app hold a few hundred classes. A full table drops the event
 * (counted in `dropped`) rather than block. */
#define TABLE_SLOTS 65536u
struct slot { uintptr_t class_id; uint64_t count, bytes; };
static struct slot table[TABLE_SLOTS];
static uint64_t dropped;

static void count_allocation(uintptr_t class_id, uint64_t size) {
    uint32_t h = (uint32_t)((class_id >> 3) * 0x9E3779B97F4A7C15ull >> 40) & (TABLE_SLOTS - 1);
    for (uint32_t n = 0; n < TABLE_SLOTS; n++, h = (h + 1) & (TABLE_SLOTS - 1)) {
        struct slot *s = &table[h];
        uintptr_t seen = __atomic_load_n(&s->class_id, __ATOMIC_ACQUIRE);
        if (seen == 0) {
            uintptr_t expected = 0;
            if (__atomic_compare_exchange_n(&s->class_id, &expected, class_id, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                seen = class_id;
            else
                seen = expected;
        }
        if (seen == class_id) {
            __atomic_fetch_add(&s->count, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&s->bytes, size, __ATOMIC_RELAXED);
            return;
        }
    }
    __atomic_fetch_add(&dropped, 1, __ATOMIC_RELAXED);
}

static int same(const GUID *a, const GUID *b) { return memcmp(a, b, sizeof(GUID)) == 0; }

static void write_counts(void) {
    if (__atomic_exchange_n(&written, 1, __ATOMIC_SEQ_CST)) return;
    uint64_t classes = 0, top = 0;
    for (uint32_t i = 0; i < TABLE_SLOTS; i++) {
        if (table[i].class_id == 0) continue;
        classes++;
        if (table[i].count > top) top = table[i].count;
    }
    const char *path = getenv("CLRPROF_OUTPUT");
    FILE *f = path ? fopen(path, "a") : NULL;
    fprintf(f ? f : stderr,
            "{\"event\":\"dispatch_counts\",\"mode\":\"%s\",\"mask\":%u,\"mask_read\":%u,"
            "\"allocations\":%llu,\"exceptions\":%llu,\"moved\":%llu,\"moved_ranges\":%llu,"
            "\"surviving\":%llu,\"jit\":%llu,\"classes\":%llu,\"top_class_count\":%llu,\"dropped\":%llu}\n",
            count_mode ? "count" : "empty", mask_set, mask_read,
            (unsigned long long)allocations, (unsigned long long)exceptions, (unsigned long long)moved,
            (unsigned long long)moved_ranges, (unsigned long long)surviving, (unsigned long long)jit,
            (unsigned long long)classes, (unsigned long long)top, (unsigned long long)dropped);
    if (f) fclose(f);
}

static void at_exit(void) { write_counts(); }

static HRESULT cb_qi(void *self, const GUID *iid, void **out) {
    *out = NULL;
    int ok = same(iid, &IID_IUnknown);
    for (int i = 0; i < 11 && !ok; i++) ok = same(iid, &IID_Callback[i]);
    if (!ok) return E_NOINTERFACE;
    *out = self;
    return S_OK;
}
/* One static object that is never freed: reference counts do not matter. */
static uint32_t cb_addref(void *self) { (void)self; return 2; }
static uint32_t cb_release(void *self) { (void)self; return 1; }
static HRESULT cb_ok(void) { return S_OK; }

static HRESULT cb_initialize(void *self, void *unknown) {
    (void)self;
    const char *mode = getenv("CLRPROF_DISPATCH_MODE");
    count_mode = mode && strcmp(mode, "count") == 0;
    Vtbl uvt = *(Vtbl *)unknown;
    HRESULT hr = ((HRESULT (*)(void *, const GUID *, void **))uvt[INFO_QI])(unknown, &IID_Info3, &info3);
    if (hr < 0) return hr;
    Vtbl ivt = *(Vtbl *)info3;
    mask_set = count_mode ? COUNT_MASK : dispatch_mask();
    hr = ((HRESULT (*)(void *, uint32_t))ivt[INFO_SET_EVENT_MASK])(info3, mask_set);
    if (hr < 0) return hr;
    ((HRESULT (*)(void *, uint32_t *))ivt[INFO_GET_EVENT_MASK])(info3, &mask_read);
    atexit(at_exit);
    return S_OK;
}
static HRESULT cb_shutdown(void *self) { (void)self; write_counts(); return S_OK; }

static HRESULT cb_object_allocated(void *self, ID object, ID cls) {
    (void)self;
    __atomic_fetch_add(&allocations, 1, __ATOMIC_RELAXED);
    if (count_mode) {
        uint32_t size = 0;
        Vtbl ivt = *(Vtbl *)info3;
        ((HRESULT (*)(void *, ID, uint32_t *))ivt[INFO_GET_OBJECT_SIZE])(info3, object, &size);
        count_allocation(cls, size);
    }
    return S_OK;
}
static HRESULT cb_exception_thrown(void *self, ID object) {
    (void)self; (void)object;
    __atomic_fetch_add(&exceptions, 1, __ATOMIC_RELAXED);
    return S_OK;
}
static HRESULT cb_jit_started(void *self, ID function, BOOL safe) {
    (void)self; (void)function; (void)safe;
    __atomic_fetch_add(&jit, 1, __ATOMIC_RELAXED);
    return S_OK;
}
static HRESULT cb_moved_references2(void *self, uint32_t n, const ID *old_start, const ID *new_start,
                                    const size_t *len) {
    (void)self; (void)old_start; (void)new_start; (void)len;
    __atomic_fetch_add(&moved, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&moved_ranges, n, __ATOMIC_RELAXED);
    return S_OK;
}
static HRESULT cb_surviving_references2(void *self, uint32_t n, const ID *start, const size_t *len) {
    (void)self; (void)n; (void)start; (void)len;
    __atomic_fetch_add(&surviving, 1, __ATOMIC_RELAXED);
    return S_OK;
}
/* ICorProfilerCallback11::LoadAsNotificationOnly: a normal profiler. */
static HRESULT cb_load_as_notification_only(void *self, BOOL *only) {
    (void)self;
    if (only) *only = 0;
    return S_OK;
}

static void *callback_vtbl[CALLBACK_SLOTS];
static ComObject callback_object = {(Vtbl *)callback_vtbl};

static HRESULT factory_qi(void *self, const GUID *iid, void **out) {
    *out = NULL;
    if (same(iid, &IID_IUnknown) || same(iid, &IID_IClassFactory)) { *out = self; return S_OK; }
    return E_NOINTERFACE;
}
static HRESULT factory_create(void *self, void *outer, const GUID *iid, void **out) {
    (void)self; (void)outer;
    for (int i = 0; i < CALLBACK_SLOTS; i++) callback_vtbl[i] = (void *)cb_ok;
    callback_vtbl[0] = (void *)cb_qi;
    callback_vtbl[1] = (void *)cb_addref;
    callback_vtbl[2] = (void *)cb_release;
    callback_vtbl[CB_INITIALIZE] = (void *)cb_initialize;
    callback_vtbl[CB_SHUTDOWN] = (void *)cb_shutdown;
    callback_vtbl[CB_JIT_STARTED] = (void *)cb_jit_started;
    callback_vtbl[CB_OBJECT_ALLOCATED] = (void *)cb_object_allocated;
    callback_vtbl[CB_EXCEPTION_THROWN] = (void *)cb_exception_thrown;
    callback_vtbl[CB_MOVED_REFERENCES2] = (void *)cb_moved_references2;
    callback_vtbl[CB_SURVIVING_REFERENCES2] = (void *)cb_surviving_references2;
    callback_vtbl[CB_LOAD_AS_NOTIFICATION_ONLY] = (void *)cb_load_as_notification_only;
    return cb_qi(&callback_object, iid, out);
}
static HRESULT factory_lock(void *self, BOOL lock) { (void)self; (void)lock; return S_OK; }
static void *factory_vtbl[5] = {(void *)factory_qi, (void *)cb_addref, (void *)cb_release,
                                (void *)factory_create, (void *)factory_lock};
static ComObject factory_object = {(Vtbl *)factory_vtbl};

EXPORT HRESULT DllGetClassObject(const GUID *clsid, const GUID *iid, void **out) {
    *out = NULL;
    if (!same(clsid, &CLSID_Dispatch)) return CLASS_E_CLASSNOTAVAILABLE;
    return factory_qi(&factory_object, iid, out);
}

EXPORT HRESULT DllCanUnloadNow(void) { return 1; /* S_FALSE */ }
