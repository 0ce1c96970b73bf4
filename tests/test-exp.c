/*
 * test-exp.c - peak_exp, and the attention kernels' internal 2^t, on one tier
 * (argv[1]) against double-precision exp/exp2 and against the scalar tier,
 * which runs the same algorithm and must give the same bits.
 *
 * Inputs are float bit patterns: a fixed stride through all 2^32 of them
 * (even coverage of every magnitude, as Highway's math tests do), every
 * float whose result is subnormal, and the edges named in peak.h.  Buffers
 * have their exact size (AddressSanitizer sees any read past the end).
 */
#include "test-util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* See test-softmax.c: Check's per-assertion cost is too high for sweeps. */
#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        if (!(cond))                                                             \
            ck_abort_msg(__VA_ARGS__);                                           \
    } while (0)

/* peak.h's bound for e^x; attention's 2^t is a degree-5 fit (exhaustive
   maxima 2.88 ULP on AVX-512, 2.53 on the other tiers: exp-avx512.h). */
#define EXP_ULP_TOL 1
#define EXP2_ULP_TOL 3

static float from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static uint32_t to_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* Floats from lo to hi (bit patterns, inclusive) with the given step. */
static float *pattern_range(uint32_t lo, uint32_t hi, uint32_t step, size_t *n)
{
    *n = (hi - lo) / step + 1;
    float *x = peak_test_alloc(*n, 0);
    for (size_t k = 0; k < *n; k++)
        x[k] = from_bits(lo + (uint32_t)k * step);
    return x;
}

/* The tier under test: peak_exp through the API, the internal 2^t through
   the tier's table row. */
static void run_exp(float *y, const float *x, size_t n)
{
    ck_assert_int_eq(peak_exp(y, x, n), PEAK_OK);
}

static void run_exp2(float *y, const float *x, size_t n)
{
    peak_kernels_for(peak_test_isa)->exp2(y, x, n);
}

/* got against the double reference, rounded once to float. */
static void expect_close(const char *what, float x, float got, double ref, int64_t tol)
{
    const float want = (float)ref;
    CHECK(!signbit(got) || isnan(got), "%s %s(%a) = %a is negative", peak_isa_name(peak_test_isa),
          what, (double)x, (double)got);
    CHECK(peak_test_ulp_diff(got, want) <= tol, "%s %s(%a) = %a, want %a (%lld ulp)",
          peak_isa_name(peak_test_isa), what, (double)x, (double)got, (double)want,
          (long long)peak_test_ulp_diff(got, want));
}

/* ---- e^x -------------------------------------------------------------------------- */

START_TEST(exp_special_values)
{
    static const struct {
        uint32_t x, y;
    } cases[] = {
        {0xff800000u, 0x00000000u}, /* -inf -> +0 */
        {0x7f800000u, 0x7f800000u}, /* +inf -> +inf */
        {0x00000000u, 0x3f800000u}, /* +0 -> 1 */
        {0x80000000u, 0x3f800000u}, /* -0 -> 1 */
        {0x00000001u, 0x3f800000u}, /* smallest subnormal -> 1 */
        {0x42b17217u, 0x7f7fff84u}, /* 0x1.62e42ep+6: largest finite result */
        {0x42b17218u, 0x7f800000u}, /* 0x1.62e430p+6: first overflow */
        {0x7f7fffffu, 0x7f800000u}, /* FLT_MAX */
        {0xc2cff1b4u, 0x00000001u}, /* -0x1.9fe368p+6: smallest subnormal */
        {0xc2cff1b5u, 0x00000000u}, /* -0x1.9fe36ap+6: first +0 */
        {0xff7fffffu, 0x00000000u}, /* -FLT_MAX */
    };
    const size_t n = sizeof cases / sizeof cases[0];
    float *x = peak_test_alloc(n + 2, 0), *y = peak_test_alloc(n + 2, 1);
    for (size_t k = 0; k < n; k++)
        x[k] = from_bits(cases[k].x);
    x[n] = NAN;
    x[n + 1] = -NAN;
    run_exp(y, x, n + 2);
    for (size_t k = 0; k < n; k++)
        CHECK(to_bits(y[k]) == cases[k].y, "%s exp(%a) = %a (0x%08x), want 0x%08x",
              peak_isa_name(peak_test_isa), (double)x[k], (double)y[k], to_bits(y[k]),
              cases[k].y);
    CHECK(isnan(y[n]) && isnan(y[n + 1]), "%s: exp(NaN) is not NaN", peak_isa_name(peak_test_isa));
    peak_test_free(x);
    peak_test_free(y);
}
END_TEST

/* Every 2003rd float bit pattern, positive and negative (2.1 million; the
   exhaustive maximum is in peak.h).  Kept small enough for the emulated
   AArch64 run in CI. */
START_TEST(exp_sweep_all_magnitudes)
{
    size_t n;
    const uint32_t step = peak_test_quick() ? 2003 * 8 : 2003;
    float *x = pattern_range(_i ? 0x80000000u : 0u, _i ? 0xfffffffeu : 0x7ffffffeu, step, &n);
    float *y = peak_test_alloc(n, 0);
    run_exp(y, x, n);
    double worst = 0.0;
    for (size_t k = 0; k < n; k++) {
        if (isnan(x[k])) {
            CHECK(isnan(y[k]), "%s exp(NaN) = %a", peak_isa_name(peak_test_isa), (double)y[k]);
            continue;
        }
        const double ref = exp((double)x[k]);
        expect_close("exp", x[k], y[k], ref, EXP_ULP_TOL);
        if (ref >= FLT_MIN && ref <= FLT_MAX) {
            const double u = (double)nextafterf((float)ref, INFINITY) - (double)(float)ref;
            worst = fmax(worst, fabs((double)y[k] - ref) / u);
        }
    }
    printf("exp %s: %s half: max error %.3f ulp (normal results)\n", peak_isa_name(peak_test_isa),
           _i ? "negative" : "positive", worst);
    fflush(stdout);
    peak_test_free(x);
    peak_test_free(y);
}
END_TEST

/* Every third float whose e^x is subnormal, and the first zeros: gradual
   underflow within one subnormal step, never negative, then +0. */
START_TEST(exp_subnormal_results)
{
    size_t n;
    /* -87.33654 .. -104 */
    float *x = pattern_range(0xc2aeac50u, 0xc2d00000u, 3, &n);
    float *y = peak_test_alloc(n, 0);
    run_exp(y, x, n);
    size_t exact = 0;
    for (size_t k = 0; k < n; k++) {
        const double ref = exp((double)x[k]);
        expect_close("exp", x[k], y[k], ref, 1);
        exact += y[k] == (float)ref;
    }
    printf("exp %s: %zu inputs with subnormal or zero results, %zu rounded as libm's exp\n",
           peak_isa_name(peak_test_isa), n, exact);
    fflush(stdout);
    peak_test_free(x);
    peak_test_free(y);
}
END_TEST

/* Same bits as the scalar tier, for every length's tail, misaligned, and in
   place. */
START_TEST(exp_same_bits_as_scalar_every_length)
{
    const peak_kernels *scalar = peak_kernels_for(PEAK_ISA_SCALAR);
    uint64_t rng = 77 + (uint64_t)_i;
    for (size_t n = 1; n <= 70; n++) {
        float *x = peak_test_alloc(n, n % 16), *y = peak_test_alloc(n, (n + 5) % 16);
        float *want = peak_test_alloc(n, 0);
        for (size_t k = 0; k < n; k++)
            x[k] = _i ? from_bits((uint32_t)peak_test_next(&rng))
                      : peak_test_uniform(&rng, -110.0f, 95.0f);
        scalar->exp(want, x, n);
        run_exp(y, x, n);
        for (size_t k = 0; k < n; k++)
            CHECK(to_bits(y[k]) == to_bits(want[k]) || (isnan(y[k]) && isnan(want[k])),
                  "%s n%zu exp(%a) = %a, scalar tier %a", peak_isa_name(peak_test_isa), n,
                  (double)x[k], (double)y[k], (double)want[k]);
        run_exp(x, x, n); /* in place */
        for (size_t k = 0; k < n; k++)
            CHECK(to_bits(x[k]) == to_bits(y[k]) || (isnan(x[k]) && isnan(y[k])),
                  "%s n%zu: in place differs at %zu", peak_isa_name(peak_test_isa), n, k);
        peak_test_free(x);
        peak_test_free(y);
        peak_test_free(want);
    }
}
END_TEST

START_TEST(exp_invalid_arguments)
{
    float *x = peak_test_alloc(8, 0), *y = peak_test_alloc(8, 0);
    peak_test_fill_uniform(x, 8, &(uint64_t){5}, -1.0f, 1.0f);
    ck_assert_int_eq(peak_exp(NULL, x, 8), PEAK_ERR_INVALID_ARG);
    ck_assert_int_eq(peak_exp(y, NULL, 8), PEAK_ERR_INVALID_ARG);
    ck_assert_int_eq(peak_exp(y, x, 0), PEAK_ERR_INVALID_ARG);
    ck_assert_int_eq(peak_exp(x + 1, x, 7), PEAK_ERR_INVALID_ARG); /* overlap */
    ck_assert_int_eq(peak_exp(x, x + 1, 7), PEAK_ERR_INVALID_ARG);
    ck_assert_int_eq(peak_exp(y, x, (size_t)PTRDIFF_MAX), PEAK_ERR_OUT_OF_RANGE);
    for (size_t k = 0; k < 8; k++)
        CHECK(peak_test_is_canary(y[k]), "a rejected call wrote y[%zu]", k);
    ck_assert_int_eq(peak_exp(y + 4, x, 4), PEAK_OK); /* adjacent, not overlapping */
    peak_test_free(x);
    peak_test_free(y);
}
END_TEST

/* ---- attention's 2^t ------------------------------------------------------------- */

/* 2^t for t <= 1: within EXP2_ULP_TOL of exp2 where 2^t >= FLT_MIN, +0
   where t < -126 (flushed, on every tier), 2^0 = 1, -inf -> +0, NaN ->
   NaN, never negative.  Not bit-identical across tiers: VREDUCEPS rounds
   r = t - floor(t) down where AVX2 and the scalar tier round to nearest
   (t in (-1/2, 0)); the values then differ by at most one ULP. */
START_TEST(exp2_attention_variant)
{
    size_t n;
    /* every 211th float from 0 up to 1 and from -0 down to -inf */
    const uint32_t step = peak_test_quick() ? 211 * 16 : 211;
    float *xp = pattern_range(0u, 0x3f800000u, step, &n);
    size_t nn;
    float *xn = pattern_range(0x80000000u, 0xff800000u, step, &nn);
    const float edges[] = {-126.0f, nextafterf(-126.0f, -INFINITY), 1.0f, -INFINITY, NAN};
    const size_t n_edges = sizeof edges / sizeof edges[0];
    const size_t total = n + nn + n_edges;
    float *x = peak_test_alloc(total, 0), *y = peak_test_alloc(total, 0);
    float *want = peak_test_alloc(total, 0);
    memcpy(x, xp, n * sizeof *x);
    memcpy(x + n, xn, nn * sizeof *x);
    memcpy(x + n + nn, edges, sizeof edges);
    run_exp2(y, x, total);
    peak_kernels_for(PEAK_ISA_SCALAR)->exp2(want, x, total);
    double worst = 0.0;
    for (size_t k = 0; k < total; k++) {
        CHECK(peak_test_ulp_diff(y[k], want[k]) <= 1,
              "%s exp2(%a) = %a, scalar tier %a", peak_isa_name(peak_test_isa), (double)x[k],
              (double)y[k], (double)want[k]);
        if (isnan(x[k])) {
            CHECK(isnan(y[k]), "%s exp2(NaN) = %a", peak_isa_name(peak_test_isa), (double)y[k]);
            continue;
        }
        if (x[k] < -126.0f) {
            CHECK(to_bits(y[k]) == 0, "%s exp2(%a) = %a, want +0", peak_isa_name(peak_test_isa),
                  (double)x[k], (double)y[k]);
            continue;
        }
        const double ref = exp2((double)x[k]);
        expect_close("exp2", x[k], y[k], ref, EXP2_ULP_TOL);
        const double u = (double)nextafterf((float)ref, INFINITY) - (double)(float)ref;
        worst = fmax(worst, fabs((double)y[k] - ref) / u);
    }
    CHECK(y[0] == 1.0f && y[n] == 1.0f, "%s: 2^0 = %a, 2^-0 = %a", peak_isa_name(peak_test_isa),
          (double)y[0], (double)y[n]);
    CHECK(to_bits(y[total - 2]) == 0, "%s: 2^-inf = %a", peak_isa_name(peak_test_isa),
          (double)y[total - 2]);
    CHECK(y[total - 5] == 0x1p-126f && to_bits(y[total - 4]) == 0 && y[total - 3] == 2.0f,
          "%s: 2^-126 = %a, 2^(-126 - ulp) = %a, 2^1 = %a", peak_isa_name(peak_test_isa),
          (double)y[total - 5], (double)y[total - 4], (double)y[total - 3]);
    printf("exp2 (attention) %s: max error %.3f ulp\n", peak_isa_name(peak_test_isa), worst);
    fflush(stdout);
    peak_test_free(xp);
    peak_test_free(xn);
    peak_test_free(x);
    peak_test_free(y);
    peak_test_free(want);
}
END_TEST

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("exp");
    TCase *tc = tcase_create(peak_isa_name(isa));
    tcase_add_test(tc, exp_special_values);
    tcase_add_loop_test(tc, exp_sweep_all_magnitudes, 0, 2);
    tcase_add_test(tc, exp_subnormal_results);
    tcase_add_loop_test(tc, exp_same_bits_as_scalar_every_length, 0, 2);
    tcase_add_test(tc, exp_invalid_arguments);
    tcase_add_test(tc, exp2_attention_variant);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
