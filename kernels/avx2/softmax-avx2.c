/*
 * softmax-avx2.c - masked softmax, 8 floats at a time with AVX2 + FMA
 * (peak_softmax in peak.h; the row algorithm, its special rows, the row
 * groups and the streamed outputs: softmax.h; the passes: softmax-body.h).
 *
 * What is AVX2's own: a masked row's scores.  Tails are read with
 * VMASKMOVPS and a mask from a sliding window over a table: no byte
 * outside a row, no masked score, and no keep byte or bias behind a
 * masked key is read.  (A masked-off lane of VMASKMOVPS never faults.)
 * They are written without it (simd/f32-avx2.h): a row of 8 keys or more
 * ends with a plain store of its last 8, a shorter one with
 * peak_avx2_store_first's narrower plain stores.  And the fused scaling
 * and sum (PEAK_SOFTMAX_FUSE_SUM), measured on Zen 3.
 *
 * Accuracy (the budget: softmax.h): within 3.58 ULP of the exact
 * softmax for every probability >= FLT_MIN; measured at most 2.92 ULP over
 * 22M probabilities down to FLT_MIN (bench/accuracy.c, "wide").
 */
#include "simd/f32-avx2.h"
#include "internal.h"
#include "softmax.h"
#include "avx2/exp-avx2.h"

#include <assert.h>
#include <string.h>

#define PEAK_SOFTMAX_FUSE_SUM 1
#include "softmax-body.h"

/* Nonzero keep bytes j .. j+n-1 as lane masks (n <= 8).  A short tail is
   copied out first: an 8-byte load could cross the end of the mask. */
static inline __m256i keep_lanes(const uint8_t *keep, size_t n)
{
    uint64_t bytes = 0;
    if (n == PEAK_VF_LANES)
        memcpy(&bytes, keep, PEAK_VF_LANES);
    else
        memcpy(&bytes, keep, n);
    const __m256i vk = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)bytes));
    return _mm256_cmpeq_epi32(vk, _mm256_setzero_si256());
}

/* Lanes of the n (<= 8) keys at j that pass keep and bias. */
static inline __m256 visible_lanes(const peak_softmax_row *r, size_t j, size_t n, __m256 *vbias)
{
    __m256 vvis = _mm256_castsi256_ps(peak_avx2_first_lanes(n));
    if (r->keep)
        vvis = _mm256_andnot_ps(_mm256_castsi256_ps(keep_lanes(r->keep + j, n)), vvis);
    *vbias = _mm256_setzero_ps();
    if (r->bias) {
        *vbias = _mm256_maskload_ps(r->bias + j, _mm256_castps_si256(vvis));
        vvis = _mm256_and_ps(vvis, _mm256_cmp_ps(*vbias, _mm256_set1_ps(-INFINITY), _CMP_NEQ_UQ));
    }
    return vvis;
}

/* The scores of the n (<= 8) keys at j: -inf at masked keys and past n. */
PEAK_SOFTMAX_INLINE __m256 scores_at(const peak_softmax_row *r, size_t j, size_t n, __m256 vscale,
                                     bool scaled, const peak_softmax_shaper *sh, bool shaped)
{
    __m256 vbias;
    const __m256 vvis = visible_lanes(r, j, n, &vbias);
    const __m256 vx = _mm256_maskload_ps(r->x + j, _mm256_castps_si256(vvis));
    const __m256 vs = peak_softmax_shape(scaled ? _mm256_mul_ps(vx, vscale) : vx, sh, j, shaped);
    return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), _mm256_add_ps(vs, vbias), vvis);
}

/* softmax-body.h's pass over a masked row.  The last 8 scores are
   computed first: work may be x (in place). */
PEAK_SOFTMAX_INLINE float peak_softmax_scores_masked(const peak_softmax_row *r, bool scaled,
                                                     const peak_softmax_shaper *sh, bool shaped)
{
    const __m256 vscale = _mm256_set1_ps(r->scale);
    const size_t len = r->hi - r->lo;
    if (len < PEAK_VF_LANES) {
        const __m256 vscore = scores_at(r, r->lo, len, vscale, scaled, sh, shaped);
        peak_avx2_store_first(r->work + r->lo, vscore, len);
        return peak_vf_reduce_max(vscore);
    }
    const __m256 vlast =
        scores_at(r, r->hi - PEAK_VF_LANES, PEAK_VF_LANES, vscale, scaled, sh, shaped);
    __m256 vmax = vlast;
    size_t j = r->lo;
    for (; j + PEAK_VF_LANES <= r->hi; j += PEAK_VF_LANES) {
        const __m256 vscore = scores_at(r, j, PEAK_VF_LANES, vscale, scaled, sh, shaped);
        _mm256_storeu_ps(r->work + j, vscore);
        vmax = _mm256_max_ps(vscore, vmax);
    }
    if (j < r->hi)
        _mm256_storeu_ps(r->work + r->hi - PEAK_VF_LANES, vlast);
    return peak_vf_reduce_max(vmax);
}
