/*
 * layernorm-neon.c - residual add + LayerNorm on AArch64 AdvSIMD: 4 floats
 * a vector, 16 a step, the code of layernorm-body.h on simd/f32-neon.h.
 * Algorithm, accuracy and memory behaviour: layernorm.h.
 *
 * Two overrides keep this tier's own order of additions (and so its
 * bits): the last n % 16 floats of a row go into pass 1's double sums
 * directly, a vector and then a float at a time, and the shift guess adds
 * its last k % 4 values one at a time; the x86 tiers instead take a row's
 * end as a zero-filled vector in the float chains.
 *
 * Expected on a Neoverse V1/V2 (4 FP/ASIMD pipes, 3 load and 2 store
 * pipes), with r, gamma, beta and sum: pass 1 is per 16 floats 8 loads
 * (x, r) and 16 FP instructions (s = x + r, d = s - shift, D1, D2), ~4
 * cycles; pass 2 is 16 loads (x, r, gamma, beta), 20 FP instructions and
 * 8 stores (y, sum), ~5 cycles.  So ~0.55 cycle per element from L1; out
 * of cache memory-bound like the x86 tiers (x and r in, y and sum out).
 * Not measured: no AArch64 hardware here, only qemu.
 */
#include "simd/f32-neon.h"

#include "layernorm.h"
#include "simd/typed.h"

/* s = x + r at j, of the row's type (layernorm-body.h's loader comes
   after the overrides). */
static inline peak_vf layernorm_neon_s(const peak_layernorm_row *w, size_t j)
{
    const peak_vf x = peak_vf_loadu_as(peak_elem_at(w->x, (ptrdiff_t)j, w->t), w->t);
    return w->r ? peak_vf_add(x, peak_vf_loadu_as(peak_elem_at(w->r, (ptrdiff_t)j, w->t), w->t))
                : x;
}

#define PEAK_LAYERNORM_HAS_GUESS 1
/* The shift guess: the mean of the first (up to) PEAK_LAYERNORM_GUESS_FLOATS
   values, each scaled before the sum so that no float overflows; whole
   vectors summed from +0, the last k % 4 values added to their sum. */
static float layernorm_guess(const peak_layernorm_row *w)
{
    const size_t k = w->n < PEAK_LAYERNORM_GUESS_FLOATS ? w->n : PEAK_LAYERNORM_GUESS_FLOATS;
    const float inv = 1.0f / (float)k;
    peak_vf v = peak_vf_zero();
    size_t j = 0;
    for (; j + PEAK_VF_LANES <= k; j += PEAK_VF_LANES)
        v = peak_vf_add(v, peak_vf_mul(layernorm_neon_s(w, j), peak_vf_set1(inv)));
    float g = peak_vf_reduce_add(v);
    for (; j < k; j++)
        g += peak_layernorm_input(w, j) * inv;
    return g;
}

#define PEAK_LAYERNORM_HAS_DEV_END 1
/* Pass 1's blocks take whole steps only. */
static inline size_t layernorm_dev_blocked(size_t n)
{
    return n / (PEAK_LAYERNORM_CHAINS * PEAK_VF_LANES) * (PEAK_LAYERNORM_CHAINS * PEAK_VF_LANES);
}

/* The rest of the row straight into the double sums: whole vectors, then
   single floats after the horizontal sums. */
static inline void layernorm_dev_end(const peak_layernorm_row *w, size_t j, float shift,
                                     peak_vd acc1, peak_vd acc2, double *d1, double *d2)
{
    const size_t n = w->n;
    for (; j + PEAK_VF_LANES <= n; j += PEAK_VF_LANES) {
        const peak_vf d = peak_vf_sub(layernorm_neon_s(w, j), peak_vf_set1(shift));
        acc1 = peak_vd_add_widened(acc1, d);
        acc2 = peak_vd_add_widened(acc2, peak_vf_mul(d, d));
    }
    double t1 = peak_vd_reduce_add(acc1), t2 = peak_vd_reduce_add(acc2);
    for (; j < n; j++) {
        const double d = (double)(peak_layernorm_input(w, j) - shift);
        t1 += d;
        t2 += d * d;
    }
    *d1 = t1;
    *d2 = t2;
}

#include "layernorm-body.h"
