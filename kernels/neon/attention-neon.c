/*
 * attention-neon.c - fused masked attention on AArch64 AdvSIMD (peak_attention).
 *
 * The tiling, masks and special rows are attention.h's; this file holds
 * the micro-kernels, with 4 query rows per vector, blocks of 64 rows and
 * tiles of 64 keys, as on x86 (so the workspace formula in peak.h holds for
 * this tier too; 80 KiB of a tile's operands at Dh = Dv = 64 spill from a
 * 64 KiB L1 into L2 as they do on x86, in sequential streams the
 * prefetchers follow).
 *
 * Micro-tiles use FMLA by element (vfmaq_laneq_f32): one 128-bit load of
 * K[j][d .. d+3] serves four d steps, where x86 broadcasts one float per
 * d.  With 32 registers a score micro-tile is 8 keys x 2 row vectors: 16
 * accumulators, 8 K vectors and 2 Q^T vectors live, and per 4 d steps 8 K
 * loads and 8 Q^T loads feed 64 FMAs.  P.V is the same shape with 8 V
 * columns (two V vectors per key) against 2 row vectors of P^T.  Key and
 * column counts that are not a multiple of 8 take a 4-wide, then a 1-wide
 * pass; head_dim % 4 trailing d steps take LD1R broadcasts (the packed K
 * rows are not padded with zeros, so a whole vector there would read
 * garbage).  Exponentials are exp-neon.h's 2^t, t = (s - m) * log2(e).
 * All FMAs here are where the x86 tiers fuse too.
 *
 * Expected on a Neoverse V1/V2: the score and P.V micro-kernels are 64
 * FMLA per 16 loads, FMA-bound at 4 FMLA a cycle, i.e. 16 FMAs a cycle,
 * the same as an AVX2 core with two 256-bit FMA ports.  Lq = Lk = 1024,
 * Dh = Dv = 64 is 2 x 64 M FMAs per head, ~8.4 M cycles; the online
 * softmax (~1 cycle per score: scale, max, 2^t, sum) adds ~12%: about
 * 3 ms per head at 3 GHz.  Not measured: no AArch64 hardware here, only
 * qemu.
 */
#include "neon/exp-neon.h"
#include "internal.h"

#include <arm_neon.h>

#define PEAK_ATTENTION_VW 4
#define PEAK_ATTENTION_BQ 64
#define PEAK_ATTENTION_BC 64
#include "attention.h"

#define NJ 8  /* keys (or V columns) per micro-tile */
#define NRV 2 /* row vectors per micro-tile */

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 8")

/* acc[rr][jj] += vq[rr] * lane L of vk[jj], for the nj keys and nrv row
   vectors; L must be a literal (the lane is an immediate). */
#define SCORES_LANE(L)                                                                             \
    do {                                                                                           \
        float32x4_t vq_[NRV];                                                                      \
        UNROLL for (int rr = 0; rr < nrv; rr++) vq_[rr] =                                          \
            vld1q_f32(qt + (c + (L)) * PEAK_ATTENTION_BQ + (size_t)rr * PEAK_ATTENTION_VW);        \
        UNROLL for (int jj = 0; jj < nj; jj++) UNROLL for (int rr = 0; rr < nrv; rr++)             \
            acc[rr][jj] = vfmaq_laneq_f32(acc[rr][jj], vq_[rr], vk[jj], (L));                      \
    } while (0)

/* S^T[jj][.] * scale for keys kp[0 .. nj-1] and nrv row vectors (st, qt
   and tmax point at the first row), and their max into tmax; constants
   after inlining. */
INLINE void scores_core(float *st, const float *const *kp, const float *qt, size_t dh, float scale,
                        float *tmax, int nj, int nrv)
{
    float32x4_t acc[NRV][NJ];
    UNROLL for (int rr = 0; rr < nrv; rr++)
        UNROLL for (int jj = 0; jj < nj; jj++)
            acc[rr][jj] = vdupq_n_f32(0.0f);
    size_t c = 0;
    for (; c + 4 <= dh; c += 4) {
        float32x4_t vk[NJ];
        UNROLL for (int jj = 0; jj < nj; jj++)
            vk[jj] = vld1q_f32(kp[jj] + c);
        SCORES_LANE(0);
        SCORES_LANE(1);
        SCORES_LANE(2);
        SCORES_LANE(3);
    }
    for (; c < dh; c++) {
        float32x4_t vq[NRV];
        UNROLL for (int rr = 0; rr < nrv; rr++) vq[rr] =
            vld1q_f32(qt + c * PEAK_ATTENTION_BQ + (size_t)rr * PEAK_ATTENTION_VW);
        UNROLL for (int jj = 0; jj < nj; jj++) {
            const float32x4_t vk = vld1q_dup_f32(kp[jj] + c);
            UNROLL for (int rr = 0; rr < nrv; rr++)
                acc[rr][jj] = vfmaq_f32(acc[rr][jj], vq[rr], vk);
        }
    }
    const float32x4_t vscale = vdupq_n_f32(scale);
    UNROLL for (int rr = 0; rr < nrv; rr++) {
        float32x4_t vmax = vld1q_f32(tmax + (size_t)rr * PEAK_ATTENTION_VW);
        UNROLL for (int jj = 0; jj < nj; jj++) {
            const float32x4_t vs = vmulq_f32(acc[rr][jj], vscale);
            vst1q_f32(st + (size_t)jj * PEAK_ATTENTION_BQ + (size_t)rr * PEAK_ATTENTION_VW, vs);
            vmax = vmaxnmq_f32(vmax, vs);
        }
        vst1q_f32(tmax + (size_t)rr * PEAK_ATTENTION_VW, vmax);
    }
}

/* acc[rr][L] (and acc[rr][4 + L] when nc is 8) += vpt[rr] * lane L of the
   key's V columns. */
#define PV_LANE(L)                                                               \
    do {                                                                         \
        UNROLL for (int rr = 0; rr < nrv; rr++) {                                \
            acc[rr][(L)] = vfmaq_laneq_f32(acc[rr][(L)], vpt[rr], vv0, (L));     \
            if (nc == 8)                                                         \
                acc[rr][4 + (L)] = vfmaq_laneq_f32(acc[rr][4 + (L)], vpt[rr], vv1, (L)); \
        }                                                                        \
    } while (0)

/* O^T[0 .. nc-1][.] += sum_j V[j][c] P^T[j][.], nc 8, 4 or 1 (oacc and v
   point at the first column). */
INLINE void pv_core(float *oacc, const float *v, size_t ldv, const float *pt, size_t n, int nc,
                    int nrv)
{
    float32x4_t acc[NRV][NJ];
    UNROLL for (int rr = 0; rr < nrv; rr++) UNROLL for (int cc = 0; cc < nc; cc++) acc[rr][cc] =
        vld1q_f32(oacc + (size_t)cc * PEAK_ATTENTION_BQ + (size_t)rr * PEAK_ATTENTION_VW);
    for (size_t j = 0; j < n; j++) {
        float32x4_t vpt[NRV];
        const float *vj = v + j * ldv;
        UNROLL for (int rr = 0; rr < nrv; rr++) vpt[rr] =
            vld1q_f32(pt + j * PEAK_ATTENTION_BQ + (size_t)rr * PEAK_ATTENTION_VW);
        if (nc == 1) {
            const float32x4_t vv = vld1q_dup_f32(vj);
            UNROLL for (int rr = 0; rr < nrv; rr++)
                acc[rr][0] = vfmaq_f32(acc[rr][0], vpt[rr], vv);
            continue;
        }
        const float32x4_t vv0 = vld1q_f32(vj);
        const float32x4_t vv1 = nc == 8 ? vld1q_f32(vj + 4) : vv0;
        PV_LANE(0);
        PV_LANE(1);
        PV_LANE(2);
        PV_LANE(3);
    }
    UNROLL for (int rr = 0; rr < nrv; rr++) UNROLL for (int cc = 0; cc < nc; cc++) vst1q_f32(
        oacc + (size_t)cc * PEAK_ATTENTION_BQ + (size_t)rr * PEAK_ATTENTION_VW, acc[rr][cc]);
}

PEAK_ATTENTION_DEFINE_ROW_PAIR_DRIVERS(NJ)

/* ---- the row path ---------------------------------------------------------- */

static float isa_row_exp(float *s, float m, size_t n)
{
    const float32x4_t vm = vdupq_n_f32(m), vlog2e = vdupq_n_f32(PEAK_EXP_LOG2E);
    float32x4_t vsum = vdupq_n_f32(0.0f);
    size_t j = 0;
    for (; j + PEAK_ATTENTION_VW <= n; j += PEAK_ATTENTION_VW) {
        const float32x4_t vp =
            peak_vf_exp2_ftz(vmulq_f32(vsubq_f32(vld1q_f32(s + j), vm), vlog2e));
        vst1q_f32(s + j, vp);
        vsum = vaddq_f32(vsum, vp);
    }
    float sum = vaddvq_f32(vsum);
    if (j < n) {
        /* Through a buffer; unused lanes are neither stored nor summed. */
        float buf[PEAK_ATTENTION_VW] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (size_t l = 0; l < n - j; l++)
            buf[l] = s[j + l];
        const float32x4_t vp =
            peak_vf_exp2_ftz(vmulq_f32(vsubq_f32(vld1q_f32(buf), vm), vlog2e));
        vst1q_f32(buf, vp);
        for (size_t l = 0; l < n - j; l++) {
            s[j + l] = buf[l];
            sum += buf[l];
        }
    }
    return sum;
}

/* The online softmax (its running max FMAXNM, which drops a NaN score:
   the sum catches it; the exponentials two keys a step into two sums),
   row packing, the row path's dots and P.V (eight vectors of columns at a
   time) and the kernels: attention-body.h. */
#define PEAK_ATTENTION_ROW_PV_VECTORS 8
#define PEAK_ATTENTION_MAX(a, b) vmaxnmq_f32(a, b)
#define PEAK_ATTENTION_EXP_PAIRS 1
#define PEAK_ATTENTION_HAS_ROW_EXP 1
#include "attention-body.h"
