/*
 * layernorm-body.h - the vector code of peak_add_layernorm, written once
 * against the vector vocabulary (simd/f32-*.h): the passes over a row and
 * the row loop.  A tier's file includes its vocabulary header, defines its
 * overrides and includes this file, which defines the tier's kernel
 * (PEAK_TIER_FN).
 * Algorithm, accuracy and memory behaviour: layernorm.h.
 *
 * Row ends: lanes past the row load as +0 (peak_vf_load_first), and pass 1
 * zeroes them again after the shift (0 - shift is not 0), so a row end
 * adds nothing to any sum; nothing outside a row's d_model floats is read
 * or written.  Pass 2 reads x[j] and r[j] (or the s[j] pass 1 kept:
 * layernorm_keeps) before it writes sum[j] and y[j], which keeps the
 * documented aliases (y == x, sum == x, sum == r) safe.
 *
 * Overrides, each defined by a tier before it includes this file:
 *   PEAK_LAYERNORM_HAS_GUESS    layernorm_guess(w), the shift guess;
 *   PEAK_LAYERNORM_HAS_DEV_END  layernorm_dev_blocked(n), the floats pass
 *     1's blocks take, and layernorm_dev_end(w, j, shift, acc1, acc2, d1,
 *     d2), pass 1 of the floats from j on and D1, D2 from the blocks'
 *     double sums acc1, acc2.
 */
#ifndef PEAK_LAYERNORM_BODY_H
#define PEAK_LAYERNORM_BODY_H

#include "layernorm.h"
#include "simd/typed.h"

/* Floats a step of pass 1: a vector for each chain. */
#define LAYERNORM_STEP (PEAK_LAYERNORM_CHAINS * PEAK_VF_LANES)
/* Floats a block, after which the float chains are widened into double. */
#define LAYERNORM_BLOCK (PEAK_LAYERNORM_BLOCK_STEPS * LAYERNORM_STEP)

/* Lanes of the vector at a row's j, left = n - j floats from its end. */
static inline size_t layernorm_lanes(size_t left)
{
    return left < PEAK_VF_LANES ? left : PEAK_VF_LANES;
}

/* s = x + r (r NULL: x), rounded to float as the reference does; x and
   r of the row's type, widened exactly. */
static inline __attribute__((always_inline)) peak_vf layernorm_load_s(const peak_layernorm_row *w,
                                                                      size_t j)
{
    const peak_vf x = peak_vf_loadu_as(peak_elem_at(w->x, (ptrdiff_t)j, w->t), w->t);
    return w->r ? peak_vf_add(x, peak_vf_loadu_as(peak_elem_at(w->r, (ptrdiff_t)j, w->t), w->t))
                : x;
}

/* The same for the k elements at j, +0 in the other lanes. */
static inline peak_vf layernorm_load_s_first(const peak_layernorm_row *w, size_t j, size_t k)
{
    const peak_vf x = peak_vf_load_first_as(peak_elem_at(w->x, (ptrdiff_t)j, w->t), k, w->t);
    return w->r ? peak_vf_add(x, peak_vf_load_first_as(peak_elem_at(w->r, (ptrdiff_t)j, w->t), k,
                                                       w->t))
                : x;
}

/* Whether pass 1 keeps s for pass 2 (layernorm_keeps; w->t a constant
   after inlining, so float32's loops test nothing). */
static inline __attribute__((always_inline)) bool layernorm_is_kept(const peak_layernorm_row *w)
{
    return w->t != PEAK_F32 && w->s;
}

/* Pass 1 keeps s at j for pass 2, where the row has room for it. */
static inline __attribute__((always_inline)) void layernorm_keep_s(const peak_layernorm_row *w,
                                                                   size_t j, peak_vf s)
{
    if (layernorm_is_kept(w))
        peak_vf_storeu(w->s + j, s);
}

/* Pass 2's s at j: the float pass 1 kept, or x + r again. */
static inline __attribute__((always_inline)) peak_vf layernorm_kept_s(const peak_layernorm_row *w,
                                                                      size_t j)
{
    return layernorm_is_kept(w) ? peak_vf_loadu(w->s + j) : layernorm_load_s(w, j);
}

/* Element j of row p of the row's type. */
static inline void *layernorm_out_at(const peak_layernorm_row *w, void *p, size_t j)
{
    return (char *)p + j * peak_dtype_bytes(w->t);
}

#ifndef PEAK_LAYERNORM_HAS_GUESS
/* The shift guess: the mean of the first (up to) PEAK_LAYERNORM_GUESS_FLOATS
   values, each scaled before the sum so that no float overflows.  Static,
   not inline: GCC decides, as for layernorm_dev (it inlines it at -O3). */
static float layernorm_guess(const peak_layernorm_row *w)
{
    const size_t k = w->n < PEAK_LAYERNORM_GUESS_FLOATS ? w->n : PEAK_LAYERNORM_GUESS_FLOATS;
    const peak_vf scale = peak_vf_set1(1.0f / (float)k);
    peak_vf v = peak_vf_mul(layernorm_load_s_first(w, 0, layernorm_lanes(k)), scale);
    for (size_t j = PEAK_VF_LANES; j < k; j += PEAK_VF_LANES) {
        const peak_vf s = layernorm_load_s_first(w, j, layernorm_lanes(k - j));
        v = peak_vf_add(v, peak_vf_mul(s, scale));
    }
    return peak_vf_reduce_add(v);
}
#endif

/* y from s and gamma and beta's lanes g and b: the last two steps in one
   FMA. */
static inline peak_vf layernorm_y(peak_vf s, peak_vf g, peak_vf b, peak_layernorm_stats st)
{
    const peak_vf d =
        peak_vf_sub(peak_vf_sub(s, peak_vf_set1(st.shift)), peak_vf_set1(st.corr));
    return peak_vf_fma(peak_vf_mul(d, peak_vf_set1(st.rstd)), g, b);
}

/* y (and sum) for the vector at j; stream: non-temporal stores
   (layernorm_streams). */
static inline __attribute__((always_inline)) void
layernorm_norm_vector(const peak_layernorm_row *w, size_t j, peak_layernorm_stats st, bool stream)
{
    const peak_vf s = layernorm_kept_s(w, j);
    const peak_vf g = w->gamma ? peak_vf_loadu(w->gamma + j) : peak_vf_set1(1.0f);
    const peak_vf b = w->beta ? peak_vf_loadu(w->beta + j) : peak_vf_zero();
    const peak_vf y = layernorm_y(s, g, b, st);
    if (stream) { /* aligned rows only (layernorm_streams) */
        if (w->sum)
            peak_vf_stream_as(layernorm_out_at(w, w->sum, j), s, w->t);
        peak_vf_stream_as(layernorm_out_at(w, w->y, j), y, w->t);
    } else {
        if (w->sum)
            peak_vf_storeu_as(layernorm_out_at(w, w->sum, j), s, w->t);
        peak_vf_storeu_as(layernorm_out_at(w, w->y, j), y, w->t);
    }
}

/* The same for the row's last k (< PEAK_VF_LANES) floats, at j. */
static inline void layernorm_norm_end(const peak_layernorm_row *w, size_t j, size_t k,
                                      peak_layernorm_stats st)
{
    const peak_vf s =
        layernorm_is_kept(w) ? peak_vf_load_first(w->s + j, k) : layernorm_load_s_first(w, j, k);
    const peak_vf g = w->gamma ? peak_vf_load_first(w->gamma + j, k) : peak_vf_set1(1.0f);
    const peak_vf b = w->beta ? peak_vf_load_first(w->beta + j, k) : peak_vf_zero();
    const peak_vf y = layernorm_y(s, g, b, st);
    if (w->sum)
        peak_vf_store_first_as(layernorm_out_at(w, w->sum, j), s, k, w->t);
    peak_vf_store_first_as(layernorm_out_at(w, w->y, j), y, k, w->t);
}

/* Pass 2 of w's floats from j on. */
static inline __attribute__((always_inline)) void
layernorm_norm_from(const peak_layernorm_row *w, size_t j, peak_layernorm_stats st, bool stream)
{
    for (; j + PEAK_VF_LANES <= w->n; j += PEAK_VF_LANES)
        layernorm_norm_vector(w, j, st, stream);
    if (j < w->n)
        layernorm_norm_end(w, j, w->n - j, st);
}

/* Whether w's stores may be non-temporal: a large call (stream) and every
   vector of the row on the boundary its streaming store needs
   (peak_vf_stream_as: PEAK_VF_ALIGN bytes, half that for 16-bit rows). */
static inline bool layernorm_streams(const peak_layernorm_row *w, bool stream)
{
    const uintptr_t align = w->t == PEAK_F32 ? PEAK_VF_ALIGN : PEAK_VF_ALIGN / 2;
    return stream && (uintptr_t)w->y % align == 0 && (uintptr_t)w->sum % align == 0;
}

#ifndef PEAK_LAYERNORM_HAS_DEV_END
/* The blocks take the whole row, its last vector masked. */
static inline size_t layernorm_dev_blocked(size_t n)
{
    return n;
}

/* So only D1 and D2 are left: the horizontal sums. */
static inline void layernorm_dev_end(const peak_layernorm_row *w, size_t j, float shift,
                                     peak_vd acc1, peak_vd acc2, double *d1, double *d2)
{
    (void)w;
    (void)j;
    (void)shift;
    *d1 = peak_vd_reduce_add(acc1);
    *d2 = peak_vd_reduce_add(acc2);
}
#endif

/* Pass 1 of the k (<= PEAK_VF_LANES) floats at j into the chains s1, s2;
   with cur, pass 2 of cur's. */
static inline __attribute__((always_inline)) void
layernorm_dev_vector(const peak_layernorm_row *w, size_t j, size_t k, peak_vf vshift, peak_vf *s1,
                     peak_vf *s2, const peak_layernorm_row *cur, peak_layernorm_stats st,
                     bool stream)
{
    peak_layernorm_prefetch(w->pf_x, j, w->t);
    peak_layernorm_prefetch(w->pf_r, j, w->t);
    const peak_vf s = layernorm_load_s_first(w, j, k);
    if (layernorm_is_kept(w))
        peak_vf_store_first(w->s + j, s, k);
    const peak_vf d = peak_vf_first_or(peak_vf_sub(s, vshift), k, 0.0f);
    *s1 = peak_vf_add(*s1, d);
    *s2 = peak_vf_fma(d, d, *s2);
    if (cur && k == PEAK_VF_LANES)
        layernorm_norm_vector(cur, j, st, stream);
    else if (cur) /* a partial vector ends the row: never streamed */
        layernorm_norm_end(cur, j, k, st);
}

/* Pass 1 of w's block [j, end) into the double sums acc1, acc2; with cur,
   pass 2 of cur's floats there in the same loop, a vector of cur for each
   vector of w (both rows have n floats). */
static inline __attribute__((always_inline)) void
layernorm_dev_block(const peak_layernorm_row *w, size_t j, size_t end, peak_vf vshift,
                    peak_vd *acc1, peak_vd *acc2, const peak_layernorm_row *cur,
                    peak_layernorm_stats st, bool stream)
{
    peak_vf s1a = peak_vf_zero(), s2a = peak_vf_zero(), s1b = peak_vf_zero(), s2b = peak_vf_zero();
    peak_vf s1c = peak_vf_zero(), s2c = peak_vf_zero(), s1d = peak_vf_zero(), s2d = peak_vf_zero();
    for (; j + LAYERNORM_STEP <= end; j += LAYERNORM_STEP) {
        for (size_t k = 0; k < LAYERNORM_STEP; k += PEAK_LAYERNORM_PREFETCH_FLOATS) {
            peak_layernorm_prefetch(w->pf_x, j + k, w->t);
            peak_layernorm_prefetch(w->pf_r, j + k, w->t);
        }
        /* cur first: GCC 12 (AVX2, -O3) then keeps seven of the eight
           chains in registers; with cur after the chains it spilled four. */
        if (cur)
            for (size_t k = 0; k < LAYERNORM_STEP; k += PEAK_VF_LANES)
                layernorm_norm_vector(cur, j + k, st, stream);
        const peak_vf sa = layernorm_load_s(w, j);
        const peak_vf sb = layernorm_load_s(w, j + PEAK_VF_LANES);
        const peak_vf sc = layernorm_load_s(w, j + 2 * PEAK_VF_LANES);
        const peak_vf sd = layernorm_load_s(w, j + 3 * PEAK_VF_LANES);
        layernorm_keep_s(w, j, sa);
        layernorm_keep_s(w, j + PEAK_VF_LANES, sb);
        layernorm_keep_s(w, j + 2 * PEAK_VF_LANES, sc);
        layernorm_keep_s(w, j + 3 * PEAK_VF_LANES, sd);
        const peak_vf da = peak_vf_sub(sa, vshift);
        const peak_vf db = peak_vf_sub(sb, vshift);
        const peak_vf dc = peak_vf_sub(sc, vshift);
        const peak_vf dd = peak_vf_sub(sd, vshift);
        s1a = peak_vf_add(s1a, da);
        s2a = peak_vf_fma(da, da, s2a);
        s1b = peak_vf_add(s1b, db);
        s2b = peak_vf_fma(db, db, s2b);
        s1c = peak_vf_add(s1c, dc);
        s2c = peak_vf_fma(dc, dc, s2c);
        s1d = peak_vf_add(s1d, dd);
        s2d = peak_vf_fma(dd, dd, s2d);
    }
    for (; j < end; j += PEAK_VF_LANES)
        layernorm_dev_vector(w, j, layernorm_lanes(end - j), vshift, &s1a, &s2a, cur, st, stream);
    *acc1 = peak_vd_add_widened(*acc1, peak_vf_add(peak_vf_add(s1a, s1b), peak_vf_add(s1c, s1d)));
    *acc2 = peak_vd_add_widened(*acc2, peak_vf_add(peak_vf_add(s2a, s2b), peak_vf_add(s2c, s2d)));
}

/* Pass 1 of w about shift: D1 and D2; with cur, pass 2 of cur in the same
   loop (always inlined, so that each use is compiled for its constant cur
   and stream). */
static inline __attribute__((always_inline)) void
layernorm_dev_rows(const peak_layernorm_row *w, float shift, double *d1, double *d2,
                   const peak_layernorm_row *cur, peak_layernorm_stats st, bool stream)
{
    const size_t blocked = layernorm_dev_blocked(w->n);
    const peak_vf vshift = peak_vf_set1(shift);
    peak_vd acc1 = peak_vd_zero(), acc2 = peak_vd_zero();
    for (size_t j = 0; j < blocked; j += LAYERNORM_BLOCK) {
        const size_t end = blocked - j < LAYERNORM_BLOCK ? blocked : j + LAYERNORM_BLOCK;
        layernorm_dev_block(w, j, end, vshift, &acc1, &acc2, cur, st, stream);
    }
    layernorm_dev_end(w, blocked, shift, acc1, acc2, d1, d2);
    if (cur && blocked < w->n)
        layernorm_norm_from(cur, blocked, st, stream);
}

/* Pass 1 alone.  Static, not inline: one out-of-line copy serves its
   three callers (none hot), as `inline` would have GCC copy 1 KiB into
   each. */
static void layernorm_dev(const peak_layernorm_row *w, float shift, double *d1, double *d2)
{
    const peak_layernorm_stats none = {0.0f, 0.0f, 0.0f, false};
    layernorm_dev_rows(w, shift, d1, d2, NULL, none, false);
}

/* Pass 2 of cur and pass 1 of next in one loop (layernorm.h,
   "Pipelining"): what layernorm_norm and layernorm_dev compute, bit for
   bit. */
static inline __attribute__((always_inline)) void
layernorm_fused(const peak_layernorm_row *cur, peak_layernorm_stats st,
                                   bool stream, const peak_layernorm_row *next, float shift,
                                   double *d1, double *d2)
{
    if (layernorm_streams(cur, stream))
        layernorm_dev_rows(next, shift, d1, d2, cur, st, true);
    else
        layernorm_dev_rows(next, shift, d1, d2, cur, st, false);
}

/* Pass 2 alone. */
static inline void layernorm_norm(const peak_layernorm_row *w, peak_layernorm_stats st,
                                  bool stream)
{
    layernorm_norm_from(w, 0, st, layernorm_streams(w, stream));
}

/* The statistics of w, pass 1 having run about shift: moves the shift and
   runs pass 1 again when it is too far off (layernorm.h, top). */
static inline peak_layernorm_stats layernorm_stats(const peak_layernorm_row *w, float shift,
                                                   double d1, double d2, float eps)
{
    if (peak_layernorm_reshift(d1, d2, w->n)) {
        shift = peak_layernorm_moved_shift(shift, d1, w->n);
        layernorm_dev(w, shift, &d1, &d2);
    }
    return peak_layernorm_stats_of(w, shift, d1, d2, eps);
}

/* The longest 16-bit row whose pass 1 keeps s = x + r for pass 2, which
   then loads it instead of widening x and r again (four instructions a
   vector fewer: the call 8% faster at bfloat16 65536 x 768 on AVX-512).
   16 KiB of stack for the two rows in flight, in a frame of their own
   (layernorm_rows_kept), which a reference row of such a call uses too:
   a call with longer rows keeps nothing and has the reference's 64 KiB
   row instead (peak.h's stack budget: 80 KiB). */
#define LAYERNORM_KEPT_FLOATS 2048

/* Whether a 16-bit call of rows of n floats keeps them whole. */
static inline bool layernorm_keeps(size_t n)
{
    return n <= LAYERNORM_KEPT_FLOATS && layernorm_dev_blocked(n) == n;
}

/* The rows, pass 2 of each row run with pass 1 of the next (layernorm.h,
   "Pipelining"); rows the statistics leave to the reference go there.
   kept: 2 * LAYERNORM_KEPT_FLOATS floats, each row's s in one half in
   turn (layernorm_keeps), or NULL. */
static inline __attribute__((always_inline)) void
layernorm_run(const peak_layernorm_args *a, float eps, bool stream, float *kept)
{
    assert(a->y && a->x && a->rows > 0 && a->d_model > 0 && eps >= 0.0f);
    peak_layernorm_row cur = peak_layernorm_row_at(a, 0);
    cur.s = kept;
    float shift = layernorm_guess(&cur);
    double d1, d2;
    layernorm_dev(&cur, shift, &d1, &d2);
    peak_layernorm_stats st = layernorm_stats(&cur, shift, d1, d2, eps);
    for (size_t t = 1; t < a->rows; t++) {
        peak_layernorm_row next = peak_layernorm_row_at(a, t);
        next.s = kept ? kept + t % 2 * LAYERNORM_KEPT_FLOATS : NULL;
        shift = layernorm_guess(&next);
        if (st.reference) {
            peak_layernorm_reference(a, &cur, eps);
            layernorm_dev(&next, shift, &d1, &d2);
        } else {
            layernorm_fused(&cur, st, stream, &next, shift, &d1, &d2);
        }
        st = layernorm_stats(&next, shift, d1, d2, eps);
        cur = next;
    }
    if (st.reference)
        peak_layernorm_reference(a, &cur, eps);
    else
        layernorm_norm(&cur, st, stream);
}

/* peak_add_layernorm's rows (peak.h), arguments validated, of element
   type T (a constant after inlining, so each type has its own loops): a
   tier's kernel. */
static inline __attribute__((always_inline)) void
layernorm_rows(void *y, ptrdiff_t ld_y, void *sum, ptrdiff_t ld_sum, const void *x, ptrdiff_t ld_x,
               const void *r, ptrdiff_t ld_r, const float *gamma, const float *beta, size_t rows,
               size_t d_model, float eps, peak_dtype T, size_t rows_after, bool stream,
               float *kept)
{
    const peak_layernorm_args a = {y,    ld_y,  sum,  ld_sum, x,       ld_x,       r,
                                   ld_r, gamma, beta, rows,   d_model, rows_after, T};
    layernorm_run(&a, eps, stream, kept);
    /* Streaming stores (large calls) are weakly ordered: fence them. */
    peak_vf_stream_fence();
}

static void layernorm_rows_f32(void *y, ptrdiff_t ld_y, void *sum, ptrdiff_t ld_sum,
                               const void *x, ptrdiff_t ld_x, const void *r, ptrdiff_t ld_r,
                               const float *gamma, const float *beta, size_t rows, size_t d_model,
                               float eps, size_t rows_after, bool stream)
{
    layernorm_rows(y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta, rows, d_model, eps,
                   PEAK_F32, rows_after, stream, NULL);
}

/* A 16-bit call's rows with their s kept (layernorm_keeps), in a frame of
   their own; the callers below, their type a constant. */
#define LAYERNORM_ROWS_ARGS                                                                       \
    y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta, rows, d_model, eps

__attribute__((noinline)) static void
layernorm_rows_bf16_kept(void *y, ptrdiff_t ld_y, void *sum, ptrdiff_t ld_sum, const void *x,
                         ptrdiff_t ld_x, const void *r, ptrdiff_t ld_r, const float *gamma,
                         const float *beta, size_t rows, size_t d_model, float eps,
                         size_t rows_after, bool stream)
{
    float kept[2 * LAYERNORM_KEPT_FLOATS];
    layernorm_rows(LAYERNORM_ROWS_ARGS, PEAK_BF16, rows_after, stream, kept);
}

static void layernorm_rows_bf16(void *y, ptrdiff_t ld_y, void *sum, ptrdiff_t ld_sum,
                                const void *x, ptrdiff_t ld_x, const void *r, ptrdiff_t ld_r,
                                const float *gamma, const float *beta, size_t rows,
                                size_t d_model, float eps, size_t rows_after, bool stream)
{
    if (layernorm_keeps(d_model))
        layernorm_rows_bf16_kept(LAYERNORM_ROWS_ARGS, rows_after, stream);
    else
        layernorm_rows(LAYERNORM_ROWS_ARGS, PEAK_BF16, rows_after, stream, NULL);
}

PEAK_VF_F16_TARGET __attribute__((noinline)) static void
layernorm_rows_f16_kept(void *y, ptrdiff_t ld_y, void *sum, ptrdiff_t ld_sum, const void *x,
                        ptrdiff_t ld_x, const void *r, ptrdiff_t ld_r, const float *gamma,
                        const float *beta, size_t rows, size_t d_model, float eps,
                        size_t rows_after, bool stream)
{
    float kept[2 * LAYERNORM_KEPT_FLOATS];
    layernorm_rows(LAYERNORM_ROWS_ARGS, PEAK_F16, rows_after, stream, kept);
}

PEAK_VF_F16_TARGET static void layernorm_rows_f16(void *y, ptrdiff_t ld_y, void *sum,
                                                  ptrdiff_t ld_sum, const void *x, ptrdiff_t ld_x,
                                                  const void *r, ptrdiff_t ld_r,
                                                  const float *gamma, const float *beta,
                                                  size_t rows, size_t d_model, float eps,
                                                  size_t rows_after, bool stream)
{
    if (layernorm_keeps(d_model))
        layernorm_rows_f16_kept(LAYERNORM_ROWS_ARGS, rows_after, stream);
    else
        layernorm_rows(LAYERNORM_ROWS_ARGS, PEAK_F16, rows_after, stream, NULL);
}

#undef LAYERNORM_ROWS_ARGS

/* ---- the kernel of the including tier (kernels.inc) ---- */

void PEAK_TIER_FN(peak_f32_add_layernorm)(void *y, ptrdiff_t ld_y, void *sum, ptrdiff_t ld_sum,
                                          const void *x, ptrdiff_t ld_x, const void *r,
                                          ptrdiff_t ld_r, const float *gamma, const float *beta,
                                          size_t rows, size_t d_model, float eps,
                                          peak_dtype type, size_t rows_after, bool stream)
{
    if (type == PEAK_BF16)
        layernorm_rows_bf16(y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta, rows, d_model,
                            eps, rows_after, stream);
    else if (type == PEAK_F16)
        layernorm_rows_f16(y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta, rows, d_model,
                           eps, rows_after, stream);
    else
        layernorm_rows_f32(y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta, rows, d_model,
                           eps, rows_after, stream);
}

#endif /* PEAK_LAYERNORM_BODY_H */
