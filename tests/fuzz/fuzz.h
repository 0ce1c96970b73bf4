/*
 * fuzz.h - what the differential fuzz harnesses share (tests/fuzz/).
 *
 * Each harness (one per kernel family) decodes a problem from the fuzzer's
 * bytes: shapes, strides, offsets, mask kinds, layouts, parameters, the
 * seed and mix of the values (NaN, +-inf, huge, subnormal, +-0 among
 * ordinary numbers), and optionally one documented invalid argument.  It
 * then runs the public API once per tier this CPU supports (forced with
 * peak_isa_force, scalar first) from identical buffers and checks:
 *   - every tier returns the status peak.h documents for the arguments;
 *   - a rejected call changed no byte of any buffer;
 *   - an accepted call wrote nothing outside its outputs' documented
 *     elements (gaps hold canaries) and changed no input;
 *   - every tier agrees with the scalar tier (and, where cheap, an oracle
 *     written in the harness) within the family's documented bound.
 * Any violation prints the case and aborts, which libFuzzer records as a
 * crash.  Buffers have exactly the documented size: the bytes before a
 * misaligned start are poisoned for AddressSanitizer (and valgrind), so
 * both ends are guarded.
 *
 * Built with clang -fsanitize=fuzzer (meson -Dfuzz=enabled), or with
 * replay.c's main() everywhere else, which runs the committed corpus once
 * (meson test --suite fuzz), under every CI configuration.
 */
#ifndef PEAK_FUZZ_H
#define PEAK_FUZZ_H

#include "internal.h"
#include "peak.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FZ_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define FZ_ASAN 1
#endif
#ifdef FZ_ASAN
#include <sanitizer/asan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define FZ_VALGRIND 1
#endif
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- failure reporting ---------------------------------------------------- */

/* Set by each harness before the checks: a one-line description of the
   decoded case, printed with any failure. */
static char fz_case[1024];

/* Rows or elements a harness left unchecked because its bound is not
   finite there (see fuzz-attention.c); replay.c prints the count. */
__attribute__((weak)) size_t fz_skipped; /* one, shared with replay.c */
__attribute__((weak)) size_t fz_rows;    /* rows (or elements) checked */

__attribute__((format(printf, 1, 2), noreturn)) static inline void fz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "\nFUZZ FAILURE: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n  case: %s\n", fz_case);
    va_end(ap);
    fflush(stderr);
    abort();
}

__attribute__((format(printf, 1, 2))) static inline void fz_describe(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fz_case, sizeof fz_case, fmt, ap);
    va_end(ap);
}

/* ---- decoding the input ------------------------------------------------------ */

/* Bytes are consumed from the front; an exhausted input reads as zeros, so
   every prefix of an input is itself a valid (smaller, default) case. */
typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in;

static inline uint32_t fz_u8(fz_in *in)
{
    if (!in->n)
        return 0;
    in->n--;
    return *in->p++;
}

static inline uint32_t fz_u16(fz_in *in)
{
    uint32_t lo = fz_u8(in);
    return lo | fz_u8(in) << 8;
}

static inline uint64_t fz_u64(fz_in *in)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++)
        v |= (uint64_t)fz_u8(in) << (8 * k);
    return v;
}

/* Uniform-ish in [0, hi]. */
static inline size_t fz_upto(fz_in *in, size_t hi)
{
    uint32_t v = hi < 255 ? fz_u8(in) : fz_u16(in);
    return (size_t)v % (hi + 1);
}

static inline int fz_bit(fz_in *in)
{
    return (int)(fz_u8(in) & 1);
}

/* A length: half the time 1..max, half the time one of the lengths around
   vector widths and tile edges (capped at max). */
static inline size_t fz_len(fz_in *in, size_t max)
{
    static const size_t edges[] = {1,  2,  3,  4,  5,  7,   8,   9,   15,  16,  17,  23,  24,
                                   25, 31, 32, 33, 47, 48,  63,  64,  65,  95,  96,  127, 128,
                                   129, 191, 255, 256, 257, 511, 512, 513, 767, 1023, 1024, 1025};
    uint32_t pick = fz_u8(in);
    size_t n;
    if (pick & 1)
        n = 1 + fz_upto(in, max - 1);
    else
        n = edges[(pick >> 1) % (sizeof edges / sizeof edges[0])];
    return n > max ? max : n;
}

/* splitmix64, for bulk values (the bytes choose the seed and the mix). */
static inline uint64_t fz_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline double fz_unit(uint64_t *s)
{
    return (double)(fz_next(s) >> 11) * 0x1p-53;
}

static inline float fz_from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static inline uint32_t fz_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* Special values a generator may mix in. */
enum {
    FZ_NAN = 1 << 0,
    FZ_PINF = 1 << 1,
    FZ_NINF = 1 << 2,
    FZ_HUGE = 1 << 3, /* |x| in [1e30, FLT_MAX] */
    FZ_SUB = 1 << 4,  /* subnormal */
    FZ_ZERO = 1 << 5, /* +0 or -0 */
    FZ_TINY = 1 << 6, /* |x| in [FLT_MIN, 1e-30] */
    FZ_BITS = 1 << 7, /* any bit pattern */
    FZ_FINITE = FZ_HUGE | FZ_SUB | FZ_ZERO | FZ_TINY,
    FZ_ALL = 0xff
};

typedef struct fz_gen {
    uint64_t rng;
    float lo, hi;     /* ordinary values: uniform in [lo, hi) */
    uint32_t rate;    /* special values: rate / 256 of them (0: none) */
    unsigned kinds;   /* which specials (FZ_*) */
} fz_gen;

/* A generator whose range and special mix come from the input; `kinds`
   limits the specials (a harness passes FZ_ALL unless its bound needs
   finite values). */
static inline fz_gen fz_gen_read(fz_in *in, unsigned kinds)
{
    static const float mags[] = {1.0f, 8.0f, 100.0f, 1e4f, 0.01f, 1e-20f, 1e20f, 3e38f};
    fz_gen g;
    g.rng = fz_u64(in);
    uint32_t r = fz_u8(in);
    float m = mags[r & 7];
    switch ((r >> 3) & 3) {
    case 0: g.lo = -m, g.hi = m; break;
    case 1: g.lo = 0.0f, g.hi = m; break;
    case 2: g.lo = -m, g.hi = 0.0f; break;
    default: g.lo = m, g.hi = m * 1.0001f; break; /* a large common offset */
    }
    if (!(g.hi > g.lo)) /* 3e38 * 1.0001 overflows: keep the range finite */
        g.hi = nextafterf(g.lo, INFINITY) > g.lo ? nextafterf(g.lo, INFINITY) : g.lo;
    uint32_t s = fz_u8(in);
    g.rate = s < 128 ? 0 : s < 224 ? (s - 127) / 4 : 255 * (s - 223) / 32;
    g.kinds = fz_u8(in) & kinds;
    if (!g.kinds)
        g.rate = 0;
    return g;
}

static inline float fz_special(fz_gen *g)
{
    for (;;) {
        unsigned kind = 1u << (fz_next(&g->rng) % 8);
        if (!(g->kinds & kind))
            continue;
        uint64_t u = fz_next(&g->rng);
        float sign = (u >> 63) ? -1.0f : 1.0f;
        switch (kind) {
        case FZ_NAN: return (u & 2) ? -NAN : NAN;
        case FZ_PINF: return INFINITY;
        case FZ_NINF: return -INFINITY;
        case FZ_HUGE: return sign * (float)(1e30 + fz_unit(&g->rng) * (FLT_MAX - 1e30));
        case FZ_SUB: return sign * fz_from_bits((uint32_t)(1 + u % 0x7fffff));
        case FZ_ZERO: return sign * 0.0f;
        case FZ_TINY: return sign * (float)(FLT_MIN + fz_unit(&g->rng) * 1e-30);
        default: return fz_from_bits((uint32_t)u);
        }
    }
}

static inline float fz_value(fz_gen *g)
{
    if (g->rate && fz_next(&g->rng) % 256 < g->rate)
        return fz_special(g);
    float v = (float)(g->lo + (g->hi - g->lo) * fz_unit(&g->rng));
    return v < g->hi ? v : g->lo;
}

static inline void fz_fill(float *p, size_t n, fz_gen *g)
{
    for (size_t k = 0; k < n; k++)
        p[k] = fz_value(g);
}

/* ---- exact-size buffers ---------------------------------------------------- */

/* The canary: a NaN payload no kernel produces (as tests/test-util.h). */
#define FZ_CANARY 0x7fc0beefu

static inline void fz_canary(float *p, size_t n)
{
    for (size_t k = 0; k < n; k++)
        memcpy(&p[k], &(uint32_t){FZ_CANARY}, sizeof(float));
}

static inline int fz_is_canary(float v)
{
    return fz_bits(v) == FZ_CANARY;
}

/* Exact-size buffers of n floats (n may be 0: one float), filled with the
   canary, in one of two kinds chosen by `sel` (0..31, from the input):
   - sel < 16: from the heap, starting sel floats past a 64-byte boundary
     and ending exactly after element n-1; the head before the start is
     poisoned for AddressSanitizer and valgrind.  ASan does not see the
     AVX masked loads and stores (VMASKMOVPS and the AVX-512 masked forms)
     that every tier uses for tails, so for them this kind is blind:
   - sel >= 16: on their own pages, with an inaccessible guard page right
     after element n-1 (sel < 24) or right before element 0: any access
     one float outside, masked or not, faults.  (Checked: a tail mask one
     lane too long in the AVX2 exp went unnoticed by 255,000 runs with
     heap buffers only.)
   FUZZ_HEAP_ONLY=1 (set by the qemu setup of tests/meson.build) keeps
   every buffer on the heap: qemu-x86_64 7.2 faults on the masked-off lanes
   of VMASKMOVPS when they touch an inaccessible page, which hardware never
   does (Intel SDM: no fault for a lane whose mask bit is 0). */
typedef struct fz_guarded {
    float *p;
    void *map;
    size_t len;
} fz_guarded;
static fz_guarded fz_maps[32];

/* bytes (at least elem) of kind sel for elements of elem bytes: a guarded
   mapping (sel % 32 >= 16, the element run ending at or starting after a
   PROT_NONE page) or a heap buffer behind a poisoned head of sel % 16
   elements. */
static inline void *fz_alloc_bytes(size_t bytes, size_t elem, size_t sel)
{
    char *p;
    static int heap_only = -1;
    if (heap_only < 0) {
        const char *h = getenv("FUZZ_HEAP_ONLY");
        heap_only = h && *h && strcmp(h, "0") != 0;
    }
    if (sel % 32 >= 16 && !heap_only) {
        const size_t page = (size_t)sysconf(_SC_PAGESIZE);
        const size_t data = (bytes + page - 1) / page * page, len = data + page;
        char *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (map == MAP_FAILED)
            abort();
        const int guard_after = sel % 32 < 24;
        if (mprotect(guard_after ? map + data : map, page, PROT_NONE) != 0)
            abort();
        p = guard_after ? map + data - bytes : map + page;
        size_t k = 0;
        while (k < 32 && fz_maps[k].p)
            k++;
        if (k == 32)
            abort();
        fz_maps[k] = (fz_guarded){(float *)(void *)p, map, len};
    } else {
        const size_t head = (sel % 16) * elem;
        void *raw = NULL;
        if (posix_memalign(&raw, 64, head + bytes) != 0)
            abort();
        p = (char *)raw + head;
#ifdef FZ_ASAN
        ASAN_POISON_MEMORY_REGION(raw, head);
#endif
#ifdef FZ_VALGRIND
        VALGRIND_MAKE_MEM_NOACCESS(raw, head);
#endif
    }
    return p;
}

static inline float *fz_alloc(size_t n, size_t sel)
{
    float *p = fz_alloc_bytes((n ? n : 1) * sizeof(float), sizeof(float), sel);
    fz_canary(p, n ? n : 1);
    return p;
}

/* What fz_alloc_bytes returned, or NULL. */
static inline void fz_free_bytes(void *p)
{
    if (!p)
        return;
    for (size_t k = 0; k < 32; k++) {
        if (fz_maps[k].p == p) {
            munmap(fz_maps[k].map, fz_maps[k].len);
            fz_maps[k].p = NULL;
            return;
        }
    }
    void *raw = (void *)((uintptr_t)p & ~(uintptr_t)63);
#ifdef FZ_ASAN
    ASAN_UNPOISON_MEMORY_REGION(raw, (size_t)((char *)p - (char *)raw));
#endif
#ifdef FZ_VALGRIND
    VALGRIND_MAKE_MEM_UNDEFINED(raw, (size_t)((char *)p - (char *)raw));
#endif
    free(raw);
}

static inline void fz_free(float *p)
{
    fz_free_bytes(p);
}

static inline float *fz_dup(const float *p, size_t n)
{
    float *q = malloc((n ? n : 1) * sizeof *q);
    if (!q)
        abort();
    memcpy(q, p, n * sizeof *q);
    return q;
}

/* ---- tiers ------------------------------------------------------------------- */

static peak_isa fz_tier[4];
static int fz_ntiers;

/* The tiers to compare, scalar first.  FUZZ_TIERS=scalar,avx2 (say)
   restricts them (to rerun a crash on one pair). */
static inline void fz_setup(void)
{
    if (fz_ntiers)
        return;
    const char *only = getenv("FUZZ_TIERS");
    for (int t = PEAK_ISA_SCALAR; t <= PEAK_ISA_NEON; t++) {
        if (!peak_isa_supported((peak_isa)t))
            continue;
        if (t != PEAK_ISA_SCALAR && only && !strstr(only, peak_isa_name((peak_isa)t)))
            continue;
        fz_tier[fz_ntiers++] = (peak_isa)t;
    }
}

static inline void fz_force(int t)
{
    if (peak_isa_force(fz_tier[t]) != PEAK_OK)
        fz_fail("cannot force tier %s", peak_isa_name(fz_tier[t]));
}

/* ---- floating-point environment ---------------------------------------------- */

/* Flush-to-zero and denormals-are-zero, as a caller built with -ffast-math
   runs: peak.h's bounds must hold under them too.  Returns the previous
   state for fz_ftz_restore.  (x86 only; elsewhere a no-op.) */
static inline unsigned fz_ftz_set(int on)
{
#if defined(__x86_64__) || defined(__i386__)
    unsigned old = _mm_getcsr();
    if (on)
        _mm_setcsr(old | 0x8040u); /* FTZ (bit 15) | DAZ (bit 6) */
    return old;
#else
    (void)on;
    return 0;
#endif
}

/* v as an FPU with DAZ reads it (ftz set): subnormals are 0.  Oracles
   apply it to their inputs so that they compute what peak.h promises for
   the inputs the caller's FPU mode makes of them. */
static inline float fz_daz(float v, int ftz)
{
    return ftz && v != 0.0f && fabsf(v) < FLT_MIN ? copysignf(0.0f, v) : v;
}

static inline void fz_ftz_restore(unsigned old)
{
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(old);
#else
    (void)old;
#endif
}

/* Whether FTZ/DAZ take effect here: valgrind ignores those MXCSR bits
   (it computes subnormals whatever the mode), so under it the FTZ cases
   run without FTZ. */
static inline int fz_ftz_works(void)
{
    static int known = -1;
    if (known < 0) {
        unsigned old = fz_ftz_set(1);
        volatile float tiny = 1e-40f, one = 1.0f;
        const float prod = tiny * one;
        fz_ftz_restore(old);
        known = prod == 0.0f;
    }
    return known;
}

/* An input bit asking for FTZ/DAZ, honoured where they work. */
static inline int fz_ftz_bit(fz_in *in)
{
    return fz_bit(in) && fz_ftz_works();
}

/* ---- comparisons ----------------------------------------------------------------- */

/* Distance in ULP between two finite floats (0 for +0/-0). */
static inline int64_t fz_ulp(float a, float b)
{
    int32_t ia = (int32_t)fz_bits(a), ib = (int32_t)fz_bits(b);
    int64_t oa = ia < 0 ? (int64_t)INT32_MIN - ia : ia;
    int64_t ob = ib < 0 ? (int64_t)INT32_MIN - ib : ib;
    return oa > ob ? oa - ob : ob - oa;
}

/* Same bits, or both NaN (payloads may differ: the hardware picks). */
static inline int fz_same(float a, float b)
{
    return fz_bits(a) == fz_bits(b) || (isnan(a) && isnan(b));
}

static const char *const fz_status_names[] = {"OK", "INVALID_ARG", "OUT_OF_RANGE",
                                              "UNSUPPORTED", "WORKSPACE", "NO_MEMORY"};

static const char *fz_status(peak_status s)
{
    return (unsigned)s < 6 ? fz_status_names[s] : "?";
}

static inline void fz_expect_status(int t, peak_status got, peak_status want)
{
    if (got != want)
        fz_fail("tier %s returned %s, expected %s", peak_isa_name(fz_tier[t]), fz_status(got),
                fz_status(want));
}

/* n floats at p equal the snapshot `was`, byte for byte. */
static inline void fz_expect_unchanged(int t, const char *what, const float *p, const float *was,
                                size_t n)
{
    if (memcmp(p, was, n * sizeof *p) != 0) {
        size_t k = 0;
        while (fz_bits(p[k]) == fz_bits(was[k]))
            k++;
        fz_fail("tier %s changed %s[%zu]: %a (0x%08x) was %a (0x%08x)",
                peak_isa_name(fz_tier[t]), what, k, (double)p[k], fz_bits(p[k]),
                (double)was[k], fz_bits(was[k]));
    }
}

#endif /* PEAK_FUZZ_H */
