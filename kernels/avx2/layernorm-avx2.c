/*
 * layernorm-avx2.c - residual add + LayerNorm with AVX2 + FMA: 8 floats a
 * vector; row tails load with vmaskmovps and store with
 * peak_avx2_store_first (simd/f32-avx2.h: a masked store is slow on Zen 3),
 * so nothing outside a row's d_model floats is read or written.
 * Algorithm, accuracy and memory behaviour: layernorm.h.
 *
 * Masked-off lanes load as 0, and pass 1 zeroes them again after the shift
 * (0 - shift is not 0), so a tail adds nothing to any sum.  Pass 2 reads x[j]
 * and r[j] before it writes sum[j] and y[j], which keeps the documented
 * aliases (y == x, sum == x, sum == r) safe.
 */
#include "layernorm.h"
#include "simd/f32-avx2.h"

#include <immintrin.h>

static inline __m256i lanes(size_t left)
{
    return peak_avx2_first_lanes(left < 8 ? left : 8);
}

/* s = x + r (r NULL: x), rounded to float as the reference does. */
static inline __m256 load_s(const peak_layernorm_row *w, size_t j)
{
    const __m256 x = _mm256_loadu_ps(w->x + j);
    return w->r ? _mm256_add_ps(x, _mm256_loadu_ps(w->r + j)) : x;
}

static inline __m256 load_s_masked(const peak_layernorm_row *w, size_t j, __m256i m)
{
    const __m256 x = _mm256_maskload_ps(w->x + j, m);
    return w->r ? _mm256_add_ps(x, _mm256_maskload_ps(w->r + j, m)) : x;
}

static inline __m256d lo_pd(__m256 v)
{
    return _mm256_cvtps_pd(_mm256_castps256_ps128(v));
}

static inline __m256d hi_pd(__m256 v)
{
    return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
}

/* Both halves of v, widened to double, added to acc. */
static inline __m256d add_widened(__m256d acc, __m256 v)
{
    return _mm256_add_pd(acc, _mm256_add_pd(lo_pd(v), hi_pd(v)));
}

static inline double reduce_pd(__m256d v)
{
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

/* The shift guess: the mean of the first (up to) 16 values (as many as
   the AVX-512 tier averages), each scaled before the sum so that no float
   overflows. */
static float layernorm_guess(const peak_layernorm_row *w)
{
    const size_t k = w->n < 16 ? w->n : 16;
    const __m256 scale = _mm256_set1_ps(1.0f / (float)k);
    __m256 v = _mm256_mul_ps(load_s_masked(w, 0, lanes(k)), scale);
    if (k > 8)
        v = _mm256_add_ps(v, _mm256_mul_ps(load_s_masked(w, 8, lanes(k - 8)), scale));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* y for 8 lanes, from gamma and beta's lanes g and b. */
static inline __m256 normalised(__m256 s, __m256 g, __m256 b, peak_layernorm_stats st)
{
    const __m256 d = _mm256_sub_ps(_mm256_sub_ps(s, _mm256_set1_ps(st.shift)),
                                   _mm256_set1_ps(st.corr));
    return _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(st.rstd)), g, b);
}

/* The row's last left (< 8) floats at j; m = lanes(left). */
static inline void norm_masked(const peak_layernorm_row *w, size_t j, size_t left, __m256i m,
                               peak_layernorm_stats st)
{
    const __m256 s = load_s_masked(w, j, m);
    const __m256 g = w->gamma ? _mm256_maskload_ps(w->gamma + j, m) : _mm256_set1_ps(1.0f);
    const __m256 b = w->beta ? _mm256_maskload_ps(w->beta + j, m) : _mm256_setzero_ps();
    const __m256 y = normalised(s, g, b, st);
    if (w->sum)
        peak_avx2_store_first(w->sum + j, s, left);
    peak_avx2_store_first(w->y + j, y, left);
}

/* y (and sum) for the 8 floats at j; stream: non-temporal stores (aligned
   rows only). */
static inline __attribute__((always_inline)) void norm8(const peak_layernorm_row *w, size_t j,
                                                        peak_layernorm_stats st, bool stream)
{
    const __m256 s = load_s(w, j);
    const __m256 g = w->gamma ? _mm256_loadu_ps(w->gamma + j) : _mm256_set1_ps(1.0f);
    const __m256 b = w->beta ? _mm256_loadu_ps(w->beta + j) : _mm256_setzero_ps();
    const __m256 y = normalised(s, g, b, st);
    if (stream) {
        if (w->sum)
            _mm256_stream_ps(w->sum + j, s);
        _mm256_stream_ps(w->y + j, y);
    } else {
        if (w->sum)
            _mm256_storeu_ps(w->sum + j, s);
        _mm256_storeu_ps(w->y + j, y);
    }
}

/* Streaming stores need every vector of the row 32-byte aligned. */
static bool row_streams(const peak_layernorm_row *w, bool stream)
{
    return stream && ((uintptr_t)w->y & 31) == 0 && ((uintptr_t)w->sum & 31) == 0;
}

/* Floats a block before the float accumulators are widened into double:
   each lane of each of the four accumulator pairs sees 4 terms, which keeps
   D2 good to a few float roundings (layernorm.h). */
#define LAYERNORM_BLOCK 128

/* Pass 1 of w about shift; with cur, pass 2 of cur in the same loop, a
   vector of cur for each vector of w (both rows have n floats). */
static inline __attribute__((always_inline)) void dev_rows(const peak_layernorm_row *w, float shift,
                                                           double *d1, double *d2,
                                                           const peak_layernorm_row *cur,
                                                           peak_layernorm_stats st, bool stream)
{
    const size_t n = w->n;
    const __m256 vshift = _mm256_set1_ps(shift);
    __m256d acc1 = _mm256_setzero_pd(), acc2 = _mm256_setzero_pd();
    for (size_t j0 = 0; j0 < n; j0 += LAYERNORM_BLOCK) {
        const size_t end = n - j0 < LAYERNORM_BLOCK ? n : j0 + LAYERNORM_BLOCK;
        /* Four independent chains per sum: each add/FMA waits on its own
           result only every fourth vector, so latency is not the limit. */
        __m256 s1a = _mm256_setzero_ps(), s2a = _mm256_setzero_ps();
        __m256 s1b = _mm256_setzero_ps(), s2b = _mm256_setzero_ps();
        __m256 s1c = _mm256_setzero_ps(), s2c = _mm256_setzero_ps();
        __m256 s1d = _mm256_setzero_ps(), s2d = _mm256_setzero_ps();
        size_t j = j0;
        for (; j + 32 <= end; j += 32) {
            for (size_t k = 0; k < 32; k += 16) {
                peak_layernorm_prefetch(w->pf_x, j + k);
                peak_layernorm_prefetch(w->pf_r, j + k);
            }
            const __m256 da = _mm256_sub_ps(load_s(w, j), vshift);
            const __m256 db = _mm256_sub_ps(load_s(w, j + 8), vshift);
            const __m256 dc = _mm256_sub_ps(load_s(w, j + 16), vshift);
            const __m256 dd = _mm256_sub_ps(load_s(w, j + 24), vshift);
            s1a = _mm256_add_ps(s1a, da);
            s2a = _mm256_fmadd_ps(da, da, s2a);
            s1b = _mm256_add_ps(s1b, db);
            s2b = _mm256_fmadd_ps(db, db, s2b);
            s1c = _mm256_add_ps(s1c, dc);
            s2c = _mm256_fmadd_ps(dc, dc, s2c);
            s1d = _mm256_add_ps(s1d, dd);
            s2d = _mm256_fmadd_ps(dd, dd, s2d);
            if (cur)
                for (size_t k = 0; k < 32; k += 8)
                    norm8(cur, j + k, st, stream);
        }
        for (; j < end; j += 8) {
            const __m256i m = lanes(end - j);
            peak_layernorm_prefetch(w->pf_x, j);
            peak_layernorm_prefetch(w->pf_r, j);
            const __m256 d = _mm256_and_ps(_mm256_sub_ps(load_s_masked(w, j, m), vshift),
                                           _mm256_castsi256_ps(m));
            s1a = _mm256_add_ps(s1a, d);
            s2a = _mm256_fmadd_ps(d, d, s2a);
            if (cur && end - j >= 8)
                norm8(cur, j, st, stream);
            else if (cur) /* a partial vector ends the row */
                norm_masked(cur, j, end - j, m, st);
        }
        acc1 = add_widened(acc1, _mm256_add_ps(_mm256_add_ps(s1a, s1b), _mm256_add_ps(s1c, s1d)));
        acc2 = add_widened(acc2, _mm256_add_ps(_mm256_add_ps(s2a, s2b), _mm256_add_ps(s2c, s2d)));
    }
    *d1 = reduce_pd(acc1);
    *d2 = reduce_pd(acc2);
}

PEAK_LAYERNORM_DEFINE_PASSES(dev_rows, row_streams)

static void layernorm_norm(const peak_layernorm_row *w, peak_layernorm_stats st, bool stream)
{
    const bool nt = row_streams(w, stream);
    size_t j = 0;
    for (; j + 8 <= w->n; j += 8)
        norm8(w, j, st, nt);
    if (j < w->n)
        norm_masked(w, j, w->n - j, lanes(w->n - j), st);
}

void peak_f32_add_layernorm__avx2(float *y, ptrdiff_t ld_y, float *sum, ptrdiff_t ld_sum,
                                  const float *x, ptrdiff_t ld_x, const float *r, ptrdiff_t ld_r,
                                  const float *gamma, const float *beta, size_t rows,
                                  size_t d_model, float eps)
{
    const peak_layernorm_args a = {y, ld_y, sum,   ld_sum, x,    ld_x,
                                   r, ld_r, gamma, beta,   rows, d_model};
    peak_layernorm_run(&a, eps, layernorm_guess, layernorm_dev, layernorm_norm, layernorm_fused);
    /* Streaming stores (large calls) are weakly ordered: fence them. */
    _mm_sfence();
}
