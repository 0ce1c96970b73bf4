/*
 * attention-avx512.c - fused masked attention on AVX-512F (peak_attention).
 *
 * The tiling, masks and special rows are attention.h's; this file holds
 * the three micro-kernels, with 16 query rows per zmm and blocks of 64 rows
 * (4 vectors) against tiles of 64 keys:
 *   scores: 6 keys x 4 row vectors = 24 accumulators; per d, 4 loads of Q^T
 *           and 6 broadcasts of K feed 24 FMAs; the epilogue scales them
 *           and keeps their max per row;
 *   P.V:    6 columns of V x 4 row vectors, the same shape;
 *   softmax: per row vector, an exp2 pass over the tile's 64 keys in L1
 *           (after a bias-and-max pass if the tile is masked), then one
 *           rescale of the accumulator.
 * Exponentials are exp-avx512.h's 2^t (VREDUCEPS + VSCALEFPS), with
 * t = (s - m) * log2(e): subtracting before scaling keeps t exact to one
 * rounding even for scores of 1e4 and more.
 */
#include "avx512/exp-avx512.h"
#include "internal.h"

#include "avx512/intrin-avx512.h"

#define PEAK_ATTENTION_VW 16
#define PEAK_ATTENTION_BQ 64
#define PEAK_ATTENTION_BC 64
#define PEAK_ATTENTION_T8X8_IN peak_avx2_t8x8_in
#define PEAK_ATTENTION_T8X8_OUT peak_avx2_t8x8_out
#include "simd/transpose-avx2.h"
#include "attention.h"

#define NJ 6 /* keys per score micro-tile */
#define NC 6 /* V columns per P.V micro-tile */

#define INLINE static inline __attribute__((always_inline))

/* S^T[jj][.] * scale for keys kp[0 .. nj-1], nrv row vectors from qt (st,
   qt and tmax already point at the first row), and their max into tmax.
   nj and nrv are constants after inlining, so the accumulators live in
   registers. */
INLINE void scores_core(float *st, const float *const *kp, const float *qt, size_t dh, float scale,
                        float *tmax, int nj, int nrv)
{
    __m512 acc[NJ][PEAK_ATTENTION_NRV];
#pragma GCC unroll 6
    for (int jj = 0; jj < nj; jj++)
#pragma GCC unroll 4
        for (int rr = 0; rr < nrv; rr++)
            acc[jj][rr] = _mm512_setzero_ps();
    for (size_t c = 0; c < dh; c++) {
        __m512 vq[PEAK_ATTENTION_NRV];
#pragma GCC unroll 4
        for (int rr = 0; rr < nrv; rr++)
            vq[rr] = _mm512_load_ps(qt + c * PEAK_ATTENTION_BQ + rr * PEAK_ATTENTION_VW);
#pragma GCC unroll 6
        for (int jj = 0; jj < nj; jj++) {
            const __m512 vk = _mm512_set1_ps(kp[jj][c]);
#pragma GCC unroll 4
            for (int rr = 0; rr < nrv; rr++)
                acc[jj][rr] = _mm512_fmadd_ps(vk, vq[rr], acc[jj][rr]);
        }
    }
    const __m512 vscale = _mm512_set1_ps(scale);
    __m512 vmax[PEAK_ATTENTION_NRV];
#pragma GCC unroll 4
    for (int rr = 0; rr < nrv; rr++)
        vmax[rr] = _mm512_load_ps(tmax + rr * PEAK_ATTENTION_VW);
#pragma GCC unroll 6
    for (int jj = 0; jj < nj; jj++)
#pragma GCC unroll 4
        for (int rr = 0; rr < nrv; rr++) {
            const __m512 vs = _mm512_mul_ps(acc[jj][rr], vscale);
            _mm512_store_ps(st + jj * PEAK_ATTENTION_BQ + rr * PEAK_ATTENTION_VW, vs);
            vmax[rr] = _mm512_max_ps(vmax[rr], vs);
        }
#pragma GCC unroll 4
    for (int rr = 0; rr < nrv; rr++)
        _mm512_store_ps(tmax + rr * PEAK_ATTENTION_VW, vmax[rr]);
}

#define ROWS_SWITCH(f, nj, ...)                                                  \
    switch (nrv) {                                                               \
    case 1: f(__VA_ARGS__, nj, 1); break;                                        \
    case 2: f(__VA_ARGS__, nj, 2); break;                                        \
    case 3: f(__VA_ARGS__, nj, 3); break;                                        \
    default: f(__VA_ARGS__, nj, 4); break;                                       \
    }

static void isa_scores(float *st, const float *const *kp, const float *qt, size_t dh, size_t n,
                       float scale, float *tmax, size_t r0, size_t r1)
{
    const int nrv = (int)((r1 - r0) / PEAK_ATTENTION_VW);
    size_t j = 0;
    for (; j + NJ <= n; j += NJ)
        ROWS_SWITCH(scores_core, NJ, st + j * PEAK_ATTENTION_BQ + r0, kp + j, qt + r0, dh, scale,
                    tmax + r0)
    for (; j + 4 <= n; j += 4)
        ROWS_SWITCH(scores_core, 4, st + j * PEAK_ATTENTION_BQ + r0, kp + j, qt + r0, dh, scale,
                    tmax + r0)
    for (; j < n; j++)
        ROWS_SWITCH(scores_core, 1, st + j * PEAK_ATTENTION_BQ + r0, kp + j, qt + r0, dh, scale,
                    tmax + r0)
}

/* O^T[0 .. nc-1][.] += sum_j V[j][c] P^T[j][.] over nrv row vectors (oacc
   and v point at the first column). */
INLINE void pv_core(float *oacc, const float *v, size_t ldv, const float *pt, size_t n, int nc,
                    int nrv)
{
    __m512 acc[NC][PEAK_ATTENTION_NRV];
#pragma GCC unroll 6
    for (int cc = 0; cc < nc; cc++)
#pragma GCC unroll 4
        for (int rr = 0; rr < nrv; rr++)
            acc[cc][rr] =
                _mm512_load_ps(oacc + (size_t)cc * PEAK_ATTENTION_BQ + rr * PEAK_ATTENTION_VW);
    for (size_t j = 0; j < n; j++) {
        __m512 vp_[PEAK_ATTENTION_NRV];
        const float *vj = v + j * ldv;
#pragma GCC unroll 4
        for (int rr = 0; rr < nrv; rr++)
            vp_[rr] = _mm512_load_ps(pt + j * PEAK_ATTENTION_BQ + rr * PEAK_ATTENTION_VW);
#pragma GCC unroll 6
        for (int cc = 0; cc < nc; cc++) {
            const __m512 vv = _mm512_set1_ps(vj[cc]);
#pragma GCC unroll 4
            for (int rr = 0; rr < nrv; rr++)
                acc[cc][rr] = _mm512_fmadd_ps(vv, vp_[rr], acc[cc][rr]);
        }
    }
#pragma GCC unroll 6
    for (int cc = 0; cc < nc; cc++)
#pragma GCC unroll 4
        for (int rr = 0; rr < nrv; rr++)
            _mm512_store_ps(oacc + (size_t)cc * PEAK_ATTENTION_BQ + rr * PEAK_ATTENTION_VW,
                            acc[cc][rr]);
}

static void isa_pv(float *oacc, const float *v, size_t ldv, const float *pt, size_t dv, size_t n,
                   size_t r0, size_t r1)
{
    const int nrv = (int)((r1 - r0) / PEAK_ATTENTION_VW);
    size_t c = 0;
    for (; c + NC <= dv; c += NC)
        ROWS_SWITCH(pv_core, NC, oacc + c * PEAK_ATTENTION_BQ + r0, v + c, ldv, pt + r0, n)
    for (; c + 4 <= dv; c += 4)
        ROWS_SWITCH(pv_core, 4, oacc + c * PEAK_ATTENTION_BQ + r0, v + c, ldv, pt + r0, n)
    for (; c < dv; c++)
        ROWS_SWITCH(pv_core, 1, oacc + c * PEAK_ATTENTION_BQ + r0, v + c, ldv, pt + r0, n)
}

/* The online softmax, row packing (a row's last dv % 16 floats as one
   masked load and a whole-vector store), the row path and the kernels:
   attention-body.h. */
#define PEAK_ATTENTION_PACK_VECTOR_TAIL 1
#include "attention-body.h"
