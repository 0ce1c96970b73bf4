/*
 * attention-avx2.c - fused masked attention on AVX2 + FMA (peak_attention).
 *
 * The tiling, masks and special rows are attention.h's; this file holds
 * the micro-kernels, with 8 query rows per ymm, blocks of 64 rows and tiles
 * of 64 keys.  With 16 registers a micro-tile is 6 keys (or V columns) x
 * 2 row vectors: 12 accumulators, 2 vector loads and one broadcast at a
 * time, 8 loads per 12 FMAs.  64 = 6 * 10 + 4, so the last 4 keys or
 * columns of a full tile take a 4-wide pass rather than four 1-wide ones.
 * Exponentials are exp-avx2.h's 2^t, t = (s - m) * log2(e) (subtracting
 * first keeps t to one rounding for scores of 1e4 and more).
 */
#include "avx2/exp-avx2.h"
#include "internal.h"
#include "simd/f32-avx2.h"

#include <immintrin.h>

#define PEAK_ATTENTION_VW 8
#define PEAK_ATTENTION_BQ 64
#define PEAK_ATTENTION_BC 64
#define PEAK_ATTENTION_T8X8_IN peak_avx2_t8x8_in
#define PEAK_ATTENTION_T8X8_OUT peak_avx2_t8x8_out
#include "simd/transpose-avx2.h"
#include "attention.h"

#define NJ 6  /* keys (or V columns) per micro-tile */
#define NRV 2 /* row vectors per micro-tile */

#define INLINE static inline __attribute__((always_inline))

/* S^T[jj][.] * scale for keys kp[0 .. nj-1] and nrv row vectors (st, qt
   and tmax point at the first row), and their max into tmax; constants
   after inlining. */
INLINE void scores_core(float *st, const float *const *kp, const float *qt, size_t dh, float scale,
                        float *tmax, int nj, int nrv)
{
    __m256 acc[NJ][NRV];
#pragma GCC unroll 6
    for (int jj = 0; jj < nj; jj++)
#pragma GCC unroll 2
        for (int rr = 0; rr < nrv; rr++)
            acc[jj][rr] = _mm256_setzero_ps();
    for (size_t c = 0; c < dh; c++) {
        __m256 vq[NRV];
#pragma GCC unroll 2
        for (int rr = 0; rr < nrv; rr++)
            vq[rr] = _mm256_load_ps(qt + c * PEAK_ATTENTION_BQ + rr * PEAK_ATTENTION_VW);
#pragma GCC unroll 6
        for (int jj = 0; jj < nj; jj++) {
            const __m256 vk = _mm256_broadcast_ss(kp[jj] + c);
#pragma GCC unroll 2
            for (int rr = 0; rr < nrv; rr++)
                acc[jj][rr] = _mm256_fmadd_ps(vk, vq[rr], acc[jj][rr]);
        }
    }
    const __m256 vscale = _mm256_set1_ps(scale);
    __m256 vmax[NRV];
#pragma GCC unroll 2
    for (int rr = 0; rr < nrv; rr++)
        vmax[rr] = _mm256_load_ps(tmax + rr * PEAK_ATTENTION_VW);
#pragma GCC unroll 6
    for (int jj = 0; jj < nj; jj++)
#pragma GCC unroll 2
        for (int rr = 0; rr < nrv; rr++) {
            const __m256 vs = _mm256_mul_ps(acc[jj][rr], vscale);
            _mm256_store_ps(st + jj * PEAK_ATTENTION_BQ + rr * PEAK_ATTENTION_VW, vs);
            vmax[rr] = _mm256_max_ps(vmax[rr], vs);
        }
#pragma GCC unroll 2
    for (int rr = 0; rr < nrv; rr++)
        _mm256_store_ps(tmax + rr * PEAK_ATTENTION_VW, vmax[rr]);
}

/* O^T[0 .. nc-1][.] += sum_j V[j][c] P^T[j][.] (oacc and v point at the
   first column). */
INLINE void pv_core(float *oacc, const float *v, size_t ldv, const float *pt, size_t n, int nc,
                    int nrv)
{
    __m256 acc[NJ][NRV];
#pragma GCC unroll 6
    for (int cc = 0; cc < nc; cc++)
#pragma GCC unroll 2
        for (int rr = 0; rr < nrv; rr++)
            acc[cc][rr] =
                _mm256_load_ps(oacc + (size_t)cc * PEAK_ATTENTION_BQ + rr * PEAK_ATTENTION_VW);
    for (size_t j = 0; j < n; j++) {
        __m256 vpt[NRV];
        const float *vj = v + j * ldv;
#pragma GCC unroll 2
        for (int rr = 0; rr < nrv; rr++)
            vpt[rr] = _mm256_load_ps(pt + j * PEAK_ATTENTION_BQ + rr * PEAK_ATTENTION_VW);
#pragma GCC unroll 6
        for (int cc = 0; cc < nc; cc++) {
            const __m256 vv = _mm256_broadcast_ss(vj + cc);
#pragma GCC unroll 2
            for (int rr = 0; rr < nrv; rr++)
                acc[cc][rr] = _mm256_fmadd_ps(vv, vpt[rr], acc[cc][rr]);
        }
    }
#pragma GCC unroll 6
    for (int cc = 0; cc < nc; cc++)
#pragma GCC unroll 2
        for (int rr = 0; rr < nrv; rr++)
            _mm256_store_ps(oacc + (size_t)cc * PEAK_ATTENTION_BQ + rr * PEAK_ATTENTION_VW,
                            acc[cc][rr]);
}

PEAK_ATTENTION_DEFINE_ROW_PAIR_DRIVERS(NJ)

/* ---- the row path ---------------------------------------------------------- */

/* Lanes < n set (VMASKMOVPS loads never touch the others' memory; stores
   go through peak_avx2_store_first, simd/f32-avx2.h). */
static __m256i tail_mask(size_t n)
{
    const int k = n >= PEAK_ATTENTION_VW ? PEAK_ATTENTION_VW : (int)n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Columns [c0, c0 + 4 vectors) of the accumulator, all inside dv: plain
   loads and stores (a VMASKMOVPS store costs about 4x a plain one on Zen 3,
   simd/f32-avx2.h). */
static void row_pv_cols4(float *acc, float alpha, const float *p, const float *const *vp,
                         size_t n, size_t c0)
{
    __m256 va[4];
    const __m256 valpha = _mm256_set1_ps(alpha);
    for (int v = 0; v < 4; v++)
        va[v] = _mm256_mul_ps(_mm256_loadu_ps(acc + c0 + (size_t)v * PEAK_ATTENTION_VW), valpha);
    for (size_t j = 0; j < n; j++) {
        if (!vp[j])
            continue; /* a masked key: its V row is not read */
        const __m256 vp_ = _mm256_set1_ps(p[j]);
        for (int v = 0; v < 4; v++)
            va[v] = _mm256_fmadd_ps(
                vp_, _mm256_loadu_ps(vp[j] + c0 + (size_t)v * PEAK_ATTENTION_VW), va[v]);
    }
    for (int v = 0; v < 4; v++)
        _mm256_storeu_ps(acc + c0 + (size_t)v * PEAK_ATTENTION_VW, va[v]);
}

/* Columns [c0, c0 + 4 vectors) of the accumulator, in registers over the
   tile's keys; vectors past dv stay zero and are not stored, a partial
   one's first dv - c lanes are. */
static void row_pv_cols(float *acc, float alpha, const float *p, const float *const *vp, size_t n,
                        size_t c0, size_t dv)
{
    __m256i k[4];
    __m256 va[4];
    const __m256 valpha = _mm256_set1_ps(alpha);
    for (int v = 0; v < 4; v++) {
        const size_t c = c0 + (size_t)v * PEAK_ATTENTION_VW;
        k[v] = tail_mask(c < dv ? dv - c : 0);
        va[v] = _mm256_mul_ps(_mm256_maskload_ps(acc + (c < dv ? c : 0), k[v]), valpha);
    }
    for (size_t j = 0; j < n; j++) {
        if (!vp[j])
            continue; /* a masked key: its V row is not read */
        const __m256 vp_ = _mm256_set1_ps(p[j]);
        for (int v = 0; v < 4; v++) {
            const size_t c = c0 + (size_t)v * PEAK_ATTENTION_VW;
            va[v] = _mm256_fmadd_ps(vp_, _mm256_maskload_ps(vp[j] + (c < dv ? c : 0), k[v]), va[v]);
        }
    }
    for (int v = 0; v < 4; v++) {
        const size_t c = c0 + (size_t)v * PEAK_ATTENTION_VW;
        if (c + PEAK_ATTENTION_VW <= dv)
            _mm256_storeu_ps(acc + c, va[v]);
        else if (c < dv)
            peak_avx2_store_first(acc + c, va[v], dv - c);
    }
}

static void isa_row_pv(float *acc, float alpha, const float *p, const float *const *vp, size_t n,
                       size_t dv)
{
    size_t c0 = 0;
    for (; c0 + 4 * PEAK_ATTENTION_VW <= dv; c0 += 4 * PEAK_ATTENTION_VW)
        row_pv_cols4(acc, alpha, p, vp, n, c0);
    if (c0 < dv)
        row_pv_cols(acc, alpha, p, vp, n, c0, dv);
}

/* The online softmax, row packing, isa_dot, isa_row_exp and the kernels:
   attention-body.h. */
#include "attention-body.h"
