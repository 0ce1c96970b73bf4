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

/* The online softmax, row packing, the row path and the kernels:
   attention-body.h. */
#include "attention-body.h"
