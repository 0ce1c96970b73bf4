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

static bool isa_pack_rows(float *dst, size_t ld, const float *const *src, size_t n, size_t dv)
{
    peak_vf vbad = peak_vf_zero(); /* x - x: NaN exactly for inf and NaN */
    float tail = 0.0f;
    for (size_t j = 0; j < n; j++) {
        size_t c = 0;
        for (; c + PEAK_VF_LANES <= dv; c += PEAK_VF_LANES) {
            const peak_vf vx = peak_vf_loadu(src[j] + c);
            vbad = peak_vf_add(vbad, peak_vf_sub(vx, vx));
            peak_vf_store(dst + j * ld + c, vx);
        }
#if PEAK_ATTENTION_PACK_VECTOR_TAIL
        if (c < dv) {
            const peak_vf vx = peak_vf_load_first(src[j] + c, dv - c);
            vbad = peak_vf_add(vbad, peak_vf_sub(vx, vx));
            peak_vf_store(dst + j * ld + c, vx);
        }
#else
        for (; c < dv; c++) {
            dst[j * ld + c] = src[j][c];
            tail += src[j][c] - src[j][c];
        }
#endif
    }
    /* vbad != vbad exactly in its NaN lanes. */
    return !peak_vf_any_ne(vbad, vbad) && !isnan(tail);
}

/* ---- the row path ---------------------------------------------------------- */

/* One FMA chain a key, a vector of keys at once (PEAK_VF_LANES chains
   cover the FMA latency), reduced together by peak_vf_sum_lanes: ~3
   operations a key where a reduction per key took 8 (a decode step's row
   path, 13.6 ns a key with K/V in L2 on Sapphire Rapids, was bound by
   them).  The last dh % lanes floats through peak_vf_load_first: nothing
   past a row is read. */
static inline __attribute__((always_inline)) peak_vf isa_row_dots(const float *q,
                                                                  const float *const *kp,
                                                                  size_t dh)
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
            acc[j] = peak_vf_fma(vq, peak_vf_loadu(kp[j] + c), acc[j]);
    }
    if (c < dh) {
        const peak_vf vq = peak_vf_load_first(q + c, dh - c);
#pragma GCC unroll 16
        for (int j = 0; j < PEAK_VF_LANES; j++)
            acc[j] = peak_vf_fma(vq, peak_vf_load_first(kp[j] + c, dh - c), acc[j]);
    }
    return peak_vf_sum_lanes(acc);
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

void PEAK_TIER_FN(peak_f32_attention_block)(float *o, const float *q, const float *k,
                                            const float *v, const peak_attention_desc *desc,
                                            const peak_attention_part *part, void *slot)
{
    attention_block_run(o, q, k, v, desc, part, slot);
}

void PEAK_TIER_FN(peak_f32_attention_rows)(float *o, const float *q, const float *k,
                                           const float *v, const peak_attention_desc *desc,
                                           const peak_attention_part *part, void *slot)
{
    attention_rows_run(o, q, k, v, desc, part, slot);
}

#endif /* PEAK_ATTENTION_BODY_H */
