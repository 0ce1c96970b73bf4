/*
 * attention-body.h - the vector code of peak_attention written once against
 * the vector vocabulary (simd/f32-<isa>.h): the tile path's logit pass
 * (the cap by tanh-body.h, ALiBi), online softmax (masked scores and their
 * max, the exponentials and their sum, the rescale of the accumulator) and
 * row packing, the row path's dot product, cap and exponentials, and the
 * tier's three kernels (PEAK_TIER_FN): its geometry and cost model, the
 * block kernel and the rows kernel.
 *
 * A tier's file includes its exponentials (<isa>/exp-<isa>.h, which
 * include its vocabulary), sets PEAK_ATTENTION_VW (= PEAK_VF_LANES),
 * PEAK_ATTENTION_BQ and PEAK_ATTENTION_BC, includes attention.h, defines
 * its register tiles (isa_scores, isa_pv) and the row path's isa_row_pv,
 * which stay per ISA, then its overrides, and includes this file.
 *
 * Overrides, each defined by a tier before it includes this file:
 *   PEAK_ATTENTION_MAX(a, b)       the softmax's running max (default
 *     peak_vf_max, MAXPS: b where either is NaN); NEON keeps FMAXNM;
 *   PEAK_ATTENTION_EXP_PAIRS       1: the exponentials of a tile two keys
 *     a step into two sums, added at the end (NEON); 0 (default): one;
 *   PEAK_ATTENTION_PACK_VECTOR_TAIL  1: isa_pack_rows copies a row's last
 *     dv % PEAK_VF_LANES floats as a whole vector, +0 past dv
 *     (peak_vf_load_first: nothing past the row is read) (AVX-512); 0
 *     (default): one float at a time;
 *   PEAK_ATTENTION_HAS_ROW_EXP  the tier defines isa_row_exp itself
 *     (NEON: a scalar tail through a buffer);
 *   PEAK_ATTENTION_TILE_NS, _ROW_NS, _KV_NS  the cost model the scheduler
 *     balances parts with (below).
 *
 * The contracts: attention-isa.h.  Each function keeps the operations and
 * their order per lane of the per-ISA code it replaces, so every tier
 * keeps its bits.
 */
#ifndef PEAK_ATTENTION_BODY_H
#define PEAK_ATTENTION_BODY_H

#if !defined(PEAK_VF_LANES) || !defined(PEAK_EXP_BODY_H) || !defined(PEAK_ATTENTION_H)
#error "include the tier's exponentials and attention.h before attention-body.h"
#endif
#if PEAK_ATTENTION_VW != PEAK_VF_LANES
#error "PEAK_ATTENTION_VW must be the vocabulary's PEAK_VF_LANES"
#endif

#include "simd/typed.h"
#include "tanh-body.h"

#ifndef PEAK_ATTENTION_MAX
#define PEAK_ATTENTION_MAX(a, b) peak_vf_max(a, b)
#endif
#ifndef PEAK_ATTENTION_EXP_PAIRS
#define PEAK_ATTENTION_EXP_PAIRS 0
#endif
#ifndef PEAK_ATTENTION_PACK_VECTOR_TAIL
#define PEAK_ATTENTION_PACK_VECTOR_TAIL 0
#endif
#ifndef PEAK_ATTENTION_ROW_PV_VECTORS
#define PEAK_ATTENTION_ROW_PV_VECTORS 4
#endif

/* ---- the tile path: online softmax ------------------------------------- */

/* Masked scores of one row vector: s + B where B is finite and -inf where
   B is -inf (a select, so that a NaN or inf score at a masked key cannot
   leak).  Returns their max. */
static peak_vf attention_mask_max(float *s, const float *bt, size_t n)
{
    const peak_vf vninf = peak_vf_set1(-INFINITY);
    peak_vf vmax = vninf;
    for (size_t j = 0; j < n; j++) {
        const peak_vf vb = peak_vf_load(bt + j * PEAK_ATTENTION_BQ);
        const peak_vf vs = peak_vf_add_except(peak_vf_load(s + j * PEAK_ATTENTION_BQ), vb, vninf);
        peak_vf_store(s + j * PEAK_ATTENTION_BQ, vs);
        vmax = PEAK_ATTENTION_MAX(vmax, vs);
    }
    return vmax;
}

/* 2^((s - m) log2 e) of one score vector, stored in place. */
static inline __attribute__((always_inline)) peak_vf attention_exp_at(float *s, peak_vf vm,
                                                                      peak_vf vlog2e)
{
    const peak_vf vp = peak_vf_exp2_ftz(peak_vf_mul(peak_vf_sub(peak_vf_load(s), vm), vlog2e));
    peak_vf_store(s, vp);
    return vp;
}

/* P = 2^((s - m) log2 e) in place; returns the sum of the tile's P.  With
   PEAK_ATTENTION_EXP_PAIRS, two keys a step and two sums: the
   exponentials overlap. */
static peak_vf attention_exp_and_sum(float *s, peak_vf vm, size_t n)
{
    const peak_vf vlog2e = peak_vf_set1(PEAK_EXP_LOG2E);
    peak_vf vsum0 = peak_vf_zero();
    size_t j = 0;
#if PEAK_ATTENTION_EXP_PAIRS
    peak_vf vsum1 = peak_vf_zero();
    for (; j + 2 <= n; j += 2) {
        float *s0 = s + j * PEAK_ATTENTION_BQ, *s1 = s0 + PEAK_ATTENTION_BQ;
        const peak_vf vp0 = attention_exp_at(s0, vm, vlog2e);
        const peak_vf vp1 = attention_exp_at(s1, vm, vlog2e);
        vsum0 = peak_vf_add(vsum0, vp0);
        vsum1 = peak_vf_add(vsum1, vp1);
    }
    if (j < n)
        vsum0 = peak_vf_add(vsum0, attention_exp_at(s + j * PEAK_ATTENTION_BQ, vm, vlog2e));
    return peak_vf_add(vsum0, vsum1);
#else
    for (; j < n; j++)
        vsum0 = peak_vf_add(vsum0, attention_exp_at(s + j * PEAK_ATTENTION_BQ, vm, vlog2e));
    return vsum0;
#endif
}

static void attention_rescale(float *oacc, peak_vf valpha, size_t dv)
{
    for (size_t c = 0; c < dv; c++)
        peak_vf_store(oacc + c * PEAK_ATTENTION_BQ,
                      peak_vf_mul(peak_vf_load(oacc + c * PEAK_ATTENTION_BQ), valpha));
}

static void isa_online_softmax(const attention_ws *w, const float *bt, size_t dv, size_t n,
                               size_t r0, size_t r1)
{
    const peak_vf vninf = peak_vf_set1(-INFINITY), vlog2e = peak_vf_set1(PEAK_EXP_LOG2E);
    for (size_t r = r0; r < r1; r += PEAK_VF_LANES) {
        const peak_vf vm_old = peak_vf_load(w->m + r);
        const peak_vf vtile =
            bt ? attention_mask_max(w->st + r, bt + r, n) : peak_vf_load(w->tmax + r);
        /* A NaN m_old (whose l is already NaN) is dropped: peak_vf_max
           returns its second operand if either is NaN, FMAXNM the number. */
        const peak_vf vm = PEAK_ATTENTION_MAX(vm_old, vtile);
        /* m = -inf: nothing visible yet; 0 keeps p = 2^-inf = 0, no NaN. */
        const peak_vf vms = peak_vf_zero_where_eq(vm, vninf);
        const peak_vf valpha = peak_vf_exp2_ftz(peak_vf_mul(peak_vf_sub(vm_old, vms), vlog2e));
        const peak_vf vsum = attention_exp_and_sum(w->st + r, vms, n);
        peak_vf_store(w->l + r, peak_vf_fma(peak_vf_load(w->l + r), valpha, vsum));
        peak_vf_store(w->m + r, vm);
        /* Any lane with alpha != 1 (NaN included): rescale. */
        if (peak_vf_any_ne(valpha, peak_vf_set1(1.0f)))
            attention_rescale(w->oacc + r, valpha, dv);
    }
}

/* cap tanh(s / cap), the division by a multiply by 1/cap when recip:
   half an ulp more on s / cap, invisible next to the scores' own error,
   for one division fewer of the two (the other is tanh's): the capped
   attention at H 8, L 1024, causal ran 1.31x the uncapped one with
   peak_vf_softcap, 1.20x with this (AVX-512, one core).  1/cap has to be
   a normal float (cap in [2^-126, 2^126]), else the division. */
static inline __attribute__((always_inline)) peak_vf attention_cap(peak_vf vs, peak_vf vcap,
                                                                   peak_vf vrcap, bool recip)
{
    return recip ? peak_vf_mul(vcap, peak_vf_tanh(peak_vf_mul(vs, vrcap)))
                 : peak_vf_softcap(vs, vcap);
}

static inline bool attention_cap_recip(float cap)
{
    return cap >= 0x1p-126f && cap <= 0x1p126f;
}

/* One row vector of isa_logits (the flags constants after inlining): the
   cap, then s - slope * distance, each rounded once; the max as
   PEAK_ATTENTION_MAX takes it (a NaN score is caught by the sum). */
static inline __attribute__((always_inline)) peak_vf
attention_logits_rows(float *s, const attention_logit_pass *lp, size_t r, size_t n, bool capped,
                      bool recip, bool alibi, bool symmetric)
{
    const peak_vf vcap = peak_vf_set1(lp->cap);
    const peak_vf vrcap = recip ? peak_vf_set1(1.0f / lp->cap) : vcap;
    const peak_vf vslope = alibi ? peak_vf_loadu(lp->slope + r) : peak_vf_zero();
    const peak_vf vbase = alibi ? peak_vf_loadu(lp->base + r) : peak_vf_zero();
    peak_vf vmax = peak_vf_set1(-INFINITY);
    for (size_t j = 0; j < n; j++) {
        float *p = s + j * PEAK_ATTENTION_BQ + r;
        peak_vf vs = peak_vf_load(p);
        if (capped)
            vs = attention_cap(vs, vcap, vrcap, recip);
        if (alibi) {
            peak_vf vd = peak_vf_sub(vbase, peak_vf_set1((float)j));
            if (symmetric)
                vd = peak_vf_abs(vd);
            vs = peak_vf_sub(vs, peak_vf_mul(vslope, vd));
        }
        peak_vf_store(p, vs);
        vmax = PEAK_ATTENTION_MAX(vmax, vs);
    }
    return vmax;
}

static void isa_logits(float *st, float *tmax, const attention_logit_pass *lp, size_t n,
                       size_t r0, size_t r1)
{
    const bool sym = lp->symmetric;
    for (size_t r = r0; r < r1; r += PEAK_VF_LANES) {
        peak_vf vmax;
        if (lp->capped && !attention_cap_recip(lp->cap)) /* rare: not specialised */
            vmax = attention_logits_rows(st, lp, r, n, true, false, lp->alibi, sym);
        else if (!lp->alibi)
            vmax = attention_logits_rows(st, lp, r, n, true, true, false, false);
        else if (!lp->capped)
            vmax = sym ? attention_logits_rows(st, lp, r, n, false, false, true, true)
                       : attention_logits_rows(st, lp, r, n, false, false, true, false);
        else
            vmax = sym ? attention_logits_rows(st, lp, r, n, true, true, true, true)
                       : attention_logits_rows(st, lp, r, n, true, true, true, false);
        peak_vf_store(tmax + r, vmax);
    }
}

/* isa_pack_rows for one type t (a constant after inlining). */
static inline __attribute__((always_inline)) bool
attention_pack_rows_as(float *dst, size_t ld, const void *const *src, size_t n, size_t dv,
                       peak_dtype t)
{
    peak_vf vbad = peak_vf_zero(); /* x - x: NaN exactly for inf and NaN */
    float tail = 0.0f;
    for (size_t j = 0; j < n; j++) {
        size_t c = 0;
        for (; c + PEAK_VF_LANES <= dv; c += PEAK_VF_LANES) {
            const peak_vf vx = peak_vf_loadu_as(peak_elem_at(src[j], (ptrdiff_t)c, t), t);
            vbad = peak_vf_add(vbad, peak_vf_sub(vx, vx));
            peak_vf_store(dst + j * ld + c, vx);
        }
#if PEAK_ATTENTION_PACK_VECTOR_TAIL
        if (c < dv) {
            const peak_vf vx = peak_vf_load_first_as(peak_elem_at(src[j], (ptrdiff_t)c, t), dv - c, t);
            vbad = peak_vf_add(vbad, peak_vf_sub(vx, vx));
            peak_vf_store(dst + j * ld + c, vx);
        }
#else
        for (; c < dv; c++) {
            const float x = peak_f32_of_bits(peak_convert_load(src[j], t, c));
            dst[j * ld + c] = x;
            tail += x - x;
        }
#endif
    }
    /* vbad != vbad exactly in its NaN lanes. */
    return !peak_vf_any_ne(vbad, vbad) && !isnan(tail);
}

static bool attention_pack_rows_f32(float *dst, size_t ld, const void *const *src, size_t n,
                                    size_t dv)
{
    return attention_pack_rows_as(dst, ld, src, n, dv, PEAK_F32);
}

static bool attention_pack_rows_bf16(float *dst, size_t ld, const void *const *src, size_t n,
                                     size_t dv)
{
    return attention_pack_rows_as(dst, ld, src, n, dv, PEAK_BF16);
}

PEAK_VF_F16_TARGET static bool attention_pack_rows_f16(float *dst, size_t ld,
                                                       const void *const *src, size_t n, size_t dv)
{
    return attention_pack_rows_as(dst, ld, src, n, dv, PEAK_F16);
}

static bool isa_pack_rows(float *dst, size_t ld, const void *const *src, size_t n, size_t dv,
                          peak_dtype t)
{
    return t == PEAK_BF16  ? attention_pack_rows_bf16(dst, ld, src, n, dv)
           : t == PEAK_F16 ? attention_pack_rows_f16(dst, ld, src, n, dv)
                           : attention_pack_rows_f32(dst, ld, src, n, dv);
}

/* ---- the row path ---------------------------------------------------------- */

/* One FMA chain a key, a vector of keys at once (PEAK_VF_LANES chains
   cover the FMA latency), reduced together by peak_vf_sum_lanes: ~3
   operations a key where a reduction per key took 8 (a decode step's row
   path, 13.6 ns a key with K/V in L2 on Sapphire Rapids, was bound by
   them).  The last dh % lanes floats through peak_vf_load_first: nothing
   past a row is read. */
static inline __attribute__((always_inline)) peak_vf
attention_row_dots_as(const float *q, const void *const *kp, size_t dh, peak_dtype t)
{
    peak_vf acc[PEAK_VF_LANES];
#pragma GCC unroll 16
    for (int j = 0; j < PEAK_VF_LANES; j++)
        acc[j] = peak_vf_zero();
    size_t c = 0;
    for (; c + PEAK_VF_LANES <= dh; c += PEAK_VF_LANES) {
        const peak_vf vq = peak_vf_loadu(q + c);
#pragma GCC unroll 16
        for (int j = 0; j < PEAK_VF_LANES; j++)
            acc[j] = peak_vf_fma(vq, peak_vf_loadu_as(peak_elem_at(kp[j], (ptrdiff_t)c, t), t),
                                 acc[j]);
    }
    if (c < dh) {
        const peak_vf vq = peak_vf_load_first(q + c, dh - c);
#pragma GCC unroll 16
        for (int j = 0; j < PEAK_VF_LANES; j++)
            acc[j] = peak_vf_fma(
                vq, peak_vf_load_first_as(peak_elem_at(kp[j], (ptrdiff_t)c, t), dh - c, t), acc[j]);
    }
    return peak_vf_sum_lanes(acc);
}

static peak_vf attention_row_dots_f32(const float *q, const void *const *kp, size_t dh)
{
    return attention_row_dots_as(q, kp, dh, PEAK_F32);
}

static peak_vf attention_row_dots_bf16(const float *q, const void *const *kp, size_t dh)
{
    return attention_row_dots_as(q, kp, dh, PEAK_BF16);
}

PEAK_VF_F16_TARGET static peak_vf attention_row_dots_f16(const float *q, const void *const *kp,
                                                         size_t dh)
{
    return attention_row_dots_as(q, kp, dh, PEAK_F16);
}

static peak_vf isa_row_dots(const float *q, const void *const *kp, size_t dh, peak_dtype kt)
{
    return kt == PEAK_BF16  ? attention_row_dots_bf16(q, kp, dh)
           : kt == PEAK_F16 ? attention_row_dots_f16(q, kp, dh)
                            : attention_row_dots_f32(q, kp, dh);
}

/* Columns [c0, c0 + nv vectors) of the row path's accumulator, in
   registers over the tile's keys (nv a constant after inlining); the
   last vector holds dv - c lanes when partial (last), read through
   peak_vf_load_first_as: nothing past a V row is read. */
static inline __attribute__((always_inline)) void
attention_row_pv_cols(float *acc, peak_vf valpha, const float *p, const void *const *vp, size_t n,
                      size_t c0, int nv, size_t last, peak_dtype t)
{
    peak_vf va[PEAK_ATTENTION_ROW_PV_VECTORS];
#pragma GCC unroll 16
    for (int v = 0; v < nv; v++)
        va[v] = peak_vf_mul(peak_vf_loadu(acc + c0 + (size_t)v * PEAK_VF_LANES), valpha);
    for (size_t j = 0; j < n; j++) {
        if (!vp[j])
            continue; /* a masked key: its V row is not read */
        const peak_vf vpj = peak_vf_set1(p[j]);
        const void *row = peak_elem_at(vp[j], (ptrdiff_t)c0, t);
#pragma GCC unroll 16
        for (int v = 0; v < nv; v++) {
            const void *x = peak_elem_at(row, (ptrdiff_t)v * PEAK_VF_LANES, t);
            const peak_vf vx = last && v == nv - 1 ? peak_vf_load_first_as(x, last, t)
                                                   : peak_vf_loadu_as(x, t);
            va[v] = peak_vf_fma(vpj, vx, va[v]);
        }
    }
#pragma GCC unroll 16
    for (int v = 0; v < nv; v++)
        peak_vf_storeu(acc + c0 + (size_t)v * PEAK_VF_LANES, va[v]);
}

/* isa_row_pv for one type t: groups of PEAK_ATTENTION_ROW_PV_VECTORS
   vectors, then one vector at a time, the last one partial (acc holds
   round16(dv) floats: the lanes past dv are stored, never read back). */
static inline __attribute__((always_inline)) void
attention_row_pv_as(float *acc, float alpha, const float *p, const void *const *vp, size_t n,
                    size_t dv, peak_dtype t)
{
    const peak_vf valpha = peak_vf_set1(alpha);
    size_t c = 0;
    for (; c + PEAK_ATTENTION_ROW_PV_VECTORS * PEAK_VF_LANES <= dv;
         c += PEAK_ATTENTION_ROW_PV_VECTORS * PEAK_VF_LANES)
        attention_row_pv_cols(acc, valpha, p, vp, n, c, PEAK_ATTENTION_ROW_PV_VECTORS, 0, t);
    for (; c + PEAK_VF_LANES <= dv; c += PEAK_VF_LANES)
        attention_row_pv_cols(acc, valpha, p, vp, n, c, 1, 0, t);
    if (c < dv)
        attention_row_pv_cols(acc, valpha, p, vp, n, c, 1, dv - c, t);
}

static void attention_row_pv_f32(float *acc, float alpha, const float *p, const void *const *vp,
                                 size_t n, size_t dv)
{
    attention_row_pv_as(acc, alpha, p, vp, n, dv, PEAK_F32);
}

static void attention_row_pv_bf16(float *acc, float alpha, const float *p, const void *const *vp,
                                  size_t n, size_t dv)
{
    attention_row_pv_as(acc, alpha, p, vp, n, dv, PEAK_BF16);
}

PEAK_VF_F16_TARGET static void attention_row_pv_f16(float *acc, float alpha, const float *p,
                                                    const void *const *vp, size_t n, size_t dv)
{
    attention_row_pv_as(acc, alpha, p, vp, n, dv, PEAK_F16);
}

static void isa_row_pv(float *acc, float alpha, const float *p, const void *const *vp, size_t n,
                       size_t dv, peak_dtype vt)
{
    if (vt == PEAK_BF16)
        attention_row_pv_bf16(acc, alpha, p, vp, n, dv);
    else if (vt == PEAK_F16)
        attention_row_pv_f16(acc, alpha, p, vp, n, dv);
    else
        attention_row_pv_f32(acc, alpha, p, vp, n, dv);
}

/* ---- the row path, a group of rows (attention_rows_tile_together) -------------------- */

/* Keys kp[j0 .. j0 + 4) against rows q[0 .. rn) (rn <= 4, a constant after
   inlining): 16 FMA chains over head_dim, each key vector loaded and
   widened once for the rn rows; the chains into buf[r][j0 + j], each as
   attention_row_dots_as builds it. */
static inline __attribute__((always_inline)) void
attention_dots_block(peak_vf buf[][PEAK_VF_LANES], const float *const *q, int rn,
                     const void *const *kp, size_t j0, size_t dh, peak_dtype t)
{
    peak_vf acc[4][4];
#pragma GCC unroll 4
    for (int r = 0; r < rn; r++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            acc[r][j] = peak_vf_zero();
    size_t c = 0;
    for (; c + PEAK_VF_LANES <= dh; c += PEAK_VF_LANES) {
        peak_vf vk[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            vk[j] = peak_vf_loadu_as(peak_elem_at(kp[j0 + (size_t)j], (ptrdiff_t)c, t), t);
#pragma GCC unroll 4
        for (int r = 0; r < rn; r++) {
            const peak_vf vq = peak_vf_loadu(q[r] + c);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++)
                acc[r][j] = peak_vf_fma(vq, vk[j], acc[r][j]);
        }
    }
    if (c < dh) {
        peak_vf vk[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            vk[j] = peak_vf_load_first_as(peak_elem_at(kp[j0 + (size_t)j], (ptrdiff_t)c, t),
                                          dh - c, t);
#pragma GCC unroll 4
        for (int r = 0; r < rn; r++) {
            const peak_vf vq = peak_vf_load_first(q[r] + c, dh - c);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++)
                acc[r][j] = peak_vf_fma(vq, vk[j], acc[r][j]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rn; r++)
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++)
            buf[r][j0 + (size_t)j] = acc[r][j];
}

/* rn rows (a constant after inlining) of isa_rows_dots. */
static inline __attribute__((always_inline)) void
attention_rows_dots_rn(peak_vf *dots, const float *const *q, int rn, const void *const *kp,
                       size_t dh, peak_dtype t)
{
    peak_vf buf[4][PEAK_VF_LANES];
    for (size_t j0 = 0; j0 < PEAK_VF_LANES; j0 += 4)
        attention_dots_block(buf, q, rn, kp, j0, dh, t);
    for (int r = 0; r < rn; r++)
        dots[r] = peak_vf_sum_lanes(buf[r]);
}

static inline __attribute__((always_inline)) void
attention_rows_dots_as(peak_vf *dots, const float *const *q, size_t nr, const void *const *kp,
                       size_t dh, peak_dtype t)
{
    for (size_t r0 = 0; r0 < nr; r0 += 4) {
        switch (nr - r0) {
        case 1: attention_rows_dots_rn(dots + r0, q + r0, 1, kp, dh, t); break;
        case 2: attention_rows_dots_rn(dots + r0, q + r0, 2, kp, dh, t); break;
        case 3: attention_rows_dots_rn(dots + r0, q + r0, 3, kp, dh, t); break;
        default: attention_rows_dots_rn(dots + r0, q + r0, 4, kp, dh, t); break;
        }
    }
}

static void attention_rows_dots_f32(peak_vf *dots, const float *const *q, size_t nr,
                                    const void *const *kp, size_t dh)
{
    attention_rows_dots_as(dots, q, nr, kp, dh, PEAK_F32);
}

static void attention_rows_dots_bf16(peak_vf *dots, const float *const *q, size_t nr,
                                     const void *const *kp, size_t dh)
{
    attention_rows_dots_as(dots, q, nr, kp, dh, PEAK_BF16);
}

PEAK_VF_F16_TARGET static void attention_rows_dots_f16(peak_vf *dots, const float *const *q,
                                                       size_t nr, const void *const *kp, size_t dh)
{
    attention_rows_dots_as(dots, q, nr, kp, dh, PEAK_F16);
}

static void isa_rows_dots(peak_vf *dots, const float *const *q, size_t nr, const void *const *kp,
                          size_t dh, peak_dtype kt)
{
    if (kt == PEAK_BF16)
        attention_rows_dots_bf16(dots, q, nr, kp, dh);
    else if (kt == PEAK_F16)
        attention_rows_dots_f16(dots, q, nr, kp, dh);
    else
        attention_rows_dots_f32(dots, q, nr, kp, dh);
}

/* Accumulator vectors per row in a pass of isa_rows_pv: 4 rows of 4 take
   16 of AVX-512's 32 registers, of 2 take 8 of AVX2's 16. */
#ifndef PEAK_ATTENTION_GROUP_PV_VECTORS
#define PEAK_ATTENTION_GROUP_PV_VECTORS (PEAK_VF_LANES >= 16 ? 4 : 2)
#endif

/* attention_row_pv_cols for rn rows (<= 4; rn, nv constants after
   inlining): each V vector loaded once for them. */
static inline __attribute__((always_inline)) void
attention_rows_pv_cols(float *const *acc, const float *alpha, const float *const *p, int rn,
                       const void *const *vp, size_t n, size_t c0, int nv, size_t last,
                       peak_dtype t)
{
    peak_vf va[4][PEAK_ATTENTION_GROUP_PV_VECTORS];
#pragma GCC unroll 4
    for (int r = 0; r < rn; r++) {
        const peak_vf valpha = peak_vf_set1(alpha[r]);
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            va[r][v] = peak_vf_mul(peak_vf_loadu(acc[r] + c0 + (size_t)v * PEAK_VF_LANES), valpha);
    }
    for (size_t j = 0; j < n; j++) {
        if (!vp[j])
            continue; /* a masked key: its V row is not read */
        const void *row = peak_elem_at(vp[j], (ptrdiff_t)c0, t);
        peak_vf vx[PEAK_ATTENTION_GROUP_PV_VECTORS];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) {
            const void *x = peak_elem_at(row, (ptrdiff_t)v * PEAK_VF_LANES, t);
            vx[v] = last && v == nv - 1 ? peak_vf_load_first_as(x, last, t)
                                        : peak_vf_loadu_as(x, t);
        }
#pragma GCC unroll 4
        for (int r = 0; r < rn; r++) {
            const peak_vf vpj = peak_vf_set1(p[r][j]);
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++)
                va[r][v] = peak_vf_fma(vpj, vx[v], va[r][v]);
        }
    }
#pragma GCC unroll 4
    for (int r = 0; r < rn; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            peak_vf_storeu(acc[r] + c0 + (size_t)v * PEAK_VF_LANES, va[r][v]);
}

static inline __attribute__((always_inline)) void
attention_rows_pv_rn(float *const *acc, const float *alpha, const float *const *p, int rn,
                     const void *const *vp, size_t n, size_t dv, peak_dtype t)
{
    const size_t step = PEAK_ATTENTION_GROUP_PV_VECTORS * PEAK_VF_LANES;
    size_t c = 0;
    for (; c + step <= dv; c += step)
        attention_rows_pv_cols(acc, alpha, p, rn, vp, n, c, PEAK_ATTENTION_GROUP_PV_VECTORS, 0, t);
    for (; c + PEAK_VF_LANES <= dv; c += PEAK_VF_LANES)
        attention_rows_pv_cols(acc, alpha, p, rn, vp, n, c, 1, 0, t);
    if (c < dv)
        attention_rows_pv_cols(acc, alpha, p, rn, vp, n, c, 1, dv - c, t);
}

static inline __attribute__((always_inline)) void
attention_rows_pv_as(float *const *acc, const float *alpha, const float *const *p, size_t nr,
                     const void *const *vp, size_t n, size_t dv, peak_dtype t)
{
    for (size_t r0 = 0; r0 < nr; r0 += 4) {
        switch (nr - r0) {
        case 1: attention_rows_pv_rn(acc + r0, alpha + r0, p + r0, 1, vp, n, dv, t); break;
        case 2: attention_rows_pv_rn(acc + r0, alpha + r0, p + r0, 2, vp, n, dv, t); break;
        case 3: attention_rows_pv_rn(acc + r0, alpha + r0, p + r0, 3, vp, n, dv, t); break;
        default: attention_rows_pv_rn(acc + r0, alpha + r0, p + r0, 4, vp, n, dv, t); break;
        }
    }
}

static void attention_rows_pv_f32(float *const *acc, const float *alpha, const float *const *p,
                                  size_t nr, const void *const *vp, size_t n, size_t dv)
{
    attention_rows_pv_as(acc, alpha, p, nr, vp, n, dv, PEAK_F32);
}

static void attention_rows_pv_bf16(float *const *acc, const float *alpha, const float *const *p,
                                   size_t nr, const void *const *vp, size_t n, size_t dv)
{
    attention_rows_pv_as(acc, alpha, p, nr, vp, n, dv, PEAK_BF16);
}

PEAK_VF_F16_TARGET static void attention_rows_pv_f16(float *const *acc, const float *alpha,
                                                     const float *const *p, size_t nr,
                                                     const void *const *vp, size_t n, size_t dv)
{
    attention_rows_pv_as(acc, alpha, p, nr, vp, n, dv, PEAK_F16);
}

static void isa_rows_pv(float *const *acc, const float *alpha, const float *const *p, size_t nr,
                        const void *const *vp, size_t n, size_t dv, peak_dtype vt)
{
    if (vt == PEAK_BF16)
        attention_rows_pv_bf16(acc, alpha, p, nr, vp, n, dv);
    else if (vt == PEAK_F16)
        attention_rows_pv_f16(acc, alpha, p, nr, vp, n, dv);
    else
        attention_rows_pv_f32(acc, alpha, p, nr, vp, n, dv);
}

#ifndef PEAK_ATTENTION_HAS_ROW_EXP
static float isa_row_exp(float *s, float m, size_t n)
{
    const peak_vf vm = peak_vf_set1(m), vlog2e = peak_vf_set1(PEAK_EXP_LOG2E);
    peak_vf vsum = peak_vf_zero();
    size_t j = 0;
    for (; j + PEAK_VF_LANES <= n; j += PEAK_VF_LANES) {
        const peak_vf vt = peak_vf_mul(peak_vf_sub(peak_vf_loadu(s + j), vm), vlog2e);
        const peak_vf vp = peak_vf_exp2_ftz(vt);
        peak_vf_storeu(s + j, vp);
        vsum = peak_vf_add(vsum, vp);
    }
    if (j < n) {
        /* Lanes past n load 0 and give 2^(-m log2 e): zeroed here. */
        const peak_vf vt = peak_vf_mul(peak_vf_sub(peak_vf_load_first(s + j, n - j), vm), vlog2e);
        const peak_vf vp = peak_vf_first_or(peak_vf_exp2_ftz(vt), n - j, 0.0f);
        peak_vf_store_first(s + j, vp, n - j);
        vsum = peak_vf_add(vsum, vp);
    }
    return peak_vf_reduce_add(vsum);
}
#endif

/* As isa_logits' cap; the last n % PEAK_VF_LANES scores through
   peak_vf_load_first and peak_vf_store_first: nothing past n is read or
   written. */
static void isa_row_softcap(float *s, float cap, size_t n)
{
    const bool recip = attention_cap_recip(cap);
    const peak_vf vcap = peak_vf_set1(cap), vrcap = recip ? peak_vf_set1(1.0f / cap) : vcap;
    size_t j = 0;
    for (; j + PEAK_VF_LANES <= n; j += PEAK_VF_LANES)
        peak_vf_storeu(s + j, attention_cap(peak_vf_loadu(s + j), vcap, vrcap, recip));
    if (j < n)
        peak_vf_store_first(
            s + j, attention_cap(peak_vf_load_first(s + j, n - j), vcap, vrcap, recip), n - j);
}

/* ---- the tier's kernels ---------------------------------------------------- */

/* The cost model (peak_attention_geometry), ns per element of Dh + Dv.
   Measured on Zen 3 (AVX2): the tile path runs ~60 GFLOP/s, 2 FLOPs per
   element and row; a decode step (Lk 2048, 8 heads, K/V in L3) ~0.24 ns
   per element, most of it reading K and V.  AVX-512 and NEON are not
   measured here: the same numbers (only their ratios and the 20 us inline
   threshold use them). */
#ifndef PEAK_ATTENTION_TILE_NS
#define PEAK_ATTENTION_TILE_NS 0.033
#endif
#ifndef PEAK_ATTENTION_ROW_NS
#define PEAK_ATTENTION_ROW_NS 0.06
#endif
#ifndef PEAK_ATTENTION_KV_NS
#define PEAK_ATTENTION_KV_NS 0.18
#endif

void PEAK_TIER_FN(peak_f32_attention_geometry)(const peak_attention_desc *desc,
                                               peak_attention_geometry *g)
{
    g->block_rows = PEAK_ATTENTION_BQ;
    g->row_path_rows = PEAK_ATTENTION_VW / 2;
    g->row_states = PEAK_ATTENTION_ROW_STATES;
    g->key_tile = PEAK_ATTENTION_BC;
    g->split_keys = true;
    g->tile_ns = PEAK_ATTENTION_TILE_NS;
    g->row_ns = PEAK_ATTENTION_ROW_NS;
    g->kv_ns = PEAK_ATTENTION_KV_NS;
    g->slot_bytes = attention_slot_bytes(desc);
}

void PEAK_TIER_FN(peak_f32_attention_block)(float *o, const float *q, const void *k,
                                            const void *v, const peak_attention_desc *desc,
                                            const peak_attention_part *part, void *slot)
{
    attention_block_run(o, q, k, v, desc, part, slot);
}

void PEAK_TIER_FN(peak_f32_attention_rows)(float *o, const float *q, const void *k,
                                           const void *v, const peak_attention_desc *desc,
                                           const peak_attention_part *part, void *slot)
{
    attention_rows_run(o, q, k, v, desc, part, slot);
}

#endif /* PEAK_ATTENTION_BODY_H */
