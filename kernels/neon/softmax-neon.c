/*
 * softmax-neon.c - masked softmax, 4 floats at a time on AArch64 AdvSIMD
 * (peak_softmax in peak.h; the row algorithm, its special rows and the row
 * groups: softmax.h; the passes: softmax-body.h, the x86 tiers' bits).
 *
 * What is NEON's own: a masked row's scores.  AdvSIMD has no masked
 * loads: a group of 4 keys is loaded as a vector only when all 4 are
 * visible; otherwise lane by lane, reading x (and bias) at the visible
 * keys only, and a row's last n % 4 keys one at a time: no byte outside a
 * row, no masked score, and no keep byte or bias behind a masked key is
 * read, as peak.h promises and the x86 tiers do with masked loads.
 *
 * ACLE has no non-temporal store intrinsic: the streamed rows of softmax.h
 * are written with ordinary stores (simd/f32-neon.h).
 *
 * Accuracy (the budget: softmax.h): the x86 tiers' bits, the same
 * exponentials added in the same order (checked under qemu against AVX2's
 * outputs, 1.2M probabilities), so their bound: at most 2.92 ULP measured,
 * 3.58 ULP in the worst case.
 *
 * Expected on a Neoverse V1/V2 (4 x 128-bit FP/ASIMD pipes): the
 * exponential pass is 13 FP/ASIMD instructions per 4 scores besides a
 * load and a store, the sum 4 more (two FCVTLs and two FADDs into
 * doubles), ~1.1 cycle per score with two vectors in flight; the max and
 * scale passes add ~0.15.  Not measured: no AArch64 hardware here, only
 * qemu.
 */
#include "simd/f32-neon.h"
#include "internal.h"
#include "softmax.h"
#include "neon/exp-neon.h"

#include <assert.h>
#include <string.h>

#include "softmax-body.h"

/* The larger of a and b, a NaN b ignored. */
static inline float max1(float a, float b)
{
    return b > a ? b : a;
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
    float buf[PEAK_VF_LANES] = {0.0f, 0.0f, 0.0f, 0.0f};
    uint32_t lane[PEAK_VF_LANES];
    vst1q_u32(lane, m);
    for (int l = 0; l < PEAK_VF_LANES; l++)
        if (lane[l])
            buf[l] = p[l];
    return vld1q_f32(buf);
}

/* softmax-body.h's pass over a masked row: whole groups of 4 keys, then
   the rest one at a time (shaped by softmax.h's peak_softmax_shape1, the
   vectors' bits). */
PEAK_SOFTMAX_INLINE float peak_softmax_scores_masked(const peak_softmax_row *r, bool scaled,
                                                     const peak_softmax_shaper *sh, bool shaped)
{
    const float32x4_t vscale = vdupq_n_f32(r->scale);
    const float32x4_t vminf = vdupq_n_f32(-INFINITY);
    float32x4_t vmax = vminf;
    size_t j = r->lo;
    for (; j + PEAK_VF_LANES <= r->hi; j += PEAK_VF_LANES) {
        uint32x4_t vvis = r->keep ? keep_lanes(r->keep + j) : vdupq_n_u32(~0u);
        float32x4_t vbias = vdupq_n_f32(0.0f);
        if (r->bias) {
            vbias = all_lanes(vvis) ? vld1q_f32(r->bias + j) : load_lanes(r->bias + j, vvis);
            /* NOT of (bias == -inf): a NaN bias stays visible. */
            vvis = vbicq_u32(vvis, vceqq_f32(vbias, vminf));
        }
        const float32x4_t vx =
            all_lanes(vvis) ? vld1q_f32(r->x + j) : load_lanes(r->x + j, vvis);
        float32x4_t vs = peak_softmax_shape(scaled ? vmulq_f32(vx, vscale) : vx, sh, j, shaped);
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
            s = scaled ? r->x[j] * r->scale : r->x[j];
            if (shaped)
                s = peak_softmax_shape1(r->lg, s, j);
            if (r->bias)
                s += r->bias[j];
        }
        r->work[j] = s;
        m = max1(m, s);
    }
    return m;
}
