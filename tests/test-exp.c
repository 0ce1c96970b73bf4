/*
 * test-exp.c - peak_exp, and the attention kernels' internal 2^t, on one tier
 * (argv[1]) against double-precision exp/exp2 and against the scalar tier,
 * which runs the same algorithm and must give the same bits.
 *
 * Inputs are float bit patterns: a fixed stride through all 2^32 of them
 * (even coverage of every magnitude, as Highway's math tests do), every
 * float whose result is subnormal, and the edges named in peak.h.  The
 * sweeps over lengths, misalignment and in place are tests/tester.c's.
 */
#include "tester.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* peak.h's bound for e^x; attention's 2^t is a degree-5 fit (exhaustive
   maxima 2.88 ULP on AVX-512, 2.53 on the other tiers: exp-avx512.h). */
#define EXP_ULP_TOL 1
#define EXP2_ULP_TOL 3

/* Floats from lo to hi (bit patterns, inclusive) with the given step. */
static float *pattern_range(uint32_t lo, uint32_t hi, uint32_t step, size_t *n)
{
    *n = (hi - lo) / step + 1;
    float *x = peak_test_alloc(*n, 0);
    for (size_t k = 0; k < *n; k++)
        x[k] = peak_test_from_bits(lo + (uint32_t)k * step);
    return x;
}

/* The tier under test: peak_exp through the API, the internal 2^t through
   the tier's table row. */
static void run_exp(float *y, const float *x, size_t n)
{
    ck_assert_int_eq(peak_exp(y, x, n, NULL), PEAK_OK);
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
        x[k] = peak_test_from_bits(cases[k].x);
    x[n] = NAN;
    x[n + 1] = -NAN;
    run_exp(y, x, n + 2);
    for (size_t k = 0; k < n; k++)
        CHECK(peak_test_to_bits(y[k]) == cases[k].y, "%s exp(%a) = %a (0x%08x), want 0x%08x",
              peak_isa_name(peak_test_isa), (double)x[k], (double)y[k], peak_test_to_bits(y[k]),
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

/* ---- the problem of the sweeps ------------------------------------------------- */

/* case.variant: the inputs: uniform in [-110, 95) (results from 0 through
   subnormals to near FLT_MAX), or any bit pattern (NaN and inf included).
   case.alias 1: in place. */
enum { EXP_UNIFORM, EXP_ANY_BITS, EXP_N_VARIANTS };

typedef struct exp_problem {
    float *x, *y;
} exp_problem;

static int exp_setup(peak_tester_problem *p)
{
    exp_problem *e = calloc(1, sizeof *e);
    if (!e)
        abort();
    p->user = e;
    const size_t n = p->c.n;
    e->x = peak_tester_input(p, "x", 1, n, (ptrdiff_t)n, 0);
    for (size_t k = 0; k < n; k++)
        e->x[k] = p->c.variant == EXP_ANY_BITS ? peak_test_from_bits((uint32_t)peak_test_next(&p->rng))
                                               : peak_test_uniform(&p->rng, -110.0f, 95.0f);
    e->y = p->c.alias ? peak_tester_alias(p, "y", e->x, PEAK_TESTER_ULP, EXP_ULP_TOL)
                      : peak_tester_output(p, "y", 1, n, (ptrdiff_t)n, 5, PEAK_TESTER_ULP,
                                           EXP_ULP_TOL);
    return 1;
}

static peak_status exp_call(peak_tester_problem *p)
{
    const exp_problem *e = p->user;
    return peak_exp(e->y, e->x, p->c.n, NULL);
}

static void exp_oracle_row(const peak_tester_problem *p, size_t buf, size_t row, double *ref)
{
    (void)buf;
    (void)row;
    const float *x0 = peak_tester_before(p, ((const exp_problem *)p->user)->x);
    for (size_t k = 0; k < p->c.n; k++)
        ref[k] = exp((double)x0[k]);
}

static void exp_teardown(peak_tester_problem *p)
{
    free(p->user);
}

/* Every tier gives the scalar tier's bits (peak.h), within EXP_ULP_TOL of
   e^x rounded once. */
static const peak_tester_family exp_family = {
    .name = "exp",
    .setup = exp_setup,
    .call = exp_call,
    .oracle_row = exp_oracle_row,
    .teardown = exp_teardown,
    .same_bits = 1,
    .n_variants = EXP_N_VARIANTS,
    .n_aliases = 1,
    .base = {.rows = 1, .variant = EXP_UNIFORM},
};

/* The sweeps run EXP_UNIFORM at every length; any bit pattern at every
   length as well (the tails must pass NaN and inf through as the scalar
   tier does). */
START_TEST(exp_any_bits_every_length)
{
    for (size_t n = 1; n <= 70; n++) {
        peak_tester_case c = exp_family.base;
        c.n = n;
        c.variant = EXP_ANY_BITS;
        c.misalign = n % 16;
        c.alias = _i;
        c.seed = 78 + n;
        peak_tester_check(&exp_family, &c);
    }
}
END_TEST

/* Rejected calls change no byte of x or y. */
START_TEST(exp_invalid_arguments)
{
    peak_tester_case c = exp_family.base;
    c.n = 8;
    c.seed = 5;
    peak_tester_problem p;
    peak_tester_setup(&exp_family, &c, &p);
    const exp_problem *e = p.user;
    float *x = e->x, *y = e->y;
    static const struct {
        const char *what;
        int y, x; /* 0: NULL, 1: y, 2: x, 3: x + 1 */
        size_t n;
        peak_status want;
    } bad[] = {
        {"NULL y", 0, 2, 8, PEAK_ERR_INVALID_ARG},
        {"NULL x", 1, 0, 8, PEAK_ERR_INVALID_ARG},
        {"n = 0", 1, 2, 0, PEAK_ERR_INVALID_ARG},
        {"y one float after x", 3, 2, 7, PEAK_ERR_INVALID_ARG},
        {"x one float after y", 2, 3, 7, PEAK_ERR_INVALID_ARG},
        {"n beyond PTRDIFF_MAX bytes", 1, 2, (size_t)PTRDIFF_MAX, PEAK_ERR_OUT_OF_RANGE},
    };
    float *const ptr[4] = {NULL, y, x, x + 1};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        peak_tester_snapshot(&p);
        const peak_status got = peak_exp(ptr[bad[k].y], ptr[bad[k].x], bad[k].n, NULL);
        peak_tester_expect_rejected(&p, bad[k].what, got, bad[k].want);
    }
    ck_assert_int_eq(peak_exp(y + 4, x, 4, NULL), PEAK_OK); /* adjacent, not overlapping */
    peak_tester_free(&exp_family, &p);
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
            CHECK(peak_test_to_bits(y[k]) == 0, "%s exp2(%a) = %a, want +0", peak_isa_name(peak_test_isa),
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
    CHECK(peak_test_to_bits(y[total - 2]) == 0, "%s: 2^-inf = %a", peak_isa_name(peak_test_isa),
          (double)y[total - 2]);
    CHECK(y[total - 5] == 0x1p-126f && peak_test_to_bits(y[total - 4]) == 0 && y[total - 3] == 2.0f,
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
    peak_tester_add_sweeps(tc, &exp_family);
    tcase_add_loop_test(tc, exp_any_bits_every_length, 0, 2);
    tcase_add_test(tc, exp_special_values);
    tcase_add_loop_test(tc, exp_sweep_all_magnitudes, 0, 2);
    tcase_add_test(tc, exp_subnormal_results);
    tcase_add_test(tc, exp_invalid_arguments);
    tcase_add_test(tc, exp2_attention_variant);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv)
{
    return peak_test_main(argc, argv, make_suite);
}
