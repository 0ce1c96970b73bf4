/*
 * test-dispatch.c - the tier decision from mocked CPUID/XCR0 registers, the
 * PEAK_ISA cap, forcing, and concurrent first calls.
 *
 * Run without arguments: the unit suite.  Run with "env" (meson sets
 * PEAK_ISA for it): checks the automatic choice under that variable.  This
 * program never forces a tier in the parent, so every forked test starts
 * with dispatch uninitialised, as a fresh process would.
 */
#include "test-util.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Register values of real and hostile configurations. */
#define L1_XSAVE (1u << 26)
#define L1_OSXSAVE (1u << 27)
#define L1_AVX (1u << 28)
#define L1_FMA (1u << 12)
#define L1_HASWELL (L1_XSAVE | L1_OSXSAVE | L1_AVX | L1_FMA)
#define L7_AVX2 (1u << 5)
#define L7_512 ((1u << 16) | (1u << 17) | (1u << 30) | (1u << 31))
#define XCR0_YMM 0x7u
#define XCR0_ZMM 0xe7u

static peak_isa decide(uint32_t max_leaf, uint32_t ecx1, uint32_t ebx7, uint64_t xcr0)
{
    peak_x86_regs r = {max_leaf, ecx1, ebx7, xcr0, 0, 0};
    const char *why = NULL;
    peak_isa isa = peak_x86_decide(&r, &why);
    ck_assert_ptr_nonnull(why);
    return isa;
}

START_TEST(decide_real_cpus)
{
    ck_assert_int_eq(decide(0x20, L1_HASWELL, L7_AVX2 | L7_512, XCR0_ZMM), PEAK_ISA_AVX512);
    ck_assert_int_eq(decide(0x0d, L1_HASWELL, L7_AVX2, XCR0_YMM), PEAK_ISA_AVX2);
    /* Sandy Bridge: AVX but no FMA/AVX2. */
    ck_assert_int_eq(decide(0x0d, L1_XSAVE | L1_OSXSAVE | L1_AVX, 0, XCR0_YMM), PEAK_ISA_SCALAR);
    ck_assert_int_eq(decide(0x0b, 0, 0, 0), PEAK_ISA_SCALAR);
}
END_TEST

START_TEST(decide_hostile_os_and_hypervisors)
{
    /* OSXSAVE clear: XCR0 must be ignored even if it looks perfect. */
    ck_assert_int_eq(decide(0x20, L1_HASWELL & ~L1_OSXSAVE, L7_AVX2 | L7_512, XCR0_ZMM),
                     PEAK_ISA_SCALAR);
    /* Hypervisor hides AVX state: CPUID says AVX2, XCR0 has only x87/SSE. */
    ck_assert_int_eq(decide(0x20, L1_HASWELL, L7_AVX2 | L7_512, 0x3), PEAK_ISA_SCALAR);
    /* YMM saved but not the upper halves' companion bit 1 (SSE). */
    ck_assert_int_eq(decide(0x20, L1_HASWELL, L7_AVX2, 0x5), PEAK_ISA_SCALAR);
    /* AVX-512 in CPUID, but the OS does not save opmask/ZMM state. */
    ck_assert_int_eq(decide(0x20, L1_HASWELL, L7_AVX2 | L7_512, XCR0_YMM), PEAK_ISA_AVX2);
    /* ... or saves ZMM_Hi256 but not Hi16_ZMM. */
    ck_assert_int_eq(decide(0x20, L1_HASWELL, L7_AVX2 | L7_512, 0x67), PEAK_ISA_AVX2);
}
END_TEST

START_TEST(decide_partial_features)
{
    /* AVX2 without FMA (some emulators): the AVX2 tier needs both. */
    ck_assert_int_eq(decide(0x20, L1_HASWELL & ~L1_FMA, L7_AVX2, XCR0_YMM), PEAK_ISA_SCALAR);
    /* Knights Landing-like: AVX-512F without BW/DQ/VL. */
    ck_assert_int_eq(decide(0x20, L1_HASWELL, L7_AVX2 | (1u << 16), XCR0_ZMM), PEAK_ISA_AVX2);
    /* AVX-512 bits but no AVX2 bit: no tier above scalar. */
    ck_assert_int_eq(decide(0x20, L1_HASWELL, L7_512, XCR0_ZMM), PEAK_ISA_SCALAR);
    /* Leaf 7 not implemented: its (stale) register must not count. */
    ck_assert_int_eq(decide(0x06, L1_HASWELL, L7_AVX2 | L7_512, XCR0_ZMM), PEAK_ISA_SCALAR);
}
END_TEST

START_TEST(decide_arm_hwcaps)
{
    const char *why;
    ck_assert_int_eq(peak_arm_decide(1ul << 1, &why), PEAK_ISA_NEON);
    ck_assert_int_eq(peak_arm_decide(1ul << 0, &why), PEAK_ISA_SCALAR);
}
END_TEST

/* The feature flags of mocked registers. */
#define L1_F16C (1u << 29)
#define L7D_FP16 (1u << 23)
#define L71A_BF16 (1u << 5)

static unsigned features(uint32_t max_leaf, uint32_t ecx1, uint32_t ebx7, uint64_t xcr0,
                         uint32_t edx7, uint32_t eax71)
{
    peak_x86_regs r = {max_leaf, ecx1, ebx7, xcr0, edx7, eax71};
    return peak_x86_features(&r);
}

START_TEST(features_from_registers)
{
    const unsigned all = PEAK_CPU_F16C | PEAK_CPU_AVX512_BF16 | PEAK_CPU_AVX512_FP16;
    /* Sapphire Rapids: all three; Zen 3: F16C alone; Cooper Lake: no FP16. */
    ck_assert_uint_eq(features(0x20, L1_HASWELL | L1_F16C, L7_AVX2 | L7_512, XCR0_ZMM, L7D_FP16,
                               L71A_BF16),
                      all);
    ck_assert_uint_eq(features(0x10, L1_HASWELL | L1_F16C, L7_AVX2, XCR0_YMM, 0, 0), PEAK_CPU_F16C);
    ck_assert_uint_eq(features(0x20, L1_HASWELL | L1_F16C, L7_AVX2 | L7_512, XCR0_ZMM, 0, L71A_BF16),
                      PEAK_CPU_F16C | PEAK_CPU_AVX512_BF16);
    /* AVX-512 bits in CPUID, but the OS saves no ZMM state: F16C alone. */
    ck_assert_uint_eq(features(0x20, L1_HASWELL | L1_F16C, L7_AVX2 | L7_512, XCR0_YMM, L7D_FP16,
                               L71A_BF16),
                      PEAK_CPU_F16C);
    /* The BF16 and FP16 bits without AVX-512 F: nothing of theirs. */
    ck_assert_uint_eq(features(0x20, L1_HASWELL | L1_F16C, L7_AVX2, XCR0_ZMM, L7D_FP16, L71A_BF16),
                      PEAK_CPU_F16C);
    /* No YMM state (a hypervisor hiding AVX), or OSXSAVE clear: nothing. */
    ck_assert_uint_eq(features(0x20, L1_HASWELL | L1_F16C, L7_AVX2 | L7_512, 0x3, L7D_FP16,
                               L71A_BF16),
                      0);
    ck_assert_uint_eq(features(0x20, (L1_HASWELL | L1_F16C) & ~L1_OSXSAVE, L7_AVX2 | L7_512,
                               XCR0_ZMM, L7D_FP16, L71A_BF16),
                      0);
    /* Leaf 7 not implemented: its (stale) registers must not count. */
    ck_assert_uint_eq(features(0x06, L1_HASWELL | L1_F16C, L7_AVX2 | L7_512, XCR0_ZMM, L7D_FP16,
                               L71A_BF16),
                      PEAK_CPU_F16C);
}
END_TEST

START_TEST(features_from_hwcaps)
{
    const unsigned long asimd = 1ul << 1, fphp = 1ul << 9, asimdhp = 1ul << 10, bf16 = 1ul << 14;
    ck_assert_uint_eq(peak_arm_features(asimd, 0), 0);
    ck_assert_uint_eq(peak_arm_features(asimd | fphp | asimdhp, 0), PEAK_CPU_ARM_FP16);
    ck_assert_uint_eq(peak_arm_features(asimd | fphp, 0), 0); /* scalar FP16 only */
    ck_assert_uint_eq(peak_arm_features(asimd, bf16), PEAK_CPU_ARM_BF16);
    ck_assert_uint_eq(peak_arm_features(asimd | fphp | asimdhp, bf16),
                      PEAK_CPU_ARM_FP16 | PEAK_CPU_ARM_BF16);
    ck_assert_uint_eq(peak_arm_features(fphp | asimdhp, bf16), 0); /* no AdvSIMD */
}
END_TEST

START_TEST(feature_names_and_the_real_cpu)
{
    const char *seen[5];
    int n = 0;
    for (unsigned f = PEAK_CPU_F16C; f <= PEAK_CPU_ARM_BF16; f <<= 1, n++) {
        seen[n] = peak_cpu_feature_name((peak_cpu_feature)f);
        ck_assert_str_ne(seen[n], "unknown");
        for (int t = 0; t < n; t++)
            ck_assert_str_ne(seen[n], seen[t]);
    }
    ck_assert_int_eq(n, 5);
    ck_assert_str_eq(peak_cpu_feature_name((peak_cpu_feature)0), "unknown");
    ck_assert_str_eq(peak_cpu_feature_name((peak_cpu_feature)(PEAK_CPU_F16C | PEAK_CPU_ARM_BF16)),
                     "unknown");
#if defined(__x86_64__)
    /* What dispatch reports is what the real registers say, and what the
       compiler's own runtime (libgcc, which checks XCR0 too) says. */
    peak_x86_regs r;
    peak_x86_read(&r);
    ck_assert_uint_eq(peak_cpu_features(), peak_x86_features(&r));
#if !defined(__clang__) /* clang 14 knows neither feature's name here */
    __builtin_cpu_init();
    ck_assert_int_eq((peak_cpu_features() & PEAK_CPU_F16C) != 0,
                     __builtin_cpu_supports("f16c") != 0);
    ck_assert_int_eq((peak_cpu_features() & PEAK_CPU_AVX512_BF16) != 0,
                     __builtin_cpu_supports("avx512bf16") != 0);
#endif
#else
    ck_assert_uint_eq(peak_cpu_features() & (PEAK_CPU_F16C | PEAK_CPU_AVX512_BF16 |
                                             PEAK_CPU_AVX512_FP16),
                      0);
#endif
}
END_TEST

static peak_isa cap(peak_isa detected, const char *env, int expect_note)
{
    const char *note = NULL;
    peak_isa isa = peak_isa_cap(detected, env, &note);
    ck_assert_msg((note != NULL) == (expect_note != 0), "PEAK_ISA=%s note=%s", env ? env : "NULL",
                  note ? note : "none");
    return isa;
}

START_TEST(env_cap_is_a_ceiling)
{
    ck_assert_int_eq(cap(PEAK_ISA_SCALAR, NULL, 0), PEAK_ISA_SCALAR);
    ck_assert_int_eq(cap(PEAK_ISA_SCALAR, "", 0), PEAK_ISA_SCALAR);
    ck_assert_int_eq(cap(PEAK_ISA_SCALAR, "sCaLaR", 0), PEAK_ISA_SCALAR);
    ck_assert_int_eq(cap(PEAK_ISA_SCALAR, "bogus", 1), PEAK_ISA_SCALAR);
#if PEAK_HAVE_AVX512
    ck_assert_int_eq(cap(PEAK_ISA_AVX512, NULL, 0), PEAK_ISA_AVX512);
    ck_assert_int_eq(cap(PEAK_ISA_AVX512, "AVX2", 0), PEAK_ISA_AVX2);
    ck_assert_int_eq(cap(PEAK_ISA_AVX512, "scalar", 0), PEAK_ISA_SCALAR);
    ck_assert_int_eq(cap(PEAK_ISA_AVX2, "avx512", 1), PEAK_ISA_AVX2);
    ck_assert_int_eq(cap(PEAK_ISA_AVX512, "neon", 1), PEAK_ISA_AVX512);
    ck_assert_int_eq(cap(PEAK_ISA_AVX512, "avx5122", 1), PEAK_ISA_AVX512);
    ck_assert_int_eq(cap(PEAK_ISA_SCALAR, "avx2", 1), PEAK_ISA_SCALAR);
#endif
#if PEAK_HAVE_NEON
    ck_assert_int_eq(cap(PEAK_ISA_NEON, "avx2", 1), PEAK_ISA_NEON);
    ck_assert_int_eq(cap(PEAK_ISA_NEON, "scalar", 0), PEAK_ISA_SCALAR);
#endif
}
END_TEST

START_TEST(names_and_status_strings)
{
    ck_assert_str_eq(peak_isa_name(PEAK_ISA_SCALAR), "scalar");
    ck_assert_str_eq(peak_isa_name(PEAK_ISA_AVX2), "avx2");
    ck_assert_str_eq(peak_isa_name(PEAK_ISA_AVX512), "avx512");
    ck_assert_str_eq(peak_isa_name(PEAK_ISA_NEON), "neon");
    ck_assert_str_eq(peak_isa_name((peak_isa)17), "unknown");
    const char *seen[6];
    for (int s = PEAK_OK; s <= PEAK_ERR_NO_MEMORY; s++) {
        seen[s] = peak_status_string((peak_status)s);
        ck_assert_str_ne(seen[s], "unknown status");
        for (int t = 0; t < s; t++)
            ck_assert_str_ne(seen[s], seen[t]);
    }
    ck_assert_str_eq(peak_status_string((peak_status)99), "unknown status");
    ck_assert_str_eq(peak_version(), "0.5.0");
}
END_TEST

/* The tier the real registers allow, decided independently of dispatch.c's
   state (the same pure function, fed the real registers). */
static peak_isa hardware_best(void)
{
#if defined(__x86_64__)
    peak_x86_regs r;
    const char *why;
    peak_x86_read(&r);
    peak_isa isa = peak_x86_decide(&r, &why);
#if !PEAK_HAVE_AVX512
    if (isa == PEAK_ISA_AVX512)
        isa = PEAK_ISA_AVX2;
#endif
    return isa;
#elif PEAK_HAVE_NEON
    return PEAK_ISA_NEON;
#else
    return PEAK_ISA_SCALAR;
#endif
}

START_TEST(force_and_reset)
{
    peak_isa best = hardware_best();
    ck_assert_int_eq(peak_isa_force((peak_isa)-1), PEAK_ERR_INVALID_ARG);
    ck_assert_int_eq(peak_isa_force((peak_isa)4), PEAK_ERR_INVALID_ARG);
    for (int i = PEAK_ISA_SCALAR; i <= PEAK_ISA_NEON; i++) {
        peak_isa isa = (peak_isa)i;
        peak_isa before = peak_isa_active();
        peak_status s = peak_isa_force(isa);
        if (peak_isa_supported(isa)) {
            ck_assert_int_eq(s, PEAK_OK);
            ck_assert_int_eq(peak_isa_active(), isa);
            /* The public API really goes through this tier's table row. */
            ck_assert_ptr_eq(peak_active_kernels(), peak_kernels_for(isa));
        } else {
            ck_assert_int_eq(s, PEAK_ERR_UNSUPPORTED);
            ck_assert_int_eq(peak_isa_active(), before);
        }
    }
    ck_assert(peak_isa_supported(PEAK_ISA_SCALAR));
    ck_assert(peak_isa_supported(best));
    peak_isa_reset();
    if (!getenv("PEAK_ISA"))
        ck_assert_int_eq(peak_isa_active(), best);
}
END_TEST

/* Many threads make their very first library call at the same moment. */
enum { N_THREADS = 16, ROWS = 8, D = 64 };
static pthread_barrier_t barrier;
static peak_isa thread_isa[N_THREADS];
static float thread_out[N_THREADS][ROWS * D];

static void *first_call(void *arg)
{
    size_t id = (size_t)arg;
    pthread_barrier_wait(&barrier);
    thread_isa[id] = peak_isa_active();
    ck_assert_int_eq(peak_pe_table(thread_out[id], PEAK_F32, ROWS, D, id, NULL, NULL), PEAK_OK);
    return NULL;
}

START_TEST(concurrent_first_calls)
{
    pthread_t th[N_THREADS];
    pthread_barrier_init(&barrier, NULL, N_THREADS);
    for (size_t i = 0; i < N_THREADS; i++)
        ck_assert_int_eq(pthread_create(&th[i], NULL, first_call, (void *)i), 0);
    for (size_t i = 0; i < N_THREADS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    float ref[ROWS * D];
    for (size_t i = 0; i < N_THREADS; i++) {
        ck_assert_int_eq(thread_isa[i], thread_isa[0]);
        ck_assert_int_eq(peak_pe_table(ref, PEAK_F32, ROWS, D, i, NULL, NULL), PEAK_OK);
        ck_assert(peak_test_bytes_equal(ref, thread_out[i], sizeof ref));
    }
}
END_TEST

/* Run under meson with PEAK_ISA set to each value. */
START_TEST(env_variable_caps_the_choice)
{
    const char *env = getenv("PEAK_ISA");
    peak_isa best = hardware_best(), req, expect = best;
    if (env && peak_isa_parse(env, &req)) {
        int same_chain = req == PEAK_ISA_SCALAR || (req == PEAK_ISA_NEON) == (best == PEAK_ISA_NEON);
        if (same_chain && req != PEAK_ISA_NEON && best != PEAK_ISA_NEON)
            expect = req < best ? req : best;
        else if (same_chain && req == PEAK_ISA_SCALAR)
            expect = PEAK_ISA_SCALAR;
        else if (same_chain && req == PEAK_ISA_NEON && best == PEAK_ISA_NEON)
            expect = PEAK_ISA_NEON;
    }
    ck_assert_msg(peak_isa_active() == expect, "PEAK_ISA=%s: active %s, expected %s",
                  env ? env : "(unset)", peak_isa_name(peak_isa_active()), peak_isa_name(expect));
    const char *why = peak_isa_reason();
    ck_assert_ptr_nonnull(why);
    if (env && !peak_isa_parse(env, &req))
        ck_assert_msg(strstr(why, "unknown value") != NULL, "reason: %s", why);
}
END_TEST

/* The valgrind and qemu-x86_64 test setups set PEAK_TEST_EXPECT_ISA=avx2:
   both emulate an x86-64 CPU with AVX2 and without AVX-512, so the
   automatic choice must fall back to AVX2 by itself. */
START_TEST(emulated_cpu_gets_expected_tier)
{
    const char *want = getenv("PEAK_TEST_EXPECT_ISA");
    peak_isa isa;
    ck_assert_msg(peak_isa_parse(want, &isa), "PEAK_TEST_EXPECT_ISA=%s", want);
    ck_assert_msg(peak_isa_active() == isa, "automatic tier %s, expected %s (%s)",
                  peak_isa_name(peak_isa_active()), want, peak_isa_reason());
    ck_assert(!peak_isa_supported(PEAK_ISA_AVX512) || isa == PEAK_ISA_AVX512);
    printf("automatic tier: %s (%s)\n", peak_isa_name(isa), peak_isa_reason());
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s = suite_create("dispatch");
    TCase *tc = tcase_create("core");
    if (argc > 1 && strcmp(argv[1], "env") == 0) {
        tcase_add_test(tc, env_variable_caps_the_choice);
    } else {
        tcase_add_test(tc, decide_real_cpus);
        tcase_add_test(tc, decide_hostile_os_and_hypervisors);
        tcase_add_test(tc, decide_partial_features);
        tcase_add_test(tc, decide_arm_hwcaps);
        tcase_add_test(tc, features_from_registers);
        tcase_add_test(tc, features_from_hwcaps);
        tcase_add_test(tc, feature_names_and_the_real_cpu);
        tcase_add_test(tc, env_cap_is_a_ceiling);
        tcase_add_test(tc, names_and_status_strings);
        tcase_add_test(tc, force_and_reset);
        tcase_add_test(tc, concurrent_first_calls);
        if (getenv("PEAK_TEST_EXPECT_ISA") && !getenv("PEAK_ISA"))
            tcase_add_test(tc, emulated_cpu_gets_expected_tier);
    }
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int run = srunner_ntests_run(sr), failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return run == 0 ? 99 : failed ? 1 : 0;
}
