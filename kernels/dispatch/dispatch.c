/*
 * dispatch.c - the one dispatch table, chosen once.
 *
 * Every public call costs one acquire load of `active` and an indirect call.
 * The first call runs detection under pthread_once, so any number of threads
 * may make their first call at the same moment.
 */
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

/* One row per tier, generated from kernels.inc: a 1 in the tier's column
   picks peak_<type>_<op>__<tier>, a 0 the scalar kernel (reference first,
   then override, as BLIS does), so no slot is ever NULL.  kernels.inc shows
   at a glance which tiers are really vectorised. */
#define PEAK_PICK_0(type, op, tier) peak_##type##_##op##__scalar
#define PEAK_PICK_1(type, op, tier) peak_##type##_##op##__##tier
#define PEAK_PICK_(flag, type, op, tier) PEAK_PICK_##flag(type, op, tier)
/* (One level more, so that flag and tier are expanded before pasting.) */
#define PEAK_PICK(flag, type, op, tier) PEAK_PICK_(flag, type, op, tier)
/* A kernels.inc line's column for a tier. */
#define PEAK_COLUMN_scalar(k_scalar, k_avx2, k_avx512, k_neon) k_scalar
#define PEAK_COLUMN_avx2(k_scalar, k_avx2, k_avx512, k_neon) k_avx2
#define PEAK_COLUMN_avx512(k_scalar, k_avx2, k_avx512, k_neon) k_avx512
#define PEAK_COLUMN_neon(k_scalar, k_avx2, k_avx512, k_neon) k_neon
#define PEAK_COLUMN_(tier, ...) PEAK_COLUMN_##tier(__VA_ARGS__)
#define PEAK_COLUMN(tier, ...) PEAK_COLUMN_(tier, __VA_ARGS__)

#define PEAK_TIER scalar
#define PEAK_TIER_ISA PEAK_ISA_SCALAR
#include "dispatch/tier-table.inc"

#if PEAK_HAVE_AVX2
#define PEAK_TIER avx2
#define PEAK_TIER_ISA PEAK_ISA_AVX2
#include "dispatch/tier-table.inc"
#endif

#if PEAK_HAVE_AVX512
#define PEAK_TIER avx512
#define PEAK_TIER_ISA PEAK_ISA_AVX512
#include "dispatch/tier-table.inc"
#endif

#if PEAK_HAVE_NEON
#define PEAK_TIER neon
#define PEAK_TIER_ISA PEAK_ISA_NEON
#include "dispatch/tier-table.inc"
#endif

#define N_TIERS 4

static const peak_kernels *const compiled[N_TIERS] = {
    [PEAK_ISA_SCALAR] = &peak_kernels_scalar,
#if PEAK_HAVE_AVX2
    [PEAK_ISA_AVX2] = &peak_kernels_avx2,
#endif
#if PEAK_HAVE_AVX512
    [PEAK_ISA_AVX512] = &peak_kernels_avx512,
#endif
#if PEAK_HAVE_NEON
    [PEAK_ISA_NEON] = &peak_kernels_neon,
#endif
};

static const char *const names[N_TIERS] = {"scalar", "avx2", "avx512", "neon"};

static int valid_isa(peak_isa isa)
{
    return (unsigned)isa < N_TIERS;
}

/* Tiers form one chain per architecture: scalar < avx2 < avx512 on x86,
   scalar < neon on AArch64.  rank() places a tier on its chain; arch() says
   which chain (0 = both: scalar). */
static int arch(peak_isa isa)
{
    return isa == PEAK_ISA_SCALAR ? 0 : isa == PEAK_ISA_NEON ? 2 : 1;
}

static int rank(peak_isa isa)
{
    return isa == PEAK_ISA_NEON ? 1 : (int)isa;
}

/* The next tier down the same chain. */
static peak_isa lower(peak_isa isa)
{
    return isa == PEAK_ISA_AVX512 ? PEAK_ISA_AVX2 : PEAK_ISA_SCALAR;
}

static peak_isa best_compiled_at_or_below(peak_isa isa)
{
    while (isa != PEAK_ISA_SCALAR && !compiled[isa])
        isa = lower(isa);
    return isa;
}

const peak_kernels *peak_kernels_for(peak_isa isa)
{
    return valid_isa(isa) ? compiled[isa] : NULL;
}

const char *peak_isa_name(peak_isa isa)
{
    return valid_isa(isa) ? names[isa] : "unknown";
}

int peak_isa_parse(const char *s, peak_isa *isa)
{
    for (int i = 0; s && i < N_TIERS; i++) {
        if (strcasecmp(s, names[i]) == 0) {
            *isa = (peak_isa)i;
            return 1;
        }
    }
    return 0;
}

peak_isa peak_isa_cap(peak_isa detected, const char *env, const char **note)
{
    peak_isa req, isa = detected;
    *note = NULL;
    if (env && *env) {
        if (!peak_isa_parse(env, &req))
            *note = "unknown value, ignored (use scalar, avx2, avx512 or neon)";
        else if (arch(req) != 0 && arch(req) != arch(detected) && detected != PEAK_ISA_SCALAR)
            *note = "not an instruction set of this CPU's architecture, ignored";
        else if (arch(req) != 0 && detected == PEAK_ISA_SCALAR)
            *note = "not supported by this CPU/OS, using scalar";
        else if (rank(req) > rank(detected))
            *note = "not supported by this CPU/OS, using the best supported tier";
        else
            isa = req;
    }
    return best_compiled_at_or_below(isa);
}

/* ---- state: written once under pthread_once, then read-only ------------ */
static pthread_once_t once = PTHREAD_ONCE_INIT;
static peak_isa detected_isa;
static unsigned detected_features;
static const peak_kernels *auto_row;
static _Atomic(const peak_kernels *) active;
static char reason[320];

/* The tier and the peak_cpu_feature flags of this CPU and OS. */
static peak_isa detect(const char **why, unsigned *features)
{
#if defined(__x86_64__) || defined(__i386__)
    peak_x86_regs regs;
    peak_x86_read(&regs);
    *features = peak_x86_features(&regs);
    return peak_x86_decide(&regs, why);
#elif defined(__aarch64__) && defined(__linux__)
    *features = peak_arm_features(getauxval(AT_HWCAP), getauxval(AT_HWCAP2));
    return peak_arm_decide(getauxval(AT_HWCAP), why);
#else
    *features = 0;
    *why = "scalar: no SIMD tier for this architecture";
    return PEAK_ISA_SCALAR;
#endif
}

/* Unset, empty, 0, no, false and off mean off. */
static int env_flag(const char *name)
{
    const char *v = getenv(name);
    static const char *const off[] = {"", "0", "no", "false", "off"};
    if (!v)
        return 0;
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
        if (strcasecmp(v, off[i]) == 0)
            return 0;
    return 1;
}

static void init(void)
{
    const char *why, *note;
    const char *env = getenv("PEAK_ISA");
    peak_isa hardware = detect(&why, &detected_features);
    detected_isa = best_compiled_at_or_below(hardware);
    static char why_built[200]; /* the CPU's tier left out of this build */
    if (detected_isa != hardware) {
        snprintf(why_built, sizeof why_built, "%s; %s not compiled into this build -> %s", why,
                 names[hardware], names[detected_isa]);
        why = why_built;
    }
    peak_isa isa = peak_isa_cap(detected_isa, env, &note);
    if (note) {
        fprintf(stderr, "peak: PEAK_ISA=%s: %s\n", env, note);
        snprintf(reason, sizeof reason, "%s; PEAK_ISA=%s %s -> %s", why, env, note, names[isa]);
    } else if (isa != detected_isa) {
        snprintf(reason, sizeof reason, "%s; capped to %s by PEAK_ISA=%s", why, names[isa], env);
    } else {
        snprintf(reason, sizeof reason, "%s", why);
    }
    auto_row = compiled[isa];
    atomic_store_explicit(&active, auto_row, memory_order_release);
    if (env_flag("PEAK_ISA_DEBUG"))
        fprintf(stderr, "peak: dispatch -> %s (%s)\n", names[isa], reason);
}

const peak_kernels *peak_active_kernels(void)
{
    const peak_kernels *k = atomic_load_explicit(&active, memory_order_acquire);
    if (__builtin_expect(k == NULL, 0)) {
        pthread_once(&once, init);
        k = atomic_load_explicit(&active, memory_order_acquire);
    }
    return k;
}

peak_isa peak_isa_active(void)
{
    return peak_active_kernels()->isa;
}

int peak_isa_supported(peak_isa isa)
{
    if (!valid_isa(isa) || !compiled[isa])
        return 0;
    pthread_once(&once, init);
    if (isa == PEAK_ISA_SCALAR)
        return 1;
    return arch(isa) == arch(detected_isa) && rank(isa) <= rank(detected_isa);
}

peak_status peak_isa_force(peak_isa isa)
{
    if (!valid_isa(isa))
        return PEAK_ERR_INVALID_ARG;
    if (!peak_isa_supported(isa))
        return PEAK_ERR_UNSUPPORTED;
    atomic_store_explicit(&active, compiled[isa], memory_order_release);
    return PEAK_OK;
}

void peak_isa_reset(void)
{
    pthread_once(&once, init);
    atomic_store_explicit(&active, auto_row, memory_order_release);
}

const char *peak_isa_reason(void)
{
    pthread_once(&once, init);
    return reason;
}

unsigned peak_cpu_features(void)
{
    pthread_once(&once, init);
    return detected_features;
}

const char *peak_cpu_feature_name(peak_cpu_feature feature)
{
    switch (feature) {
    case PEAK_CPU_F16C: return "f16c";
    case PEAK_CPU_AVX512_BF16: return "avx512_bf16";
    case PEAK_CPU_AVX512_FP16: return "avx512_fp16";
    case PEAK_CPU_ARM_FP16: return "arm_fp16";
    case PEAK_CPU_ARM_BF16: return "arm_bf16";
    }
    return "unknown";
}

#define PEAK_STR_(x) #x
#define PEAK_STR(x) PEAK_STR_(x)

const char *peak_version(void)
{
    return PEAK_STR(PEAK_VERSION_MAJOR) "." PEAK_STR(PEAK_VERSION_MINOR) "." PEAK_STR(
        PEAK_VERSION_PATCH);
}
