/*
 * test-tanh.c - tanh and soft-capping (kernels/tanh.h, tanh-body.h) on one
 * tier (argv[1]): the tier's peak_vf_tanh and peak_vf_softcap against the
 * bits of the scalar peak_tanh_ref and peak_softcap_ref, the reference
 * within its measured bound of tanh in double, the special values, odd
 * symmetry and monotonicity.  The exhaustive figures are
 * scripts/tanh-bound.c's; this samples them.  Also the vocabulary's
 * peak_vf_sum_lanes, which needs the same per-tier build.
 *
 * The vector functions are header-only and need the tier's ISA flags, and
 * this program's main must not have them (it exits 77 on a CPU without the
 * tier, before anything runs): tests/meson.build compiles this file twice
 * per tier, once with the tier's flags and PEAK_TANH_TEST_TIER_<TIER>
 * defined (the vector part below: two array functions) and once without
 * (the tests), and links the two.  The scalar tier's "vector" part is the
 * reference itself, so its run checks the reference alone.  NEON runs in
 * the AArch64 cross build (under qemu-aarch64 in CI).
 */
#include <stddef.h>
#include <stdint.h>

/* y[k] = tanh(x[k]), and cap tanh(x[k] / cap), k < n; y may equal x. */
void tanh_test_tanh(float *y, const float *x, size_t n);
void tanh_test_softcap(float *y, const float *x, size_t n, float cap);
/* The vocabulary's peak_vf_sum_lanes (attention's row path) on the
   tier's lanes x lanes floats x (row j: vector j): sums[j] by it, ref[j]
   by peak_vf_reduce_add of row j, which it promises to equal bit for bit;
   returns the tier's lanes (1 on the scalar tier: nothing to reduce). */
size_t tanh_test_sum_lanes(float *sums, float *ref, const float *x);

#if defined(PEAK_TANH_TEST_TIER_SCALAR)

#include "tanh.h"

void tanh_test_tanh(float *y, const float *x, size_t n)
{
    for (size_t k = 0; k < n; k++)
        y[k] = peak_tanh_ref(x[k]);
}

void tanh_test_softcap(float *y, const float *x, size_t n, float cap)
{
    for (size_t k = 0; k < n; k++)
        y[k] = peak_softcap_ref(x[k], cap);
}

size_t tanh_test_sum_lanes(float *sums, float *ref, const float *x)
{
    sums[0] = ref[0] = x[0];
    return 1;
}

#elif defined(PEAK_TANH_TEST_TIER_AVX2) || defined(PEAK_TANH_TEST_TIER_AVX512) ||                  \
    defined(PEAK_TANH_TEST_TIER_NEON)

#if defined(PEAK_TANH_TEST_TIER_AVX2)
#include "avx2/exp-avx2.h"
#elif defined(PEAK_TANH_TEST_TIER_AVX512)
#include "avx512/exp-avx512.h"
#else
#include "neon/exp-neon.h"
#endif
#include "tanh-body.h"

/* The tail through peak_vf_load_first / store_first, as the kernels do. */
void tanh_test_tanh(float *y, const float *x, size_t n)
{
    size_t k = 0;
    for (; k + PEAK_VF_LANES <= n; k += PEAK_VF_LANES)
        peak_vf_storeu(y + k, peak_vf_tanh(peak_vf_loadu(x + k)));
    if (k < n)
        peak_vf_store_first(y + k, peak_vf_tanh(peak_vf_load_first(x + k, n - k)), n - k);
}

void tanh_test_softcap(float *y, const float *x, size_t n, float cap)
{
    const peak_vf vcap = peak_vf_set1(cap);
    size_t k = 0;
    for (; k + PEAK_VF_LANES <= n; k += PEAK_VF_LANES)
        peak_vf_storeu(y + k, peak_vf_softcap(peak_vf_loadu(x + k), vcap));
    if (k < n)
        peak_vf_store_first(y + k, peak_vf_softcap(peak_vf_load_first(x + k, n - k), vcap), n - k);
}

size_t tanh_test_sum_lanes(float *sums, float *ref, const float *x)
{
    peak_vf v[PEAK_VF_LANES];
    for (size_t j = 0; j < PEAK_VF_LANES; j++) {
        v[j] = peak_vf_loadu(x + j * PEAK_VF_LANES);
        ref[j] = peak_vf_reduce_add(v[j]);
    }
    peak_vf_storeu(sums, peak_vf_sum_lanes(v));
    return PEAK_VF_LANES;
}

#else /* the tests */

#include "tanh.h"
#include "test-util.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* tanh.h's exhaustive maximum for tanh (0.9592 ULP), and the largest
   soft-capping error scripts/tanh-bound.c measured for caps 30 and 50 over
   every third float (bit patterns 0 mod 3) s in [cap FLT_MIN, 8192]:
   2.3677 ULP (cap 30; 2.0898 for 50), each against the double-precision
   value, in ULP of its binade.  The soft-capping samples below are bit
   patterns 0 mod 3 too, so that bound holds for them; above 8192 (over
   160 caps) tanh(s / cap) is exactly 1 and the error 0.  Both rounded up
   in the fourth decimal. */
#define TANH_ULP_BOUND 0.9593
#define SOFTCAP_ULP_BOUND 2.3678

/* |got - want| in ULP of want's float binade (subnormal: 2^-149). */
static double ulp_error(float got, double want)
{
    int e;
    frexp(want, &e);
    return fabs((double)got - want) / ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
}

/* The same bits, or both NaN (a NaN's payload is not promised). */
static int same(float a, float b) { return peak_test_to_bits(a) == peak_test_to_bits(b) || (isnan(a) && isnan(b)); }

/* Floats with bit patterns lo, lo + step, ... <= hi, then `extra`; *n. */
static float *patterns(uint32_t lo, uint32_t hi, uint32_t step, const float *extra, size_t n_extra,
                       size_t *n)
{
    const size_t m = (size_t)((hi - lo) / step) + 1;
    *n = m + n_extra;
    float *x = peak_test_alloc(*n, 0);
    for (size_t k = 0; k < m; k++)
        x[k] = peak_test_from_bits(lo + (uint32_t)k * step);
    for (size_t k = 0; k < n_extra; k++)
        x[m + k] = extra[k];
    return x;
}

/* The edges: zeros, subnormals, the branch switch at 1, the clamp, the
   rounding to 1 (from 0x1.205968p+3 = 9.0109138 on), the largest floats,
   infinities, NaNs. */
static const float edges[] = {
    0.0f,
    -0.0f,
    0x1p-149f,
    -0x1p-149f,
    0x1.fffffcp-127f,
    0x1p-126f,
    0x1p-12f,
    0x1.fffffep-1f,
    1.0f,
    0x1.000002p+0f,
    -1.0f,
    0x1.022fd6p+0f,
    9.0f,
    0x1.205966p+3f,
    0x1.205968p+3f,
    9.0625f,
    0x1.21fffep+3f,
    88.0f,
    FLT_MAX,
    -FLT_MAX,
    INFINITY,
    -INFINITY,
    NAN,
    -NAN,
};
#define N_EDGES (sizeof edges / sizeof edges[0])

/* Every check of a sample x[0 .. n) of tanh: the tier's bits are the
   reference's (and in place too), the reference within TANH_ULP_BOUND of
   tanh in double, odd symmetry bit for bit, |y| <= 1, and, when the
   sample is sorted (`sorted`), non-decreasing results. */
static void check_tanh_sample(const float *x, size_t n, int sorted, double *worst)
{
    float *y = peak_test_alloc(n, 0), *yneg = peak_test_alloc(n, 0), *xneg = peak_test_alloc(n, 0);
    tanh_test_tanh(y, x, n);
    for (size_t k = 0; k < n; k++)
        xneg[k] = -x[k];
    tanh_test_tanh(yneg, xneg, n);
    tanh_test_tanh(xneg, xneg, n); /* in place */
    const char *tier = peak_isa_name(peak_test_isa);
    for (size_t k = 0; k < n; k++) {
        const float want = peak_tanh_ref(x[k]);
        CHECK(same(y[k], want), "%s tanh(%a) = %a (0x%08x), reference %a (0x%08x)", tier,
              (double)x[k], (double)y[k], peak_test_to_bits(y[k]), (double)want, peak_test_to_bits(want));
        CHECK(same(xneg[k], yneg[k]), "%s tanh in place (%a) = %a, not %a", tier, (double)-x[k],
              (double)xneg[k], (double)yneg[k]);
        if (isnan(x[k])) {
            CHECK(isnan(y[k]), "%s tanh(NaN) = %a", tier, (double)y[k]);
            continue;
        }
        CHECK(peak_test_to_bits(yneg[k]) == (peak_test_to_bits(y[k]) ^ 0x80000000u),
              "%s tanh(%a) = %a but tanh(%a) = %a: not odd", tier, (double)x[k], (double)y[k],
              (double)-x[k], (double)yneg[k]);
        CHECK(fabsf(y[k]) <= 1.0f, "%s tanh(%a) = %a", tier, (double)x[k], (double)y[k]);
        if (sorted && k > 0)
            CHECK(y[k] >= y[k - 1], "%s tanh(%a) = %a < tanh(%a) = %a: not monotonic", tier,
                  (double)x[k], (double)y[k], (double)x[k - 1], (double)y[k - 1]);
        const double e = ulp_error(want, tanh((double)x[k]));
        CHECK(e <= TANH_ULP_BOUND, "tanh reference(%a) = %a, %.4f ULP from tanh %a", (double)x[k],
              (double)want, e, tanh((double)x[k]));
        *worst = fmax(*worst, e);
    }
    peak_test_free(y);
    peak_test_free(yneg);
    peak_test_free(xneg);
}

/* ---- tanh ---------------------------------------------------------------------- */

START_TEST(tanh_special_values)
{
    static const struct {
        float x;
        uint32_t y;
    } cases[] = {
        {0.0f, 0x00000000u},             /* +0 -> +0 */
        {-0.0f, 0x80000000u},            /* -0 -> -0 */
        {INFINITY, 0x3f800000u},         /* +inf -> 1 */
        {-INFINITY, 0xbf800000u},        /* -inf -> -1 */
        {0x1p-149f, 0x00000001u},        /* subnormal t -> t */
        {-0x1p-149f, 0x80000001u},       /* and its negative */
        {0x1.fffffcp-127f, 0x007fffffu}, /* the largest subnormal */
        {0x1p-13f, 0x39000000u},         /* t^3 / 3 below half an ulp */
        {9.0f, 0x3f7fffffu},             /* 1 - 2^-24 */
        {0x1.205966p+3f, 0x3f7fffffu},   /* the last float below 1 */
        {0x1.205968p+3f, 0x3f800000u},   /* the first 1 */
        {0x1.22p+3f, 0x3f800000u},       /* the clamp */
        {FLT_MAX, 0x3f800000u},          /* FLT_MAX -> 1 */
        {-FLT_MAX, 0xbf800000u},         /* -FLT_MAX -> -1 */
    };
    const size_t n = sizeof cases / sizeof cases[0];
    float x[sizeof cases / sizeof cases[0] + 2], y[sizeof cases / sizeof cases[0] + 2];
    for (size_t k = 0; k < n; k++)
        x[k] = cases[k].x;
    x[n] = NAN;
    x[n + 1] = -NAN;
    tanh_test_tanh(y, x, n + 2);
    const char *tier = peak_isa_name(peak_test_isa);
    for (size_t k = 0; k < n; k++) {
        CHECK(peak_test_to_bits(y[k]) == cases[k].y, "%s tanh(%a) = %a (0x%08x), want 0x%08x", tier,
              (double)x[k], (double)y[k], peak_test_to_bits(y[k]), cases[k].y);
        CHECK(peak_test_to_bits(peak_tanh_ref(x[k])) == cases[k].y, "reference tanh(%a) = %a", (double)x[k],
              (double)peak_tanh_ref(x[k]));
    }
    CHECK(isnan(y[n]) && isnan(y[n + 1]) && isnan(peak_tanh_ref(NAN)), "%s: tanh(NaN) = %a, %a",
          tier, (double)y[n], (double)y[n + 1]);
}
END_TEST

/* Every 4099th float bit pattern, positive (and by symmetry negative),
   and the edges: every magnitude from subnormals to FLT_MAX. */
START_TEST(tanh_all_magnitudes)
{
    const uint32_t step = peak_test_quick() ? 4099 * 8 : 4099;
    size_t n;
    float *x = patterns(0u, 0x7f800000u, step, edges, N_EDGES, &n);
    double worst = 0.0;
    check_tanh_sample(x, n - N_EDGES, 1, &worst);
    check_tanh_sample(x + n - N_EDGES, N_EDGES, 0, &worst);
    printf("tanh %s: %zu floats of every magnitude: reference within %.4f ULP\n",
           peak_isa_name(peak_test_isa), n, worst);
    fflush(stdout);
    peak_test_free(x);
}
END_TEST

/* [-10, 10] densely: every 13th float from 1/16 to 10 (and negatives),
   every float within 2^-10 of the branch switch at 1, every float in
   [9, 9.1] (the rounding to 1 and the clamp). */
START_TEST(tanh_dense)
{
    const uint32_t q = peak_test_quick() ? 8 : 1;
    static const struct {
        float lo, hi;
        uint32_t step;
    } ranges[] = {
        {0x1p-4f, 10.0f, 13},
        {1.0f - 0x1p-10f, 1.0f + 0x1p-10f, 1},
        {9.0f, 9.1f, 1},
    };
    double worst = 0.0;
    size_t total = 0;
    for (size_t r = 0; r < sizeof ranges / sizeof ranges[0]; r++) {
        size_t n;
        float *x =
            patterns(peak_test_to_bits(ranges[r].lo), peak_test_to_bits(ranges[r].hi), ranges[r].step * q, NULL, 0, &n);
        check_tanh_sample(x, n, 1, &worst);
        total += n;
        peak_test_free(x);
    }
    printf("tanh %s: %zu floats in [1/16, 10]: reference within %.4f ULP\n",
           peak_isa_name(peak_test_isa), total, worst);
    fflush(stdout);
}
END_TEST

/* Every length from 1 to 40 (the vector tails), at every offset of a
   short array of edges and ordinary values. */
START_TEST(tanh_every_length)
{
    float src[40 + N_EDGES];
    for (size_t k = 0; k < 40; k++)
        src[k] = (float)k * 0.37f - 7.0f;
    memcpy(src + 40, edges, sizeof edges);
    for (size_t n = 1; n <= 40; n++) {
        for (size_t off = 0; off + n <= sizeof src / sizeof src[0]; off += 7) {
            float *x = peak_test_alloc(n, off % 16), *y = peak_test_alloc(n, 0);
            memcpy(x, src + off, n * sizeof *x);
            tanh_test_tanh(y, x, n);
            for (size_t k = 0; k < n; k++)
                CHECK(same(y[k], peak_tanh_ref(x[k])), "%s tanh(%a), n %zu: %a, reference %a",
                      peak_isa_name(peak_test_isa), (double)x[k], n, (double)y[k],
                      (double)peak_tanh_ref(x[k]));
            peak_test_free(x);
            peak_test_free(y);
        }
    }
}
END_TEST

/* Vectors whose lanes all take the polynomial (|x| < 1, where the tiers
   skip the exponential) but for one lane, at each of 16 places, that
   takes the other branch (1, 3, the clamp, inf, NaN), or just below 1. */
START_TEST(tanh_one_lane_off_the_polynomial)
{
    static const float odd[] = {1.0f, 0x1.fffffep-1f, -3.0f, 0x1.22p+3f, INFINITY, NAN};
    enum { W = 16 };
    float x[W], y[W];
    for (size_t o = 0; o < sizeof odd / sizeof odd[0]; o++)
        for (size_t at = 0; at < W; at++) {
            for (size_t k = 0; k < W; k++)
                x[k] = k == at ? odd[o] : ((float)k - 7.5f) * 0.125f;
            tanh_test_tanh(y, x, W);
            for (size_t k = 0; k < W; k++)
                CHECK(same(y[k], peak_tanh_ref(x[k])), "%s tanh(%a), lane %zu of 16 (%a at %zu): %a, reference %a",
                      peak_isa_name(peak_test_isa), (double)x[k], k, (double)odd[o], at, (double)y[k],
                      (double)peak_tanh_ref(x[k]));
        }
}
END_TEST

/* ---- soft-capping ---------------------------------------------------------------- */

static const float caps[] = {30.0f, 50.0f};

/* cap tanh(s / cap): the tier's bits are the reference's; the reference
   within SOFTCAP_ULP_BOUND of the double-precision value where s / cap is
   normal (|s| >= cap FLT_MIN), within cap / 2 steps of 2^-149 plus the
   product's rounding where it is subnormal; odd; the special values.
   _i: the cap. */
START_TEST(softcap_matches_reference)
{
    const float cap = caps[_i];
    const char *tier = peak_isa_name(peak_test_isa);
    const uint32_t q = peak_test_quick() ? 8 : 1;
    size_t n_all, n_dense;
    /* every 3 * 4099th float of every magnitude, every 3 * 29th in
       [cap / 16, 10 cap]: bit patterns 0 mod 3 (SOFTCAP_ULP_BOUND) */
    const uint32_t lo = peak_test_to_bits(cap / 16) / 3 * 3;
    float *all = patterns(0u, 0x7f800000u, 3 * 4099 * q, edges, N_EDGES, &n_all);
    float *dense = patterns(lo, peak_test_to_bits(10 * cap), 3 * 29 * q, NULL, 0, &n_dense);
    double worst = 0.0;
    for (int part = 0; part < 2; part++) {
        float *x = part ? dense : all;
        const size_t n = part ? n_dense : n_all;
        float *y = peak_test_alloc(n, 0), *yneg = peak_test_alloc(n, 0);
        tanh_test_softcap(y, x, n, cap);
        for (size_t k = 0; k < n; k++)
            x[k] = -x[k];
        tanh_test_softcap(yneg, x, n, cap);
        for (size_t k = 0; k < n; k++) {
            x[k] = -x[k];
            const float want = peak_softcap_ref(x[k], cap);
            CHECK(same(y[k], want), "%s softcap(%a, %g) = %a (0x%08x), reference %a (0x%08x)", tier,
                  (double)x[k], (double)cap, (double)y[k], peak_test_to_bits(y[k]), (double)want,
                  peak_test_to_bits(want));
            if (isnan(x[k])) {
                CHECK(isnan(y[k]), "%s softcap(NaN) = %a", tier, (double)y[k]);
                continue;
            }
            CHECK(peak_test_to_bits(yneg[k]) == (peak_test_to_bits(y[k]) ^ 0x80000000u),
                  "%s softcap(%a) = %a but softcap(%a) = %a", tier, (double)x[k], (double)y[k],
                  (double)-x[k], (double)yneg[k]);
            if (isinf(x[k]))
                continue;
            const double exact = (double)cap * tanh((double)x[k] / (double)cap);
            if (fabsf(x[k]) < cap * FLT_MIN) {
                /* s / cap subnormal: rounded to a multiple of 2^-149 (half
                   a step, which the product multiplies by cap), tanh(q) =
                   q, then the product's own rounding */
                const double bound =
                    (double)cap * 0x1p-150 + fmax(fabs((double)want) * 0x1p-24, 0x1p-150);
                CHECK(fabs((double)want - exact) <= bound,
                      "softcap reference(%a, %g) = %a, want %a", (double)x[k], (double)cap,
                      (double)want, exact);
                continue;
            }
            const double e = ulp_error(want, exact);
            CHECK(e <= SOFTCAP_ULP_BOUND, "softcap reference(%a, %g) = %a, %.4f ULP", (double)x[k],
                  (double)cap, (double)want, e);
            worst = fmax(worst, e);
        }
        peak_test_free(y);
        peak_test_free(yneg);
    }
    /* +-inf -> +-cap, +-0 -> +-0, NaN -> NaN */
    const float sx[] = {INFINITY, -INFINITY, 0.0f, -0.0f, NAN};
    float sy[5];
    tanh_test_softcap(sy, sx, 5, cap);
    CHECK(sy[0] == cap && sy[1] == -cap && peak_test_to_bits(sy[2]) == 0 && peak_test_to_bits(sy[3]) == 0x80000000u &&
              isnan(sy[4]),
          "%s softcap(+inf, -inf, +0, -0, NaN; %g) = %a %a %a %a %a", tier, (double)cap,
          (double)sy[0], (double)sy[1], (double)sy[2], (double)sy[3], (double)sy[4]);
    printf("softcap %s, cap %g: %zu floats: reference within %.4f ULP\n", tier, (double)cap,
           n_all + n_dense, worst);
    fflush(stdout);
    peak_test_free(all);
    peak_test_free(dense);
}
END_TEST

/* peak_vf_sum_lanes against the per-vector reduction, bit for bit, on
   sums that round (magnitudes 2^-20 .. 2^20, both signs, some zeros). */
START_TEST(sum_lanes_is_each_vectors_reduction)
{
    uint64_t rng = 77;
    float x[16 * 16], sums[16], ref[16];
    for (int t = 0; t < 20000; t++) {
        for (size_t k = 0; k < 16 * 16; k++) {
            const float u = peak_test_uniform(&rng, -1.0f, 1.0f);
            x[k] = k % 11 == 0 ? 0.0f : ldexpf(u, (int)(peak_test_next(&rng) % 41) - 20);
        }
        const size_t lanes = tanh_test_sum_lanes(sums, ref, x);
        for (size_t j = 0; j < lanes; j++)
            CHECK(peak_test_to_bits(sums[j]) == peak_test_to_bits(ref[j]),
                  "%s: sum_lanes lane %zu = %a, reduce_add %a", peak_isa_name(peak_test_isa), j,
                  (double)sums[j], (double)ref[j]);
    }
}
END_TEST

static Suite *make_suite(peak_isa isa)
{
    Suite *s = suite_create("tanh");
    TCase *tc = tcase_create(peak_isa_name(isa));
    tcase_add_test(tc, tanh_special_values);
    tcase_add_test(tc, tanh_all_magnitudes);
    tcase_add_test(tc, tanh_dense);
    tcase_add_test(tc, tanh_every_length);
    tcase_add_test(tc, tanh_one_lane_off_the_polynomial);
    tcase_add_loop_test(tc, softcap_matches_reference, 0, 2);
    tcase_add_test(tc, sum_lanes_is_each_vectors_reduction);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv) { return peak_test_main(argc, argv, make_suite); }

#endif
