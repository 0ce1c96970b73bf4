/*
 * softmax-avx512.c - masked softmax, 16 floats at a time (peak_softmax in
 * peak.h; the row algorithm, its special rows, the row groups and the
 * streamed outputs: softmax.h).
 *
 * Passes per row over the visible range only: max, then the terms
 * 2^-k e^(s - shift) stored, their sum, then the scaling by 1/sum.  One
 * exponential per visible score (exp-avx512.h, exp.h): a clamp,
 * a rounding FMA, a Cody-Waite reduction in two FMAs, a degree-6
 * polynomial and a power of two from exponent bits, 13 instructions per
 * 16 scores besides the load and store; the sum reads them back, 16 at a
 * time into two vectors of doubles (6 instructions).  A row stays in L1
 * between passes.  Masked keys outside the range cost one store each, so
 * a causal softmax does about half the work of a full one.
 *
 * Tails use AVX-512 masked loads and stores: no byte outside a row, and no
 * masked score, keep byte behind a masked structural key or bias behind a
 * false keep byte, is ever read.
 *
 * Accuracy (the budget: softmax.h): within 3.58 ULP of the exact
 * softmax for every probability >= FLT_MIN.  The same bits as the AVX2
 * and NEON tiers (the same operations, the sum in the same order), so
 * measured there and on the emulated AVX-512 tier of tests/: at most 2.92
 * ULP.  This CPU's own AVX-512 was not available to run it.
 */
#include "internal.h"
#include "softmax.h"
#include "avx512/exp-avx512.h"

#include <assert.h>
#include "avx512/intrin-avx512.h"

#define LANES 16

/* The first n lanes, 0 <= n <= 16. */
static inline __mmask16 first_lanes(size_t n)
{
    return (__mmask16)((1u << n) - 1u);
}

/* ---- pass 1: the maximum -------------------------------------------------- */

/* s = x * scale, or x itself when the row is unscaled (x * 1 == x). */
PEAK_SOFTMAX_INLINE __m512 score(__m512 vx, __m512 vscale, bool scaled)
{
    return scaled ? _mm512_mul_ps(vx, vscale) : vx;
}

/* MAXPS returns its second operand when either is NaN: with the running
   maximum second, a NaN score is skipped here and caught by the sum. */
PEAK_SOFTMAX_INLINE float max_dense(const float *x, size_t n, float scale, bool scaled)
{
    const __m512 vscale = _mm512_set1_ps(scale);
    const __m512 vminf = _mm512_set1_ps(-INFINITY);
    __m512 vmax0 = vminf, vmax1 = vminf, vmax2 = vminf, vmax3 = vminf;
    size_t j = 0;
    for (; j + 4 * LANES <= n; j += 4 * LANES) {
        vmax0 = _mm512_max_ps(score(_mm512_loadu_ps(x + j), vscale, scaled), vmax0);
        vmax1 = _mm512_max_ps(score(_mm512_loadu_ps(x + j + LANES), vscale, scaled), vmax1);
        vmax2 = _mm512_max_ps(score(_mm512_loadu_ps(x + j + 2 * LANES), vscale, scaled), vmax2);
        vmax3 = _mm512_max_ps(score(_mm512_loadu_ps(x + j + 3 * LANES), vscale, scaled), vmax3);
    }
    for (; j + LANES <= n; j += LANES)
        vmax0 = _mm512_max_ps(score(_mm512_loadu_ps(x + j), vscale, scaled), vmax0);
    if (j < n) {
        const __mmask16 k = first_lanes(n - j);
        const __m512 vs = score(_mm512_maskz_loadu_ps(k, x + j), vscale, scaled);
        vmax1 = _mm512_max_ps(_mm512_mask_mov_ps(vminf, k, vs), vmax1);
    }
    vmax0 = _mm512_max_ps(_mm512_max_ps(vmax0, vmax1), _mm512_max_ps(vmax2, vmax3));
    return _mm512_reduce_max_ps(vmax0);
}

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

/* Pass 1 of a row with element masks: work[lo, hi) gets the score at
   visible keys and -inf at masked ones (so passes 2 and 3 run unmasked,
   and e^-inf gives the masked keys their exact 0); returns the maximum. */
PEAK_SOFTMAX_INLINE float scores_masked(const peak_softmax_row *r, bool scaled)
{
    const __m512 vscale = _mm512_set1_ps(r->scale);
    const __m512 vminf = _mm512_set1_ps(-INFINITY);
    __m512 vmax = vminf;
    for (size_t j = r->lo; j < r->hi; j += LANES) {
        const __mmask16 kin = first_lanes(r->hi - j < LANES ? r->hi - j : LANES);
        __m512 vbias;
        const __mmask16 kvis = visible_lanes(r, j, kin, &vbias);
        const __m512 vx = _mm512_maskz_loadu_ps(kvis, r->x + j);
        __m512 vs = _mm512_mask_mov_ps(vminf, kvis, score(vx, vscale, scaled));
        /* Masked lanes: -inf + 0 or -inf + -inf, still -inf. */
        vs = _mm512_add_ps(vs, vbias);
        _mm512_mask_storeu_ps(r->work + j, kin, vs);
        vmax = _mm512_max_ps(vs, vmax);
    }
    return _mm512_reduce_max_ps(vmax);
}

/* ---- pass 2: exponentials and their sum ------------------------------------ */

/* 2^-k e^(s - shift) (shifted) or 2^-k e^s (not: shift is 0). */
PEAK_SOFTMAX_INLINE __m512 exp_of(__m512 vs, __m512 vshift, __m512 vlo, __m512 vmagic, bool shifted)
{
    return peak_avx512_exp_sm(shifted ? _mm512_sub_ps(vs, vshift) : vs, vlo, vmagic);
}

PEAK_SOFTMAX_INLINE void exp_store(float *dst, const float *x, size_t n, float scale,
                              const peak_softmax_exp_row *e, bool scaled, bool shifted)
{
    const __m512 vscale = _mm512_set1_ps(scale);
    const __m512 vshift = _mm512_set1_ps(e->shift);
    const __m512 vlo = _mm512_set1_ps(e->lo);
    const __m512 vmagic = _mm512_set1_ps(e->magic);
    size_t j = 0;
    for (; j + LANES <= n; j += LANES) {
        const __m512 vs = score(_mm512_loadu_ps(x + j), vscale, scaled);
        _mm512_storeu_ps(dst + j, exp_of(vs, vshift, vlo, vmagic, shifted));
    }
    if (j < n) {
        const __mmask16 k = first_lanes(n - j);
        const __m512 vs = score(_mm512_maskz_loadu_ps(k, x + j), vscale, scaled);
        _mm512_mask_storeu_ps(dst + j, k, exp_of(vs, vshift, vlo, vmagic, shifted));
    }
}

/* src[0 .. n) summed in double in the order of softmax.h (key j
   into accumulator j % 16: lanes 0-7 one vector, 8-15 the other). */
static inline double sum_double(const float *src, size_t n)
{
    __m512d vacc0 = _mm512_setzero_pd(), vacc1 = vacc0;
    size_t j = 0;
    for (; j < n; j += LANES) {
        const __mmask16 k = first_lanes(n - j < LANES ? n - j : LANES);
        const __m512 v = _mm512_maskz_loadu_ps(k, src + j); /* +0 past n adds nothing */
        vacc0 = _mm512_add_pd(vacc0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
        vacc1 = _mm512_add_pd(vacc1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
    }
    /* The fold: i + 8 here, then i + 4, i + 2, i + 1. */
    return _mm512_reduce_add_pd(_mm512_add_pd(vacc0, vacc1));
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

/* Floats from y to the next 64-byte boundary, at most n (y is
   float-aligned). */
static inline size_t to_line(const float *y, size_t n)
{
    const size_t head = ((64 - ((uintptr_t)y & 63)) & 63) / sizeof(float);
    return head < n ? head : n;
}

/* src * (hi + lo), rounded once; src * hi where lo is 0 (`two` false). */
PEAK_SOFTMAX_INLINE __m512 times_factor(__m512 v, __m512 vhi, __m512 vlo, bool two)
{
    return two ? _mm512_fmadd_ps(v, vhi, _mm512_mul_ps(v, vlo)) : _mm512_mul_ps(v, vhi);
}

/* y[j] = src[j] * factor for j < n.  Streaming: non-temporal stores for
   the whole 64-byte lines of y (VMOVNTPS needs them aligned), plain masked
   stores for the partial lines at either end. */
PEAK_SOFTMAX_INLINE void scale_store_with(float *y, const float *src, size_t n, peak_softmax_factor f,
                                     bool stream, bool two)
{
    const __m512 vhi = _mm512_set1_ps(f.hi), vlo = _mm512_set1_ps(f.lo);
    size_t j = 0;
    if (stream) {
        j = to_line(y, n);
        if (j) {
            const __mmask16 k = first_lanes(j);
            _mm512_mask_storeu_ps(y, k,
                                  times_factor(_mm512_maskz_loadu_ps(k, src), vhi, vlo, two));
        }
        for (; j + LANES <= n; j += LANES)
            _mm512_stream_ps(y + j, times_factor(_mm512_loadu_ps(src + j), vhi, vlo, two));
    } else {
        for (; j + LANES <= n; j += LANES)
            _mm512_storeu_ps(y + j, times_factor(_mm512_loadu_ps(src + j), vhi, vlo, two));
    }
    if (j < n) {
        const __mmask16 k = first_lanes(n - j);
        _mm512_mask_storeu_ps(y + j, k,
                              times_factor(_mm512_maskz_loadu_ps(k, src + j), vhi, vlo, two));
    }
}

/* f.lo == 0 (softmax.h, most rows): one multiply, the same bits as
   the FMA of e * hi + e * 0. */
PEAK_SOFTMAX_INLINE void scale_store(float *y, const float *src, size_t n, peak_softmax_factor f,
                                bool stream)
{
    if (f.lo == 0.0f)
        scale_store_with(y, src, n, f, stream, false);
    else
        scale_store_with(y, src, n, f, stream, true);
}

/* The same for zeros.  The full vectors of the plain case are stored with
   an all-ones mask: as a plain store GCC would turn the loop into a call
   to memset, which costs more than the few stores of a short row. */
PEAK_SOFTMAX_INLINE void store_zeros(float *y, size_t n, bool stream)
{
    const __m512 vzero = _mm512_setzero_ps();
    size_t j = 0;
    if (stream) {
        j = to_line(y, n);
        if (j)
            _mm512_mask_storeu_ps(y, first_lanes(j), vzero);
        for (; j + LANES <= n; j += LANES)
            _mm512_stream_ps(y + j, vzero);
    } else {
        for (; j + LANES <= n; j += LANES)
            _mm512_mask_storeu_ps(y + j, (__mmask16)0xffff, vzero);
    }
    if (j < n)
        _mm512_mask_storeu_ps(y + j, first_lanes(n - j), vzero);
}

/* ---- the kernel ------------------------------------------------------------------ */

static const peak_softmax_passes passes = {max_dense,   scores_masked, exp_store_row, sum_double,
                                           scale_store, NULL,          store_zeros};

static void softmax_group(const peak_softmax_row *rows, size_t n, bool stream)
{
    peak_softmax_softmax_group(rows, n, &passes, stream);
}

void peak_f32_softmax__avx512(float *y, const float *x, const peak_softmax_desc *desc)
{
    assert(y && x && desc);
    peak_softmax_for_each_group(y, x, desc, softmax_group);
    /* Non-temporal stores are weakly ordered: fence them before the caller
       (or another thread it signals) reads y. */
    _mm_sfence();
}
