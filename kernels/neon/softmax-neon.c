/*
 * softmax-neon.c - masked softmax, 4 floats at a time on AArch64 AdvSIMD
 * (peak_softmax in peak.h; the row algorithm, its special rows and the row
 * groups: softmax.h).
 *
 * The x86 tiers' passes with 4 lanes: max, then the terms
 * 2^-k e^(s - shift) stored, their sum, then the scaling by 1/sum, over
 * the visible range only.  The exponential is exp-neon.h's
 * peak_neon_exp_sm, the x86 tiers' bits.
 * The maximum uses FMAXNM, which drops a NaN operand (as MAXPS does with
 * the running maximum second): a NaN score is caught by the sum instead.
 *
 * AdvSIMD has no masked loads.  Row tails (n % 4 keys) take the same
 * operations one float at a time, or through a stack buffer for the
 * exponential and the sum.  In a row with element masks a group of 4 keys is
 * loaded as a vector only when all 4 are visible; otherwise lane by lane,
 * reading x (and bias) at the visible keys only: no byte outside a row, no
 * masked score, and no keep byte or bias behind a masked key is read, as
 * peak.h promises and the x86 tiers do with masked loads.
 *
 * The `stream` flag of softmax.h still selects its L1 scratch rows,
 * but the stores are ordinary: ACLE has no non-temporal store intrinsic,
 * and Neoverse cores stop allocating a stream of full-line writes by
 * themselves (write streaming mode).
 *
 * Accuracy (the budget: softmax.h): the x86 tiers' bits, the same
 * exponentials added in the same order (checked under qemu against AVX2's
 * outputs, 1.2M probabilities), so their bound: at most 2.92 ULP measured,
 * 3.58 ULP in the worst case.
 *
 * Expected on a Neoverse V1/V2 (4 x 128-bit FP/ASIMD pipes): the
 * exponential pass is 13 FP/ASIMD instructions per 4 scores (exp-neon.h's
 * peak_neon_exp_sm) besides a load and a store, the sum 4 more (two
 * FCVTLs and two FADDs into doubles), ~1.1 cycle per score with two
 * vectors in flight; the max and scale passes add ~0.15.  An unmasked row
 * of 128 keys: ~160-190 cycles, about an AVX2 core's cycles (the same 16
 * float lanes a cycle: four 128-bit pipes against two 256-bit ports).  Not
 * measured: no AArch64 hardware here, only qemu.
 */
#include "internal.h"
#include "softmax.h"
#include "neon/exp-neon.h"

#include <assert.h>
#include <string.h>

#define LANES 4

/* ---- pass 1: the maximum -------------------------------------------------- */

PEAK_SOFTMAX_INLINE float32x4_t score(float32x4_t vx, float32x4_t vscale, bool scaled)
{
    return scaled ? vmulq_f32(vx, vscale) : vx;
}

PEAK_SOFTMAX_INLINE float score1(float x, float scale, bool scaled)
{
    return scaled ? x * scale : x;
}

/* The larger of a and b, a NaN b ignored. */
static inline float max1(float a, float b)
{
    return b > a ? b : a;
}

PEAK_SOFTMAX_INLINE float max_dense(const float *x, size_t n, float scale, bool scaled)
{
    const float32x4_t vscale = vdupq_n_f32(scale);
    const float32x4_t vminf = vdupq_n_f32(-INFINITY);
    float32x4_t vmax0 = vminf, vmax1 = vminf, vmax2 = vminf, vmax3 = vminf;
    size_t j = 0;
    for (; j + 4 * LANES <= n; j += 4 * LANES) {
        vmax0 = vmaxnmq_f32(vmax0, score(vld1q_f32(x + j), vscale, scaled));
        vmax1 = vmaxnmq_f32(vmax1, score(vld1q_f32(x + j + LANES), vscale, scaled));
        vmax2 = vmaxnmq_f32(vmax2, score(vld1q_f32(x + j + 2 * LANES), vscale, scaled));
        vmax3 = vmaxnmq_f32(vmax3, score(vld1q_f32(x + j + 3 * LANES), vscale, scaled));
    }
    for (; j + LANES <= n; j += LANES)
        vmax0 = vmaxnmq_f32(vmax0, score(vld1q_f32(x + j), vscale, scaled));
    float m = vmaxnmvq_f32(vmaxnmq_f32(vmaxnmq_f32(vmax0, vmax1), vmaxnmq_f32(vmax2, vmax3)));
    for (; j < n; j++)
        m = max1(m, score1(x[j], scale, scaled));
    return m;
}

/* Nonzero keep bytes j .. j+3 as lane masks. */
static inline uint32x4_t keep_lanes(const uint8_t *keep)
{
    uint32_t bytes;
    memcpy(&bytes, keep, sizeof bytes);
    const uint8x8_t vb = vreinterpret_u8_u32(vdup_n_u32(bytes));
    const uint32x4_t vk = vmovl_u16(vget_low_u16(vmovl_u8(vb)));
    return vtstq_u32(vk, vk);
}

static inline bool all_lanes(uint32x4_t m)
{
    return vminvq_u32(m) != 0;
}

/* p[l] at the lanes set in m, 0 elsewhere; nothing else is read. */
static inline float32x4_t load_lanes(const float *p, uint32x4_t m)
{
    float buf[LANES] = {0.0f, 0.0f, 0.0f, 0.0f};
    uint32_t lane[LANES];
    vst1q_u32(lane, m);
    for (int l = 0; l < LANES; l++)
        if (lane[l])
            buf[l] = p[l];
    return vld1q_f32(buf);
}

/* Pass 1 of a row with element masks: work[lo, hi) gets the score at
   visible keys and -inf at masked ones (so passes 2 and 3 run unmasked,
   and e^-inf gives the masked keys their exact 0); returns the maximum. */
PEAK_SOFTMAX_INLINE float scores_masked(const peak_softmax_row *r, bool scaled)
{
    const float32x4_t vscale = vdupq_n_f32(r->scale);
    const float32x4_t vminf = vdupq_n_f32(-INFINITY);
    float32x4_t vmax = vminf;
    size_t j = r->lo;
    for (; j + LANES <= r->hi; j += LANES) {
        uint32x4_t vvis = r->keep ? keep_lanes(r->keep + j) : vdupq_n_u32(~0u);
        float32x4_t vbias = vdupq_n_f32(0.0f);
        if (r->bias) {
            vbias = all_lanes(vvis) ? vld1q_f32(r->bias + j) : load_lanes(r->bias + j, vvis);
            /* NOT of (bias == -inf): a NaN bias stays visible. */
            vvis = vbicq_u32(vvis, vceqq_f32(vbias, vminf));
        }
        const float32x4_t vx =
            all_lanes(vvis) ? vld1q_f32(r->x + j) : load_lanes(r->x + j, vvis);
        float32x4_t vs = score(vx, vscale, scaled);
        if (r->bias)
            vs = vaddq_f32(vs, vbias);
        vs = vbslq_f32(vvis, vs, vminf);
        vst1q_f32(r->work + j, vs);
        vmax = vmaxnmq_f32(vmax, vs);
    }
    float m = vmaxnmvq_f32(vmax);
    for (; j < r->hi; j++) {
        float s = -INFINITY;
        if (peak_mask_visible(r->keep, r->bias, j)) {
            s = score1(r->x[j], r->scale, scaled);
            if (r->bias)
                s += r->bias[j];
        }
        r->work[j] = s;
        m = max1(m, s);
    }
    return m;
}

/* ---- pass 2: exponentials and their sum ------------------------------------ */

/* 2^-k e^(s - shift) (shifted) or 2^-k e^s (not: shift is 0). */
PEAK_SOFTMAX_INLINE float32x4_t exp_of(float32x4_t vs, float32x4_t vshift, float32x4_t vlo,
                                  float32x4_t vmagic, bool shifted)
{
    return peak_neon_exp_sm(shifted ? vsubq_f32(vs, vshift) : vs, vlo, vmagic);
}

/* Two vectors an iteration: the exponentials of the two overlap. */
PEAK_SOFTMAX_INLINE void exp_store(float *dst, const float *x, size_t n, float scale,
                              const peak_softmax_exp_row *e, bool scaled, bool shifted)
{
    const float32x4_t vscale = vdupq_n_f32(scale);
    const float32x4_t vshift = vdupq_n_f32(e->shift);
    const float32x4_t vlo = vdupq_n_f32(e->lo);
    const float32x4_t vmagic = vdupq_n_f32(e->magic);
    size_t j = 0;
    for (; j + 2 * LANES <= n; j += 2 * LANES) {
        const float32x4_t ve0 =
            exp_of(score(vld1q_f32(x + j), vscale, scaled), vshift, vlo, vmagic, shifted);
        const float32x4_t ve1 =
            exp_of(score(vld1q_f32(x + j + LANES), vscale, scaled), vshift, vlo, vmagic, shifted);
        vst1q_f32(dst + j, ve0);
        vst1q_f32(dst + j + LANES, ve1);
    }
    if (j + LANES <= n) {
        vst1q_f32(dst + j,
                  exp_of(score(vld1q_f32(x + j), vscale, scaled), vshift, vlo, vmagic, shifted));
        j += LANES;
    }
    if (j < n) { /* the tail through a buffer */
        float buf[LANES] = {0.0f, 0.0f, 0.0f, 0.0f};
        memcpy(buf, x + j, (n - j) * sizeof(float));
        vst1q_f32(buf, exp_of(score(vld1q_f32(buf), vscale, scaled), vshift, vlo, vmagic, shifted));
        memcpy(dst + j, buf, (n - j) * sizeof(float));
    }
}

/* acc[0..1] += v[0..1], acc[2..3] += v[2..3], in double. */
static inline void add_widened(float64x2_t *acc, float32x4_t v)
{
    acc[0] = vaddq_f64(acc[0], vcvt_f64_f32(vget_low_f32(v)));
    acc[1] = vaddq_f64(acc[1], vcvt_high_f64_f32(v));
}

/* src[0 .. n) summed in double in the order of softmax.h (key j
   into accumulator j % 16: eight pairs of lanes). */
static inline double sum_double(const float *src, size_t n)
{
    float64x2_t vacc[PEAK_SOFTMAX_SUM_LANES / 2];
    for (size_t i = 0; i < PEAK_SOFTMAX_SUM_LANES / 2; i++)
        vacc[i] = vdupq_n_f64(0.0);
    size_t j = 0;
    for (; j + PEAK_SOFTMAX_SUM_LANES <= n; j += PEAK_SOFTMAX_SUM_LANES)
        for (size_t q = 0; q < PEAK_SOFTMAX_SUM_LANES / LANES; q++)
            add_widened(vacc + 2 * q, vld1q_f32(src + j + q * LANES));
    if (j < n) { /* the tail through a buffer: +0 past n adds nothing */
        float buf[PEAK_SOFTMAX_SUM_LANES] = {0.0f};
        memcpy(buf, src + j, (n - j) * sizeof(float));
        for (size_t q = 0; q < PEAK_SOFTMAX_SUM_LANES / LANES; q++)
            add_widened(vacc + 2 * q, vld1q_f32(buf + q * LANES));
    }
    /* The fold: pair q holds lanes 2q and 2q + 1, so i + 8 is q + 4, i + 4
       is q + 2, i + 2 is q + 1, and i + 1 the pair's own two lanes. */
    for (size_t w = PEAK_SOFTMAX_SUM_LANES / 4; w >= 1; w /= 2)
        for (size_t q = 0; q < w; q++)
            vacc[q] = vaddq_f64(vacc[q], vacc[q + w]);
    return vaddvq_f64(vacc[0]);
}

/* dst[j] = 2^-k e^(x[j] * scale - shift) for j < n (dst: the row's work
   area; softmax.h). */
PEAK_SOFTMAX_INLINE void exp_store_row(float *dst, const float *x, size_t n, float scale,
                                       const peak_softmax_exp_row *e, bool scaled)
{
    if (e->shift != 0.0f)
        exp_store(dst, x, n, scale, e, scaled, true);
    else
        exp_store(dst, x, n, scale, e, scaled, false);
}

/* ---- pass 3 and the masked-out keys ----------------------------------------- */

/* src * (hi + lo), rounded once; src * hi where lo is 0 (`two` false). */
PEAK_SOFTMAX_INLINE float32x4_t times_factor(float32x4_t v, float32x4_t vhi, float32x4_t vlo,
                                        bool two)
{
    return two ? vfmaq_f32(vmulq_f32(v, vlo), v, vhi) : vmulq_f32(v, vhi);
}

/* y[j] = src[j] * factor for j < n (src may be y). */
PEAK_SOFTMAX_INLINE void scale_store_with(float *y, const float *src, size_t n, peak_softmax_factor f,
                                     bool two)
{
    const float32x4_t vhi = vdupq_n_f32(f.hi), vlo = vdupq_n_f32(f.lo);
    size_t j = 0;
    for (; j + 2 * LANES <= n; j += 2 * LANES) {
        const float32x4_t v0 = times_factor(vld1q_f32(src + j), vhi, vlo, two);
        const float32x4_t v1 = times_factor(vld1q_f32(src + j + LANES), vhi, vlo, two);
        vst1q_f32(y + j, v0);
        vst1q_f32(y + j + LANES, v1);
    }
    for (; j + LANES <= n; j += LANES)
        vst1q_f32(y + j, times_factor(vld1q_f32(src + j), vhi, vlo, two));
    for (; j < n; j++)
        y[j] = fmaf(src[j], f.hi, src[j] * f.lo);
}

/* f.lo == 0 (softmax.h, most rows): one multiply, the same bits as
   the FMA of e * hi + e * 0. */
PEAK_SOFTMAX_INLINE void scale_store(float *y, const float *src, size_t n, peak_softmax_factor f,
                                bool stream)
{
    (void)stream;
    if (f.lo == 0.0f)
        scale_store_with(y, src, n, f, false);
    else
        scale_store_with(y, src, n, f, true);
}

PEAK_SOFTMAX_INLINE void store_zeros(float *y, size_t n, bool stream)
{
    (void)stream;
    float32x4_t vzero = vdupq_n_f32(0.0f);
    /* Hidden from the optimiser: a loop of known zeros becomes a call to
       memset, which costs more than the few stores of a short row. */
    __asm__("" : "+w"(vzero));
    size_t j = 0;
    for (; j + LANES <= n; j += LANES)
        vst1q_f32(y + j, vzero);
    for (; j < n; j++)
        vst1q_lane_f32(y + j, vzero, 0);
}

/* ---- the kernel ------------------------------------------------------------------ */

static const peak_softmax_passes passes = {max_dense,   scores_masked, exp_store_row, sum_double,
                                           scale_store, NULL,          store_zeros};

static void softmax_group(const peak_softmax_row *rows, size_t n, bool stream)
{
    peak_softmax_softmax_group(rows, n, &passes, stream);
}

void peak_f32_softmax__neon(float *y, const float *x, const peak_softmax_desc *desc)
{
    assert(y && x && desc);
    peak_softmax_for_each_group(y, x, desc, softmax_group);
}
