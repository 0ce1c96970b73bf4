/*
 * tanh-bound.c - the figures of kernels/tanh.h, over all 2^32 floats:
 *   - the largest error of peak_tanh_ref in ULP of tanh computed in double
 *     (the ULP of the exact value's binade; glibc's tanh is within 2 ULP
 *     of double, 2^-28 of a float ULP), per branch;
 *   - monotonicity (non-decreasing over every float from +0 to +inf, with
 *     odd symmetry below: non-decreasing everywhere), |tanh t| <= 1;
 *   - odd symmetry bit for bit, and the special values;
 *   - the AVX2 and AVX-512 tiers' peak_vf_tanh (tanh-body.h) against the
 *     reference's bits for every input (AVX-512 only where the CPU has it);
 *   - soft-capping: the error of peak_softcap_ref against cap tanh(s / cap)
 *     in double for caps 30 and 50 over every third float s in [0, 8192]
 *     (odd as tanh is; in ULP where s / cap is normal, absolute where it
 *     is subnormal), and the tiers' peak_vf_softcap against its bits.
 *
 * One file, compiled three times (each tier's vocabulary in its own
 * object, the driver without them):
 *
 *   cc -O2 -ffp-contract=off -Ikernels -mavx2 -mfma -DTANH_BOUND_TIER=2 \
 *      -c scripts/tanh-bound.c -o /tmp/tanh-bound-avx2.o
 *   cc -O2 -ffp-contract=off -Ikernels -mavx2 -mfma -mavx512f -mavx512bw \
 *      -mavx512dq -mavx512vl -DTANH_BOUND_TIER=3 -c scripts/tanh-bound.c \
 *      -o /tmp/tanh-bound-avx512.o
 *   cc -O2 -ffp-contract=off -march=native -Ikernels scripts/tanh-bound.c \
 *      /tmp/tanh-bound-avx2.o /tmp/tanh-bound-avx512.o -o /tmp/tanh-bound -lm
 *   /tmp/tanh-bound            (or /tmp/tanh-bound softcap: that part alone)
 *
 * (about 15 minutes of CPU on one core of a Sapphire Rapids VM;
 * -march=native makes fmaf one instruction).  Exit status 0 when every
 * check holds.  Its output, the figures of tanh.h:
 *
 *   |t| < 1 (polynomial):   max 0.9377 ULP at t = 0x1.d3e846p-1
 *   |t| >= 1 (exponential): max 0.9592 ULP at t = 0x1.022fd6p+0
 *   rms 0.0720 ULP; 0 decreasing steps
 *   tiers: avx2 and avx512 give the reference's bits for every float
 *   softcap 30: max 2.3677 ULP at s = 0x1.f2f1dp+1 (s / cap subnormal:
 *     16.00 * 2^-149 absolute); softcap 50: 2.0898 ULP (32.00 * 2^-149)
 */
#include <stddef.h>
#include <stdint.h>

#if defined(TANH_BOUND_TIER)

#if TANH_BOUND_TIER == 2
#include "avx2/exp-avx2.h"
#define TIER_FN(name) name##_avx2
#else
#include "avx512/exp-avx512.h"
#define TIER_FN(name) name##_avx512
#endif
#include "tanh-body.h"

/* y[k] = tanh(x[k]) or cap tanh(x[k] / cap), n a multiple of the lanes. */
void TIER_FN(bound_tanh)(float *y, const float *x, size_t n);
void TIER_FN(bound_softcap)(float *y, const float *x, size_t n, float cap);

void TIER_FN(bound_tanh)(float *y, const float *x, size_t n)
{
    for (size_t k = 0; k < n; k += PEAK_VF_LANES)
        peak_vf_storeu(y + k, peak_vf_tanh(peak_vf_loadu(x + k)));
}

void TIER_FN(bound_softcap)(float *y, const float *x, size_t n, float cap)
{
    const peak_vf vcap = peak_vf_set1(cap);
    for (size_t k = 0; k < n; k += PEAK_VF_LANES)
        peak_vf_storeu(y + k, peak_vf_softcap(peak_vf_loadu(x + k), vcap));
}

#else /* the driver */

#include "tanh.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void bound_tanh_avx2(float *y, const float *x, size_t n);
void bound_softcap_avx2(float *y, const float *x, size_t n, float cap);
void bound_tanh_avx512(float *y, const float *x, size_t n);
void bound_softcap_avx512(float *y, const float *x, size_t n, float cap);

enum { CHUNK = 1 << 16 };
static float xs[CHUNK], ys[CHUNK], yv[CHUNK];
static int failures;

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

/* |got - want| in ULP of want's float binade (subnormal: 2^-149). */
static double ulp_error(float got, double want)
{
    int e;
    frexp(want, &e);
    const double ulp = ldexp(1.0, e - 24 < -149 ? -149 : e - 24);
    return fabs((double)got - want) / ulp;
}

static void fail(const char *what, float x, float got, float want)
{
    if (failures++ < 20)
        printf("FAIL %s(%a): %a (0x%08x), want %a (0x%08x)\n", what, (double)x, (double)got,
               to_bits(got), (double)want, to_bits(want));
}

/* y and want the same bits, or both NaN (counted apart). */
static long nan_bits_differ;
static void same_bits(const char *what, const float *x, const float *y, const float *want, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (to_bits(y[k]) == to_bits(want[k]))
            continue;
        if (isnan(y[k]) && isnan(want[k]))
            nan_bits_differ++;
        else
            fail(what, x[k], y[k], want[k]);
    }
}

static void special_values(void)
{
    static const struct {
        float x, y;
    } cases[] = {
        {0.0f, 0.0f},
        {-0.0f, -0.0f},
        {INFINITY, 1.0f},
        {-INFINITY, -1.0f},
        {0x1p-149f, 0x1p-149f},
        {-0x1p-149f, -0x1p-149f},
        {0x1.fffffcp-127f, 0x1.fffffcp-127f},
        {0x1p-126f, 0x1p-126f},
        {0x1p-13f, 0x1p-13f},
        {PEAK_TANH_CLAMP, 1.0f},
        {0x1.205968p+3f, 1.0f},           /* the first float whose tanh rounds to 1 */
        {0x1.205966p+3f, 0x1.fffffep-1f}, /* the last below it */
        {FLT_MAX, 1.0f},
        {-FLT_MAX, -1.0f},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const float y = peak_tanh_ref(cases[k].x);
        if (to_bits(y) != to_bits(cases[k].y))
            fail("special tanh", cases[k].x, y, cases[k].y);
    }
    if (!isnan(peak_tanh_ref(NAN)) || !isnan(peak_tanh_ref(-NAN)))
        fail("special tanh", NAN, peak_tanh_ref(NAN), NAN);
    const float caps[] = {30.0f, 50.0f};
    for (size_t c = 0; c < 2; c++) {
        const float cap = caps[c];
        if (peak_softcap_ref(INFINITY, cap) != cap || peak_softcap_ref(-INFINITY, cap) != -cap)
            fail("special softcap", INFINITY, peak_softcap_ref(INFINITY, cap), cap);
        if (!isnan(peak_softcap_ref(NAN, cap)))
            fail("special softcap", NAN, peak_softcap_ref(NAN, cap), NAN);
        if (to_bits(peak_softcap_ref(-0.0f, cap)) != 0x80000000u)
            fail("special softcap", -0.0f, peak_softcap_ref(-0.0f, cap), -0.0f);
    }
}

static void softcap(int avx512)
{
    const float caps[] = {30.0f, 50.0f};
    for (size_t c = 0; c < 2; c++) {
        const float cap = caps[c];
        double worst = 0.0, worst_sub = 0.0;
        float worst_s = 0.0f;
        long count = 0;
        const uint32_t end = to_bits(8192.0f);
        for (uint32_t b0 = 0; b0 <= end; b0 += 3 * CHUNK) {
            for (size_t k = 0; k < CHUNK; k++)
                xs[k] = from_bits(b0 + 3u * (uint32_t)k);
            for (size_t k = 0; k < CHUNK; k++) {
                ys[k] = peak_softcap_ref(xs[k], cap);
                if (xs[k] > 8192.0f)
                    continue;
                const double exact = (double)cap * tanh((double)xs[k] / (double)cap);
                if (xs[k] < cap * FLT_MIN) {
                    /* s / cap subnormal: in steps of 2^-149, absolute */
                    worst_sub = fmax(worst_sub, fabs((double)ys[k] - exact) * 0x1p149);
                    continue;
                }
                const double e = ulp_error(ys[k], exact);
                count++;
                if (e > worst) {
                    worst = e;
                    worst_s = xs[k];
                }
                if (to_bits(peak_softcap_ref(-xs[k], cap)) != (to_bits(ys[k]) ^ 0x80000000u))
                    fail("softcap odd", xs[k], peak_softcap_ref(-xs[k], cap), -ys[k]);
            }
            bound_softcap_avx2(yv, xs, CHUNK, cap);
            same_bits("softcap avx2", xs, yv, ys, CHUNK);
            if (avx512) {
                bound_softcap_avx512(yv, xs, CHUNK, cap);
                same_bits("softcap avx512", xs, yv, ys, CHUNK);
            }
        }
        printf("softcap %g: %ld floats s in [%g FLT_MIN, 8192] (every third): max %.4f ULP at "
               "s = %a; below, s / cap subnormal: max %.2f * 2^-149 absolute\n",
               (double)cap, count, (double)cap, worst, (double)worst_s, worst_sub);
    }
}

int main(int argc, char **argv)
{
    /* "softcap": the special values and soft-capping only */
    const int all = !(argc > 1 && strcmp(argv[1], "softcap") == 0);
    setvbuf(stdout, NULL, _IOLBF, 0);
    __builtin_cpu_init();
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        printf("tanh-bound: needs AVX2 + FMA\n");
        return 2;
    }
    special_values();

    double worst_poly = 0.0, worst_exp = 0.0, sum2 = 0.0;
    float at_poly = 0.0f, at_exp = 0.0f, prev = 0.0f;
    long count = 0, not_monotonic = 0;
    for (uint64_t b0 = 0; all && b0 < ((uint64_t)1 << 32); b0 += CHUNK) {
        for (size_t k = 0; k < CHUNK; k++)
            xs[k] = from_bits((uint32_t)b0 + (uint32_t)k);
        for (size_t k = 0; k < CHUNK; k++)
            ys[k] = peak_tanh_ref(xs[k]);
        bound_tanh_avx2(yv, xs, CHUNK);
        same_bits("tanh avx2", xs, yv, ys, CHUNK);
        if (avx512) {
            bound_tanh_avx512(yv, xs, CHUNK);
            same_bits("tanh avx512", xs, yv, ys, CHUNK);
        }
        if (b0 >> 31)
            continue; /* the negative half: its bits were checked by symmetry */
        for (size_t k = 0; k < CHUNK; k++) {
            const float x = xs[k], y = ys[k];
            if (isnan(x)) {
                if (!isnan(y))
                    fail("tanh NaN", x, y, NAN);
                continue;
            }
            if (to_bits(peak_tanh_ref(-x)) != (to_bits(y) ^ 0x80000000u))
                fail("tanh odd", -x, peak_tanh_ref(-x), -y);
            if (y < prev) {
                not_monotonic++;
                fail("tanh monotonic", x, y, prev);
            }
            prev = y;
            if (!(y <= 1.0f))
                fail("tanh |y| <= 1", x, y, 1.0f);
            if (isinf(x))
                continue;
            const double e = ulp_error(y, tanh((double)x));
            sum2 += e * e;
            count++;
            if (x < PEAK_TANH_POLY_MAX && e > worst_poly) {
                worst_poly = e;
                at_poly = x;
            } else if (x >= PEAK_TANH_POLY_MAX && e > worst_exp) {
                worst_exp = e;
                at_exp = x;
            }
        }
    }
    if (all) {
        printf("tanh: %ld finite floats t >= +0 (and their negatives, by symmetry):\n"
               "  |t| < %g (polynomial):   max %.4f ULP at t = %a\n"
               "  |t| >= %g (exponential): max %.4f ULP at t = %a\n"
               "  rms %.4f ULP; %ld decreasing steps\n",
               count, (double)PEAK_TANH_POLY_MAX, worst_poly, (double)at_poly,
               (double)PEAK_TANH_POLY_MAX, worst_exp, (double)at_exp, sqrt(sum2 / (double)count),
               not_monotonic);
        printf("tiers: avx2%s give the reference's bits for every float (%ld NaN outputs with "
               "other NaN bits)\n",
               avx512 ? " and avx512" : " (avx512: not on this CPU)", nan_bits_differ);
    }
    softcap(avx512);
    printf("%s (%d failures)\n", failures ? "FAILED" : "all checks hold", failures);
    return failures ? 1 : 0;
}

#endif
