/*
 * layernorm-avx512.c - residual add + LayerNorm with AVX-512 F/DQ: 16
 * floats a vector, masked row tails (nothing outside a row's d_model floats
 * is read or written).  Algorithm, accuracy and memory behaviour:
 * layernorm.h.
 *
 * Masked-off lanes load as 0, and pass 1 zeroes them again after the shift
 * (0 - shift is not 0), so a tail adds nothing to any sum.  Pass 2 reads x[j]
 * and r[j] before it writes sum[j] and y[j], which keeps the documented
 * aliases (y == x, sum == x, sum == r) safe.
 */
#include "layernorm.h"

#include "avx512/intrin-avx512.h"

static inline __mmask16 lanes(size_t left)
{
    /* one cast of the whole: ?: promotes __mmask16 operands to int */
    return (__mmask16)(left >= 16 ? 0xffffu : (1u << left) - 1u);
}

/* s = x + r (r NULL: x), rounded to float as the reference does. */
static inline __m512 load_s(const peak_layernorm_row *w, size_t j, __mmask16 m)
{
    const __m512 x = _mm512_maskz_loadu_ps(m, w->x + j);
    return w->r ? _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, w->r + j)) : x;
}

static inline __m512d lo_pd(__m512 v)
{
    return _mm512_cvtps_pd(_mm512_castps512_ps256(v));
}

static inline __m512d hi_pd(__m512 v)
{
    return _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

/* Both halves of v, widened to double, added to acc. */
static inline __m512d add_widened(__m512d acc, __m512 v)
{
    return _mm512_add_pd(acc, _mm512_add_pd(lo_pd(v), hi_pd(v)));
}

/* The shift guess: the mean of the first (up to) 16 values, each scaled
   before the sum so that no float overflows. */
static float layernorm_guess(const peak_layernorm_row *w)
{
    const size_t k = w->n < 16 ? w->n : 16;
    const __m512 s = load_s(w, 0, lanes(k));
    return _mm512_reduce_add_ps(_mm512_mul_ps(s, _mm512_set1_ps(1.0f / (float)k)));
}

/* y (and sum) for the lanes of m at j; stream: non-temporal stores (full,
   aligned vectors only). */
static inline __attribute__((always_inline)) void
norm16(const peak_layernorm_row *w, size_t j, __mmask16 m, peak_layernorm_stats st, bool stream)
{
    const __m512 s = load_s(w, j, m);
    const __m512 d = _mm512_sub_ps(_mm512_sub_ps(s, _mm512_set1_ps(st.shift)),
                                   _mm512_set1_ps(st.corr));
    const __m512 v = _mm512_mul_ps(d, _mm512_set1_ps(st.rstd));
    const __m512 g = w->gamma ? _mm512_maskz_loadu_ps(m, w->gamma + j) : _mm512_set1_ps(1.0f);
    const __m512 b = w->beta ? _mm512_maskz_loadu_ps(m, w->beta + j) : _mm512_setzero_ps();
    const __m512 y = _mm512_fmadd_ps(v, g, b);
    if (stream) {
        if (w->sum)
            _mm512_stream_ps(w->sum + j, s);
        _mm512_stream_ps(w->y + j, y);
    } else {
        if (w->sum)
            _mm512_mask_storeu_ps(w->sum + j, m, s);
        _mm512_mask_storeu_ps(w->y + j, m, y);
    }
}

/* Streaming stores need every vector of the row 64-byte aligned. */
static bool row_streams(const peak_layernorm_row *w, bool stream)
{
    return stream && ((uintptr_t)w->y & 63) == 0 && ((uintptr_t)w->sum & 63) == 0;
}

/* Floats a lane of each of the four accumulator pairs sees per block
   before the block is widened into double: 4, which keeps D2 good to a few
   float roundings (layernorm.h). */
#define LAYERNORM_BLOCK 256

/* Pass 1 of w about shift; with cur, pass 2 of cur in the same loop, a
   vector of cur for each vector of w (both rows have n floats). */
static inline __attribute__((always_inline)) void dev_rows(const peak_layernorm_row *w, float shift,
                                                           double *d1, double *d2,
                                                           const peak_layernorm_row *cur,
                                                           peak_layernorm_stats st, bool stream)
{
    const size_t n = w->n;
    const __m512 vshift = _mm512_set1_ps(shift);
    __m512d acc1 = _mm512_setzero_pd(), acc2 = _mm512_setzero_pd();
    for (size_t j0 = 0; j0 < n; j0 += LAYERNORM_BLOCK) {
        const size_t end = n - j0 < LAYERNORM_BLOCK ? n : j0 + LAYERNORM_BLOCK;
        /* Four independent chains per sum: each add/FMA waits on its own
           result only every fourth vector, so latency is not the limit. */
        __m512 s1a = _mm512_setzero_ps(), s2a = _mm512_setzero_ps();
        __m512 s1b = _mm512_setzero_ps(), s2b = _mm512_setzero_ps();
        __m512 s1c = _mm512_setzero_ps(), s2c = _mm512_setzero_ps();
        __m512 s1d = _mm512_setzero_ps(), s2d = _mm512_setzero_ps();
        size_t j = j0;
        for (; j + 64 <= end; j += 64) {
            for (size_t k = 0; k < 64; k += 16) {
                peak_layernorm_prefetch(w->pf_x, j + k);
                peak_layernorm_prefetch(w->pf_r, j + k);
            }
            const __m512 da = _mm512_sub_ps(load_s(w, j, 0xffff), vshift);
            const __m512 db = _mm512_sub_ps(load_s(w, j + 16, 0xffff), vshift);
            const __m512 dc = _mm512_sub_ps(load_s(w, j + 32, 0xffff), vshift);
            const __m512 dd = _mm512_sub_ps(load_s(w, j + 48, 0xffff), vshift);
            s1a = _mm512_add_ps(s1a, da);
            s2a = _mm512_fmadd_ps(da, da, s2a);
            s1b = _mm512_add_ps(s1b, db);
            s2b = _mm512_fmadd_ps(db, db, s2b);
            s1c = _mm512_add_ps(s1c, dc);
            s2c = _mm512_fmadd_ps(dc, dc, s2c);
            s1d = _mm512_add_ps(s1d, dd);
            s2d = _mm512_fmadd_ps(dd, dd, s2d);
            if (cur)
                for (size_t k = 0; k < 64; k += 16)
                    norm16(cur, j + k, 0xffff, st, stream);
        }
        for (; j < end; j += 16) {
            const __mmask16 m = lanes(end - j);
            peak_layernorm_prefetch(w->pf_x, j);
            peak_layernorm_prefetch(w->pf_r, j);
            const __m512 d = _mm512_maskz_sub_ps(m, load_s(w, j, m), vshift);
            s1a = _mm512_add_ps(s1a, d);
            s2a = _mm512_fmadd_ps(d, d, s2a);
            if (cur) /* a partial vector ends the row: never streamed */
                norm16(cur, j, m, st, stream && m == 0xffff);
        }
        acc1 = add_widened(acc1, _mm512_add_ps(_mm512_add_ps(s1a, s1b), _mm512_add_ps(s1c, s1d)));
        acc2 = add_widened(acc2, _mm512_add_ps(_mm512_add_ps(s2a, s2b), _mm512_add_ps(s2c, s2d)));
    }
    *d1 = _mm512_reduce_add_pd(acc1);
    *d2 = _mm512_reduce_add_pd(acc2);
}

PEAK_LAYERNORM_DEFINE_PASSES(dev_rows, row_streams)

static void layernorm_norm(const peak_layernorm_row *w, peak_layernorm_stats st, bool stream)
{
    const bool nt = row_streams(w, stream);
    for (size_t j = 0; j < w->n; j += 16) {
        const __mmask16 m = lanes(w->n - j);
        norm16(w, j, m, st, nt && m == 0xffff);
    }
}

void peak_f32_add_layernorm__avx512(float *y, ptrdiff_t ld_y, float *sum, ptrdiff_t ld_sum,
                                    const float *x, ptrdiff_t ld_x, const float *r,
                                    ptrdiff_t ld_r, const float *gamma, const float *beta,
                                    size_t rows, size_t d_model, float eps)
{
    const peak_layernorm_args a = {y, ld_y, sum,   ld_sum, x,    ld_x,
                                   r, ld_r, gamma, beta,   rows, d_model};
    peak_layernorm_run(&a, eps, layernorm_guess, layernorm_dev, layernorm_norm, layernorm_fused);
    /* Streaming stores (large calls) are weakly ordered: fence them. */
    _mm_sfence();
}
