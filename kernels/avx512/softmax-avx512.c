/*
 * softmax-avx512.c - masked softmax, 16 floats at a time (peak_softmax in
 * peak.h; the row algorithm, its special rows, the row groups and the
 * streamed outputs: softmax.h; the passes: softmax-body.h).
 *
 * Passes per row over the visible range only: max, then the terms
 * 2^-k e^(s - shift) stored, their sum, then the scaling by 1/sum.  One
 * exponential per visible score (exp-body.h, exp.h): a clamp, a rounding
 * FMA, a Cody-Waite reduction in two FMAs, a degree-6 polynomial and a
 * power of two from exponent bits, 13 instructions per 16 scores besides
 * the load and store.  A row stays in L1 between passes.  Masked keys
 * outside the range cost one store each, so a causal softmax does about
 * half the work of a full one.
 *
 * What is AVX-512's own: a masked row's scores, through mask registers: no
 * byte outside a row, and no masked score, keep byte behind a masked
 * structural key or bias behind a false keep byte, is ever read.
 *
 * Accuracy (the budget: softmax.h): within 3.58 ULP of the exact
 * softmax for every probability >= FLT_MIN.  The same bits as the AVX2
 * and NEON tiers (softmax-body.h), so measured there and on the emulated
 * AVX-512 tier of tests/: at most 2.92 ULP.  This CPU's own AVX-512 was
 * not available to run it.
 */
#include "simd/f32-avx512.h"
#include "internal.h"
#include "softmax.h"
#include "avx512/exp-avx512.h"

#include <assert.h>

#include "softmax-body.h"

/* Keys of the 16 at j (within the first k) that pass keep and bias. */
static inline __mmask16 visible_lanes(const peak_softmax_row *r, size_t j, __mmask16 k, __m512 *vbias)
{
    if (r->keep) {
        const __m128i vkeep = _mm_maskz_loadu_epi8(k, r->keep + j);
        k = _mm_mask_test_epi8_mask(k, vkeep, vkeep);
    }
    *vbias = _mm512_setzero_ps();
    if (r->bias) {
        *vbias = _mm512_maskz_loadu_ps(k, r->bias + j);
        k = _mm512_mask_cmp_ps_mask(k, *vbias, _mm512_set1_ps(-INFINITY), _CMP_NEQ_UQ);
    }
    return k;
}

/* softmax-body.h's pass over a masked row, 16 keys a mask register. */
PEAK_SOFTMAX_INLINE float peak_softmax_scores_masked(const peak_softmax_row *r, bool scaled,
                                                     const peak_softmax_shaper *sh, bool shaped)
{
    const __m512 vscale = _mm512_set1_ps(r->scale);
    const __m512 vminf = _mm512_set1_ps(-INFINITY);
    __m512 vmax = vminf;
    for (size_t j = r->lo; j < r->hi; j += PEAK_VF_LANES) {
        const __mmask16 kin = peak_avx512_first_lanes(r->hi - j);
        __m512 vbias;
        const __mmask16 kvis = visible_lanes(r, j, kin, &vbias);
        const __m512 vx = _mm512_maskz_loadu_ps(kvis, r->x + j);
        const __m512 vsx = scaled ? _mm512_mul_ps(vx, vscale) : vx;
        __m512 vs = _mm512_mask_mov_ps(vminf, kvis, peak_softmax_shape(vsx, sh, j, shaped));
        /* Masked lanes: -inf + 0 or -inf + -inf, still -inf. */
        vs = _mm512_add_ps(vs, vbias);
        _mm512_mask_storeu_ps(r->work + j, kin, vs);
        vmax = _mm512_max_ps(vs, vmax);
    }
    return _mm512_reduce_max_ps(vmax);
}
