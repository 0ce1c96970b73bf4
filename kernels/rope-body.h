/*
 * rope-body.h - the rotary embedding's vector code, written once against
 * the vector vocabulary (simd/f32-<isa>.h, which the tier's file includes
 * first): the cache emits and the head rotation that rope.h's drivers
 * call, and the tier's kernels (PEAK_TIER_FN).
 *
 * Bit-identical to the scalar tier: the sincos is the tier's
 * peak_pe_sincos_chunk, the emits are the scalar ones with each operation
 * replaced by the vector one that rounds the same way (fma(a, b, -c) ->
 * peak_vd_fms, (float) -> peak_vd_narrow), and the rotation is two
 * products and one add per element as there.  Row ends use the
 * vocabulary's load_first / store_first: nothing outside a row is read or
 * written.
 */
#ifndef PEAK_ROPE_BODY_H
#define PEAK_ROPE_BODY_H

#include "rope.h"

#include <stdint.h>
#include <string.h>

#ifndef PEAK_VD_LANES
#error "include a vector vocabulary (simd/f32-<isa>.h) before rope-body.h"
#endif

/* ---- the cache ----------------------------------------------------------- */

/* Frequencies j .. j + m - 1 of a chunk, m <= PEAK_VD_LANES, into row. */
static inline void rope_store_pair(float *row, size_t n, size_t at, peak_vfh c, peak_vfh s,
                                   size_t m)
{
    if (m == PEAK_VD_LANES) {
        peak_vfh_storeu(row + at, c);
        peak_vfh_storeu(row + n + at, s);
    } else {
        peak_vfh_store_first(row + at, c, m);
        peak_vfh_store_first(row + n + at, s, m);
    }
}

static void rope_emit_exact(float *row, const peak_rope_freqs *f, size_t i0, size_t nc,
                            const double *sb, const double *cb, const double *sk,
                            const double *ck)
{
    const peak_vd a = peak_vd_set1(f->af);
    for (size_t j = 0; j < nc; j += PEAK_VD_LANES) {
        const peak_vd vsb = peak_vd_load(sb + j), vcb = peak_vd_load(cb + j);
        const peak_vd vsk = peak_vd_load(sk + j), vck = peak_vd_load(ck + j);
        const peak_vd c = peak_vd_fms(vcb, vck, peak_vd_mul(vsb, vsk));
        const peak_vd s = peak_vd_fma(vsb, vck, peak_vd_mul(vcb, vsk));
        const size_t m = nc - j < PEAK_VD_LANES ? nc - j : PEAK_VD_LANES;
        rope_store_pair(row, f->n, i0 + j, peak_vd_narrow(peak_vd_mul(c, a)),
                        peak_vd_narrow(peak_vd_mul(s, a)), m);
    }
}

static void rope_emit_hf(float *row, const peak_rope_freqs *f, size_t i0, size_t nc,
                         const double *s, const double *c)
{
    const peak_vfh a = peak_vfh_set1(f->af_f32);
    for (size_t j = 0; j < nc; j += PEAK_VD_LANES) {
        const size_t m = nc - j < PEAK_VD_LANES ? nc - j : PEAK_VD_LANES;
        rope_store_pair(row, f->n, i0 + j, peak_vfh_mul(peak_vd_narrow(peak_vd_load(c + j)), a),
                        peak_vfh_mul(peak_vd_narrow(peak_vd_load(s + j)), a), m);
    }
}

void PEAK_TIER_FN(peak_f32_rope_cache)(float *out, ptrdiff_t ld_out, size_t n_rows, size_t pos0,
                                       const int64_t *pos, const peak_rope_freqs *f)
{
    peak_rope_rows_run(out, ld_out, n_rows, pos0, pos, f, PEAK_TIER_FN(peak_pe_sincos_chunk),
                       rope_emit_exact, rope_emit_hf);
}

/* ---- the rotation -------------------------------------------------------- */

/* A full vector of y: non-temporal where the head streams (rope_streams). */
static inline void rope_store(float *p, peak_vf v, bool nt)
{
    if (nt)
        peak_vf_stream(p, v);
    else
        peak_vf_storeu(p, v);
}

/* Whether a head's n-element runs at y (each a multiple of whole vectors
   from y on) stream: a streaming call, and y on a vector boundary. */
static inline bool rope_streams(const float *y, size_t n, bool stream)
{
    return stream && (uintptr_t)y % PEAK_VF_ALIGN == 0 && n % PEAK_VF_LANES == 0;
}

/* The half-split rotation (rope.h) over n-element halves, c and s the
   row's cosines and sines.  Both halves are loaded before either is
   stored, so y may be x. */
static inline void rope_half_split(float *y, const float *x, const float *c, const float *s,
                                   size_t n, bool stream)
{
    const bool nt = rope_streams(y, n, stream);
    size_t i = 0;
    for (; i + PEAK_VF_LANES <= n; i += PEAK_VF_LANES) {
        const peak_vf a = peak_vf_loadu(x + i), b = peak_vf_loadu(x + n + i);
        const peak_vf vc = peak_vf_loadu(c + i), vs = peak_vf_loadu(s + i);
        rope_store(y + i, peak_vf_sub(peak_vf_mul(a, vc), peak_vf_mul(b, vs)), nt);
        rope_store(y + n + i, peak_vf_add(peak_vf_mul(b, vc), peak_vf_mul(a, vs)), nt);
    }
    if (i < n) {
        const size_t m = n - i;
        const peak_vf a = peak_vf_load_first(x + i, m), b = peak_vf_load_first(x + n + i, m);
        const peak_vf vc = peak_vf_load_first(c + i, m), vs = peak_vf_load_first(s + i, m);
        peak_vf_store_first(y + i, peak_vf_sub(peak_vf_mul(a, vc), peak_vf_mul(b, vs)), m);
        peak_vf_store_first(y + n + i, peak_vf_add(peak_vf_mul(b, vc), peak_vf_mul(a, vs)), m);
    }
}

/* The same over r elements with each pair's partner the other lane of the
   pair: a vector (even lane count) holds whole pairs. */
static inline void rope_interleaved(float *y, const float *x, const float *c2, const float *s2,
                                    size_t r, bool stream)
{
    const bool nt = rope_streams(y, r, stream);
    size_t j = 0;
    for (; j + PEAK_VF_LANES <= r; j += PEAK_VF_LANES) {
        const peak_vf v = peak_vf_loadu(x + j);
        rope_store(y + j,
                   peak_vf_add(peak_vf_mul(v, peak_vf_loadu(c2 + j)),
                               peak_vf_mul(peak_vf_swap_pairs(v), peak_vf_loadu(s2 + j))),
                   nt);
    }
    if (j < r) {
        const size_t m = r - j;
        const peak_vf v = peak_vf_load_first(x + j, m);
        peak_vf_store_first(y + j,
                            peak_vf_add(peak_vf_mul(v, peak_vf_load_first(c2 + j, m)),
                                        peak_vf_mul(peak_vf_swap_pairs(v),
                                                    peak_vf_load_first(s2 + j, m))),
                            m);
    }
}

static void rope_head(float *y, const float *x, const float *cs, size_t r,
                      const peak_rope_desc *d, bool copy_tail, bool stream)
{
    if (d->pairing == PEAK_ROPE_HALF_SPLIT)
        rope_half_split(y, x, cs, cs + r / 2, r / 2, stream);
    else
        rope_interleaved(y, x, cs, cs + r, r, stream);
    if (copy_tail && d->head_dim > r)
        memcpy(y + r, x + r, (d->head_dim - r) * sizeof *y);
}

void PEAK_TIER_FN(peak_f32_rope_apply)(float *y, const float *x, const peak_rope_desc *desc,
                                       const peak_rope_freqs *f, size_t b, size_t l0, size_t l1,
                                       bool stream)
{
    peak_rope_apply_run(y, x, desc, f, b, l0, l1, stream, PEAK_TIER_FN(peak_f32_rope_cache),
                        rope_head);
    if (stream) /* the item's streamed lines reach memory before it ends */
        peak_vf_stream_fence();
}

#endif /* PEAK_ROPE_BODY_H */
