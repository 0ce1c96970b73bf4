/*
 * layernorm-neon.c - residual add + LayerNorm on AArch64 AdvSIMD: 4 floats
 * a vector, 16 an iteration.  Algorithm, accuracy and memory behaviour:
 * layernorm.h; the FMAs (d * d into D2, v * gamma + beta) are the
 * x86 tiers'.
 *
 * AdvSIMD has no masked loads: the last n % 4 floats of a row take the
 * same operations one float at a time (their pass-1 terms go straight into
 * the double sums), so nothing outside a row's d_model floats is read or
 * written.  Pass 2 reads x[j] and r[j] before it writes sum[j] and y[j],
 * which keeps the documented aliases (y == x, sum == x, sum == r) safe.
 *
 * The `stream` flag is ignored: ACLE has no non-temporal store intrinsic,
 * and Neoverse cores stop allocating a stream of full-line writes by
 * themselves (write streaming mode).
 *
 * Expected on a Neoverse V1/V2 (4 FP/ASIMD pipes, 3 load and 2 store
 * pipes), with r, gamma, beta and sum: pass 1 is per 16 floats 8 loads
 * (x, r) and 16 FP instructions (s = x + r, d = s - shift, D1, D2), ~4
 * cycles; pass 2 is 16 loads (x, r, gamma, beta), 20 FP instructions and
 * 8 stores (y, sum), ~5 cycles.  So ~0.55 cycle per element from L1; out
 * of cache memory-bound like the x86 tiers (x and r in, y and sum out).
 * Not measured: no AArch64 hardware here, only qemu.
 */
#include "layernorm.h"

#include <arm_neon.h>

/* s = x + r (r NULL: x), rounded to float as the reference does. */
static inline float32x4_t load_s(const peak_layernorm_row *w, size_t j)
{
    const float32x4_t x = vld1q_f32(w->x + j);
    return w->r ? vaddq_f32(x, vld1q_f32(w->r + j)) : x;
}

static inline float load_s1(const peak_layernorm_row *w, size_t j)
{
    return w->r ? w->x[j] + w->r[j] : w->x[j];
}

/* Both halves of v, widened to double, added to acc. */
static inline float64x2_t add_widened(float64x2_t acc, float32x4_t v)
{
    return vaddq_f64(acc, vaddq_f64(vcvt_f64_f32(vget_low_f32(v)), vcvt_high_f64_f32(v)));
}

/* The shift guess: the mean of the first (up to) 16 values (as many as the
   x86 tiers average), each scaled before the sum so that no float
   overflows. */
static float layernorm_guess(const peak_layernorm_row *w)
{
    const size_t k = w->n < 16 ? w->n : 16;
    const float inv = 1.0f / (float)k;
    float32x4_t v = vdupq_n_f32(0.0f);
    size_t j = 0;
    for (; j + 4 <= k; j += 4)
        v = vaddq_f32(v, vmulq_f32(load_s(w, j), vdupq_n_f32(inv)));
    float g = vaddvq_f32(v);
    for (; j < k; j++)
        g += load_s1(w, j) * inv;
    return g;
}

/* y (and sum) for 4 floats at j. */
static inline void norm4(const peak_layernorm_row *w, size_t j, peak_layernorm_stats st)
{
    const float32x4_t s = load_s(w, j);
    const float32x4_t d =
        vsubq_f32(vsubq_f32(s, vdupq_n_f32(st.shift)), vdupq_n_f32(st.corr));
    const float32x4_t v = vmulq_f32(d, vdupq_n_f32(st.rstd));
    const float32x4_t g = w->gamma ? vld1q_f32(w->gamma + j) : vdupq_n_f32(1.0f);
    const float32x4_t b = w->beta ? vld1q_f32(w->beta + j) : vdupq_n_f32(0.0f);
    if (w->sum)
        vst1q_f32(w->sum + j, s);
    vst1q_f32(w->y + j, vfmaq_f32(b, v, g));
}

/* The same for the one float at j (row tails). */
static inline void norm1(const peak_layernorm_row *w, size_t j, peak_layernorm_stats st)
{
    const float s = load_s1(w, j);
    const float v = ((s - st.shift) - st.corr) * st.rstd;
    const float g = w->gamma ? w->gamma[j] : 1.0f;
    const float b = w->beta ? w->beta[j] : 0.0f;
    if (w->sum)
        w->sum[j] = s;
    w->y[j] = fmaf(v, g, b);
}

/* Floats a block before the float accumulators are widened into double:
   each lane of each of the four accumulator pairs sees 4 terms, as on the
   x86 tiers, which keeps D2 good to a few float roundings
   (layernorm.h). */
#define LAYERNORM_BLOCK 64

/* Pass 1 of w about shift; with cur, pass 2 of cur in the same loop, a
   vector of cur for each vector of w (both rows have n floats).  stream is
   ignored (see the top). */
static inline __attribute__((always_inline)) void dev_rows(const peak_layernorm_row *w, float shift,
                                                           double *d1, double *d2,
                                                           const peak_layernorm_row *cur,
                                                           peak_layernorm_stats st, bool stream)
{
    (void)stream;
    const size_t n = w->n;
    const float32x4_t vshift = vdupq_n_f32(shift);
    float64x2_t acc1 = vdupq_n_f64(0.0), acc2 = vdupq_n_f64(0.0);
    size_t j = 0;
    for (; j + 16 <= n;) {
        const size_t left = (n - j) / 16 * 16;
        const size_t end = j + (left < LAYERNORM_BLOCK ? left : LAYERNORM_BLOCK);
        /* Four independent chains per sum: each FADD/FMLA waits on its own
           result only every fourth vector, so latency is not the limit. */
        float32x4_t s1a = vdupq_n_f32(0.0f), s2a = vdupq_n_f32(0.0f);
        float32x4_t s1b = vdupq_n_f32(0.0f), s2b = vdupq_n_f32(0.0f);
        float32x4_t s1c = vdupq_n_f32(0.0f), s2c = vdupq_n_f32(0.0f);
        float32x4_t s1d = vdupq_n_f32(0.0f), s2d = vdupq_n_f32(0.0f);
        for (; j < end; j += 16) {
            peak_layernorm_prefetch(w->pf_x, j);
            peak_layernorm_prefetch(w->pf_r, j);
            const float32x4_t da = vsubq_f32(load_s(w, j), vshift);
            const float32x4_t db = vsubq_f32(load_s(w, j + 4), vshift);
            const float32x4_t dc = vsubq_f32(load_s(w, j + 8), vshift);
            const float32x4_t dd = vsubq_f32(load_s(w, j + 12), vshift);
            s1a = vaddq_f32(s1a, da);
            s2a = vfmaq_f32(s2a, da, da);
            s1b = vaddq_f32(s1b, db);
            s2b = vfmaq_f32(s2b, db, db);
            s1c = vaddq_f32(s1c, dc);
            s2c = vfmaq_f32(s2c, dc, dc);
            s1d = vaddq_f32(s1d, dd);
            s2d = vfmaq_f32(s2d, dd, dd);
            if (cur)
                for (size_t k = 0; k < 16; k += 4)
                    norm4(cur, j + k, st);
        }
        acc1 = add_widened(acc1, vaddq_f32(vaddq_f32(s1a, s1b), vaddq_f32(s1c, s1d)));
        acc2 = add_widened(acc2, vaddq_f32(vaddq_f32(s2a, s2b), vaddq_f32(s2c, s2d)));
    }
    for (; j + 4 <= n; j += 4) {
        const float32x4_t d = vsubq_f32(load_s(w, j), vshift);
        acc1 = add_widened(acc1, d);
        acc2 = add_widened(acc2, vmulq_f32(d, d));
        if (cur)
            norm4(cur, j, st);
    }
    double t1 = vaddvq_f64(acc1), t2 = vaddvq_f64(acc2);
    for (; j < n; j++) {
        const double d = (double)(load_s1(w, j) - shift);
        t1 += d;
        t2 += d * d;
        if (cur)
            norm1(cur, j, st);
    }
    *d1 = t1;
    *d2 = t2;
}

static bool row_streams(const peak_layernorm_row *w, bool stream)
{
    (void)w;
    (void)stream;
    return false;
}

PEAK_LAYERNORM_DEFINE_PASSES(dev_rows, row_streams)

static void layernorm_norm(const peak_layernorm_row *w, peak_layernorm_stats st, bool stream)
{
    (void)stream;
    const size_t n = w->n;
    size_t j = 0;
    for (; j + 4 <= n; j += 4)
        norm4(w, j, st);
    for (; j < n; j++)
        norm1(w, j, st);
}

void peak_f32_add_layernorm__neon(float *y, ptrdiff_t ld_y, float *sum, ptrdiff_t ld_sum,
                                  const float *x, ptrdiff_t ld_x, const float *r, ptrdiff_t ld_r,
                                  const float *gamma, const float *beta, size_t rows,
                                  size_t d_model, float eps)
{
    const peak_layernorm_args a = {y, ld_y, sum,   ld_sum, x,    ld_x,
                                   r, ld_r, gamma, beta,   rows, d_model};
    peak_layernorm_run(&a, eps, layernorm_guess, layernorm_dev, layernorm_norm, layernorm_fused);
}
