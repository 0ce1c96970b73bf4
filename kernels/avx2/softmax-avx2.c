/*
 * softmax-avx2.c - masked softmax, 8 floats at a time with AVX2 + FMA
 * (peak_softmax in peak.h; the row algorithm, its special rows, the row
 * groups and the streamed outputs: softmax.h).
 *
 * The AVX-512 tier's passes (softmax-avx512.c) with 8 lanes, and the same
 * exponential (exp-avx2.h, exp.h): the same bits.
 *
 * Tails are read with VMASKMOVPS and a mask from a sliding window over a
 * table: no byte outside a row, no masked score, and no keep byte or bias
 * behind a masked key is read.  (A masked-off lane of VMASKMOVPS never
 * faults.)  They are written without it: a VMASKMOVPS store costs about
 * 10x a plain one on Zen 3 (4.5-5.3 ns against 0.5 ns, L1-resident), so a
 * row of 8 keys or more ends with a plain store of its last 8 (overlapping
 * the vector before it, with the same bits), and a shorter stretch is
 * written by peak_avx2_store_first's narrower plain stores.
 *
 * Accuracy (the budget: softmax.h): within 3.58 ULP of the exact
 * softmax for every probability >= FLT_MIN; measured at most 2.92 ULP over
 * 22M probabilities down to FLT_MIN (bench/accuracy.c, "wide").
 */
#include "internal.h"
#include "softmax.h"
#include "avx2/exp-avx2.h"
#include "simd/f32-avx2.h"

#include <assert.h>
#include <immintrin.h>
#include <string.h>

#define LANES 8


static inline float hmax(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* ---- pass 1: the maximum -------------------------------------------------- */

PEAK_SOFTMAX_INLINE __m256 score(__m256 vx, __m256 vscale, bool scaled)
{
    return scaled ? _mm256_mul_ps(vx, vscale) : vx;
}

/* MAXPS returns its second operand when either is NaN: with the running
   maximum second, a NaN score is skipped here and caught by the sum. */
PEAK_SOFTMAX_INLINE float max_dense(const float *x, size_t n, float scale, bool scaled)
{
    const __m256 vscale = _mm256_set1_ps(scale);
    const __m256 vminf = _mm256_set1_ps(-INFINITY);
    __m256 vmax0 = vminf, vmax1 = vminf, vmax2 = vminf, vmax3 = vminf;
    size_t j = 0;
    for (; j + 4 * LANES <= n; j += 4 * LANES) {
        vmax0 = _mm256_max_ps(score(_mm256_loadu_ps(x + j), vscale, scaled), vmax0);
        vmax1 = _mm256_max_ps(score(_mm256_loadu_ps(x + j + LANES), vscale, scaled), vmax1);
        vmax2 = _mm256_max_ps(score(_mm256_loadu_ps(x + j + 2 * LANES), vscale, scaled), vmax2);
        vmax3 = _mm256_max_ps(score(_mm256_loadu_ps(x + j + 3 * LANES), vscale, scaled), vmax3);
    }
    for (; j + LANES <= n; j += LANES)
        vmax0 = _mm256_max_ps(score(_mm256_loadu_ps(x + j), vscale, scaled), vmax0);
    if (j < n) {
        const __m256i vk = peak_avx2_first_lanes(n - j);
        const __m256 vs = score(_mm256_maskload_ps(x + j, vk), vscale, scaled);
        vmax1 = _mm256_max_ps(_mm256_blendv_ps(vminf, vs, _mm256_castsi256_ps(vk)), vmax1);
    }
    vmax0 = _mm256_max_ps(_mm256_max_ps(vmax0, vmax1), _mm256_max_ps(vmax2, vmax3));
    return hmax(vmax0);
}

/* Nonzero keep bytes j .. j+n-1 as lane masks (n <= 8).  A short tail is
   copied out first: an 8-byte load could cross the end of the mask. */
static inline __m256i keep_lanes(const uint8_t *keep, size_t n)
{
    uint64_t bytes = 0;
    if (n == LANES)
        memcpy(&bytes, keep, LANES);
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
                                     bool scaled)
{
    __m256 vbias;
    const __m256 vvis = visible_lanes(r, j, n, &vbias);
    const __m256 vx = _mm256_maskload_ps(r->x + j, _mm256_castps_si256(vvis));
    const __m256 vs = _mm256_add_ps(score(vx, vscale, scaled), vbias);
    return _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), vs, vvis);
}

/* Pass 1 of a row with element masks: work[lo, hi) gets the score at
   visible keys and -inf at masked ones (so passes 2 and 3 run unmasked,
   and e^-inf gives the masked keys their exact 0); returns the maximum.
   The last 8 scores are computed first: work may be x (in place). */
PEAK_SOFTMAX_INLINE float scores_masked(const peak_softmax_row *r, bool scaled)
{
    const __m256 vscale = _mm256_set1_ps(r->scale);
    const size_t len = r->hi - r->lo;
    if (len < LANES) {
        const __m256 vscore = scores_at(r, r->lo, len, vscale, scaled);
        peak_avx2_store_first(r->work + r->lo, vscore, len);
        return hmax(vscore);
    }
    const __m256 vlast = scores_at(r, r->hi - LANES, LANES, vscale, scaled);
    __m256 vmax = vlast;
    size_t j = r->lo;
    for (; j + LANES <= r->hi; j += LANES) {
        const __m256 vscore = scores_at(r, j, LANES, vscale, scaled);
        _mm256_storeu_ps(r->work + j, vscore);
        vmax = _mm256_max_ps(vscore, vmax);
    }
    if (j < r->hi)
        _mm256_storeu_ps(r->work + r->hi - LANES, vlast);
    return hmax(vmax);
}

/* ---- pass 2: exponentials and their sum ------------------------------------ */

/* 2^-k e^(s - shift) (shifted) or 2^-k e^s (not: shift is 0). */
PEAK_SOFTMAX_INLINE __m256 exp_of(__m256 vs, __m256 vshift, __m256 vlo, __m256 vmagic, bool shifted)
{
    return peak_avx2_exp_sm(shifted ? _mm256_sub_ps(vs, vshift) : vs, vlo, vmagic);
}

PEAK_SOFTMAX_INLINE void exp_store(float *dst, const float *x, size_t n, float scale,
                              const peak_softmax_exp_row *e, bool scaled, bool shifted)
{
    const __m256 vscale = _mm256_set1_ps(scale);
    const __m256 vshift = _mm256_set1_ps(e->shift);
    const __m256 vlo = _mm256_set1_ps(e->lo);
    const __m256 vmagic = _mm256_set1_ps(e->magic);
    if (n < LANES) {
        const __m256 vs = score(_mm256_maskload_ps(x, peak_avx2_first_lanes(n)), vscale, scaled);
        if (n)
            peak_avx2_store_first(dst, exp_of(vs, vshift, vlo, vmagic, shifted), n);
        return;
    }
    /* Read before any store: dst may be x. */
    const __m256 vxlast = _mm256_loadu_ps(x + n - LANES);
    size_t j = 0;
    for (; j + LANES <= n; j += LANES) {
        const __m256 vs = score(_mm256_loadu_ps(x + j), vscale, scaled);
        _mm256_storeu_ps(dst + j, exp_of(vs, vshift, vlo, vmagic, shifted));
    }
    if (j < n)
        _mm256_storeu_ps(dst + n - LANES,
                         exp_of(score(vxlast, vscale, scaled), vshift, vlo, vmagic, shifted));
}

/* v[0] + v[1] + v[2] + v[3] as (v[0] + v[2]) + (v[1] + v[3]). */
static inline double hsum(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}

/* A row's sum in the order of softmax.h (PEAK_SOFTMAX_SUM_LANES
   accumulators, key j into j % 16): accumulator i + 4q is lane i of a[q].
   A pass over the stored terms, which are still in L1, run in the loop of
   another row's scaling (scale_store_sum): summed inside the exponential's
   loop, in double or compensated in float, the whole kernel took 1.1-1.4x
   as long (Zen 3, rows of 128 keys; doc/perf-notes.md). */
typedef struct sum_acc {
    __m256d a0, a1, a2, a3;
} sum_acc;

static inline sum_acc sum_start(void)
{
    const sum_acc s = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                       _mm256_setzero_pd()};
    return s;
}

/* Keys src[0 .. 16) into their accumulators. */
static inline void sum_add16(sum_acc *s, const float *src)
{
    s->a0 = _mm256_add_pd(s->a0, _mm256_cvtps_pd(_mm_loadu_ps(src)));
    s->a1 = _mm256_add_pd(s->a1, _mm256_cvtps_pd(_mm_loadu_ps(src + 4)));
    s->a2 = _mm256_add_pd(s->a2, _mm256_cvtps_pd(_mm_loadu_ps(src + 8)));
    s->a3 = _mm256_add_pd(s->a3, _mm256_cvtps_pd(_mm_loadu_ps(src + 12)));
}

/* Keys src[j .. n) (j a multiple of 16) into s, then the fold. */
static inline double sum_finish(sum_acc s, const float *src, size_t j, size_t n)
{
    for (; j + 2 * LANES <= n; j += 2 * LANES)
        sum_add16(&s, src + j);
    if (j < n) { /* masked-off lanes load +0, which adds nothing */
        const size_t n0 = n - j < LANES ? n - j : LANES;
        const __m256 v0 = _mm256_maskload_ps(src + j, peak_avx2_first_lanes(n0));
        const __m256 v1 = _mm256_maskload_ps(src + j + LANES, peak_avx2_first_lanes(n - j - n0));
        s.a0 = _mm256_add_pd(s.a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v0)));
        s.a1 = _mm256_add_pd(s.a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v0, 1)));
        s.a2 = _mm256_add_pd(s.a2, _mm256_cvtps_pd(_mm256_castps256_ps128(v1)));
        s.a3 = _mm256_add_pd(s.a3, _mm256_cvtps_pd(_mm256_extractf128_ps(v1, 1)));
    }
    /* The fold: i + 8, i + 4, then hsum's i + 2 and i + 1. */
    return hsum(_mm256_add_pd(_mm256_add_pd(s.a0, s.a2), _mm256_add_pd(s.a1, s.a3)));
}

static inline double sum_double(const float *src, size_t n)
{
    return sum_finish(sum_start(), src, 0, n);
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
   float-aligned).  Non-temporal stores write whole lines from there, two
   vectors a line, so that no line is flushed half-written. */
static inline size_t to_line(const float *y, size_t n)
{
    const size_t head = ((64 - ((uintptr_t)y & 63)) & 63) / sizeof(float);
    return head < n ? head : n;
}

/* src * (hi + lo), rounded once; src * hi where lo is 0 (`two` false). */
PEAK_SOFTMAX_INLINE __m256 times_factor(__m256 v, __m256 vhi, __m256 vlo, bool two)
{
    return two ? _mm256_fmadd_ps(v, vhi, _mm256_mul_ps(v, vlo)) : _mm256_mul_ps(v, vhi);
}

/* y[j] = src[j] * factor for 0 < j < n < 8. */
PEAK_SOFTMAX_INLINE void scale_store_short(float *y, const float *src, size_t n, __m256 vhi, __m256 vlo,
                                      bool two)
{
    const __m256 v = _mm256_maskload_ps(src, peak_avx2_first_lanes(n));
    peak_avx2_store_first(y, times_factor(v, vhi, vlo, two), n);
}

/* y[j] = src[j] * factor for j < n, and (`sum`) the sum of next[0 .. m)
   in the same loop, returned (0 if not `sum`).  Streaming: non-temporal
   stores from the first 64-byte line boundary on, plain stores inside the
   partial lines at either end (none into a streamed line: that would read
   it back from memory).  Not streaming: the last 8 are read before any
   store, since src may be y. */
PEAK_SOFTMAX_INLINE double scale_store_with(float *y, const float *src, size_t n, peak_softmax_factor f,
                                            bool stream, bool two, bool sum, const float *next,
                                            size_t m)
{
    const __m256 vhi = _mm256_set1_ps(f.hi), vlo = _mm256_set1_ps(f.lo);
    sum_acc acc = sum_start();
    size_t t = 0; /* next[0 .. t) summed */
    size_t j = 0;
    if (stream) {
        j = to_line(y, n);
        if (j >= LANES) {
            const __m256 v0 = times_factor(_mm256_loadu_ps(src), vhi, vlo, two);
            const __m256 v1 = times_factor(_mm256_loadu_ps(src + j - LANES), vhi, vlo, two);
            _mm256_storeu_ps(y, v0);
            _mm256_storeu_ps(y + j - LANES, v1);
        } else if (j) {
            scale_store_short(y, src, j, vhi, vlo, two);
        }
        if (sum)
            for (; j + 2 * LANES <= n && t + 2 * LANES <= m; j += 2 * LANES, t += 2 * LANES) {
                _mm256_stream_ps(y + j, times_factor(_mm256_loadu_ps(src + j), vhi, vlo, two));
                _mm256_stream_ps(y + j + LANES,
                                 times_factor(_mm256_loadu_ps(src + j + LANES), vhi, vlo, two));
                sum_add16(&acc, next + t);
            }
        for (; j + LANES <= n; j += LANES)
            _mm256_stream_ps(y + j, times_factor(_mm256_loadu_ps(src + j), vhi, vlo, two));
        if (j < n)
            scale_store_short(y + j, src + j, n - j, vhi, vlo, two);
    } else if (n < LANES) {
        if (n)
            scale_store_short(y, src, n, vhi, vlo, two);
    } else {
        const __m256 vlast = _mm256_loadu_ps(src + n - LANES);
        if (sum)
            for (; j + 2 * LANES <= n && t + 2 * LANES <= m; j += 2 * LANES, t += 2 * LANES) {
                _mm256_storeu_ps(y + j, times_factor(_mm256_loadu_ps(src + j), vhi, vlo, two));
                _mm256_storeu_ps(y + j + LANES,
                                 times_factor(_mm256_loadu_ps(src + j + LANES), vhi, vlo, two));
                sum_add16(&acc, next + t);
            }
        for (; j + LANES <= n; j += LANES)
            _mm256_storeu_ps(y + j, times_factor(_mm256_loadu_ps(src + j), vhi, vlo, two));
        if (j < n)
            _mm256_storeu_ps(y + n - LANES, times_factor(vlast, vhi, vlo, two));
    }
    return sum ? sum_finish(acc, next, t, m) : 0.0;
}

/* f.lo == 0 (softmax.h, most rows): one multiply, the same bits as
   the FMA of e * hi + e * 0. */
PEAK_SOFTMAX_INLINE void scale_store(float *y, const float *src, size_t n, peak_softmax_factor f,
                                bool stream)
{
    /* No sum: `next` is never read; src rather than NULL keeps cppcheck's
       path analysis from adding an offset to a null pointer. */
    if (f.lo == 0.0f)
        scale_store_with(y, src, n, f, stream, false, false, src, 0);
    else
        scale_store_with(y, src, n, f, stream, true, false, src, 0);
}

/* scale_store, and the sum of next[0 .. m) in its loop (softmax.h). */
PEAK_SOFTMAX_INLINE double scale_store_sum(float *y, const float *src, size_t n, peak_softmax_factor f,
                                           bool stream, const float *next, size_t m)
{
    if (f.lo == 0.0f)
        return scale_store_with(y, src, n, f, stream, false, true, next, m);
    return scale_store_with(y, src, n, f, stream, true, true, next, m);
}

/* The same for zeros. */
PEAK_SOFTMAX_INLINE void store_zeros(float *y, size_t n, bool stream)
{
    __m256 vzero = _mm256_setzero_ps();
    /* Hidden from the optimiser: a loop of known zeros becomes a call to
       memset, which costs more than the few stores of a short row. */
    __asm__("" : "+x"(vzero));
    size_t j = 0;
    if (stream) {
        j = to_line(y, n);
        if (j >= LANES) {
            _mm256_storeu_ps(y, vzero);
            _mm256_storeu_ps(y + j - LANES, vzero);
        } else if (j) {
            peak_avx2_store_first(y, vzero, j);
        }
        for (; j + LANES <= n; j += LANES)
            _mm256_stream_ps(y + j, vzero);
        if (j < n)
            peak_avx2_store_first(y + j, vzero, n - j);
        return;
    }
    if (n < LANES) {
        if (n)
            peak_avx2_store_first(y, vzero, n);
        return;
    }
    for (; j + LANES <= n; j += LANES)
        _mm256_storeu_ps(y + j, vzero);
    if (j < n)
        _mm256_storeu_ps(y + n - LANES, vzero);
}

/* ---- the kernel ------------------------------------------------------------------ */

static const peak_softmax_passes passes = {max_dense,   scores_masked, exp_store_row,  sum_double,
                                           scale_store, scale_store_sum, store_zeros};

static void softmax_group(const peak_softmax_row *rows, size_t n, bool stream)
{
    peak_softmax_softmax_group(rows, n, &passes, stream);
}

void peak_f32_softmax__avx2(float *y, const float *x, const peak_softmax_desc *desc)
{
    assert(y && x && desc);
    peak_softmax_for_each_group(y, x, desc, softmax_group);
    /* Non-temporal stores are weakly ordered: fence them before the caller
       (or another thread it signals) reads y. */
    _mm_sfence();
}
