/*
 * attention-isa.h - the micro-kernels the including tier file defines for
 * the attention driver (part of attention.h; include that, not this): the
 * tile path's isa_scores, isa_logits, isa_online_softmax, isa_pv and
 * isa_pack_rows, the row path's isa_row_dots, isa_row_softcap, isa_row_exp and
 * isa_row_pv, each with its contract, and
 * PEAK_ATTENTION_DEFINE_ROW_PAIR_DRIVERS, which defines isa_scores and
 * isa_pv for tiers whose micro-kernels take one or two row vectors.
 * Expects attention_ws (attention-workspace.h) and PEAK_ATTENTION_VW,
 * PEAK_ATTENTION_BQ.
 */
#ifndef PEAK_ATTENTION_ISA_H
#define PEAK_ATTENTION_ISA_H
#ifndef PEAK_ATTENTION_H
#error "include attention.h, which includes this after its prerequisites"
#endif

/* The including file's micro-kernels (row ranges [r0, r1) are whole
   vectors; st, qt, oacc and bt are [.][BQ] with rows along the lanes). */
/* isa_scores stores the scaled scores S^T * scale and raises tmax[r] to
   their max (the softmax's first pass, fused into the micro-kernel's
   epilogue while the scores are in registers); isa_online_softmax takes
   that max for an unmasked tile (bt NULL) and otherwise adds B^T and
   takes the max itself. */
static void isa_scores(float *st, const float *const *kp, const float *qt, size_t dh, size_t n,
                       float scale, float *tmax, size_t r0, size_t r1);
static void isa_online_softmax(const attention_ws *w, const float *bt, size_t dv, size_t n,
                               size_t r0, size_t r1);
/* The logit options that shape the scores (peak_logits), in their order:
   soft-capping, then ALiBi's -slope * distance(aref, key) (the row's
   shift is the finish's: attention_alibi_ref). */
typedef struct attention_logit_pass {
    bool capped, alibi, symmetric;
    float cap;
    const float *slope; /* [BQ] per row */
    const float *base;  /* [BQ] per row: (float)(aref - t0), key t0's distance */
} attention_logit_pass;
/* After isa_scores: st[j][r] shaped by lp for keys t0 + j, j < n, rows
   [r0, r1), and tmax[r] their max (attention-body.h, over the vector
   vocabulary).  Masked scores are shaped too (finite garbage or NaN),
   and B^T's select drops them. */
static void isa_logits(float *st, float *tmax, const attention_logit_pass *lp, size_t n,
                       size_t r0, size_t r1);
/* V rows are v + j * ldv (packed): one pointer stepping by ldv, so that
   the column broadcasts are fixed displacements from it (through a pointer
   array, GCC kept the column offsets on the stack and reloaded them before
   every broadcast of the AVX2 P.V, which ran 45% slower than the scores). */
static void isa_pv(float *oacc, const float *v, size_t ldv, const float *pt, size_t dv, size_t n,
                   size_t r0, size_t r1);
/* isa_scores() and isa_pv() for tiers whose micro-kernels take one or two
   row vectors (AVX2, NEON): scores_core(st, kp, qt, dh, scale, tmax, width,
   pairs) and
   pv_core(oacc, v, ldv, pt, n, width, pairs) over key (value) columns in
   steps of nj, then 4, then 1; row pairs, then a single row vector if the
   count is odd. */
#define PEAK_ATTENTION_ROW_PAIRS(f, width, ...)                                                    \
    do {                                                                                           \
        size_t r_ = r0;                                                                            \
        for (; r_ + 2 * PEAK_ATTENTION_VW <= r1; r_ += 2 * PEAK_ATTENTION_VW)                      \
            f(__VA_ARGS__, width, 2);                                                              \
        if (r_ < r1)                                                                               \
            f(__VA_ARGS__, width, 1);                                                              \
    } while (0)

#define PEAK_ATTENTION_DEFINE_ROW_PAIR_DRIVERS(nj)                                                 \
    static void isa_scores(float *st, const float *const *kp, const float *qt, size_t dh,          \
                           size_t n, float scale, float *tmax, size_t r0, size_t r1)               \
    {                                                                                              \
        size_t j = 0;                                                                              \
        for (; j + (nj) <= n; j += (nj))                                                           \
            PEAK_ATTENTION_ROW_PAIRS(scores_core, nj, st + j * PEAK_ATTENTION_BQ + r_, kp + j,     \
                                     qt + r_, dh, scale, tmax + r_);                               \
        for (; j + 4 <= n; j += 4)                                                                 \
            PEAK_ATTENTION_ROW_PAIRS(scores_core, 4, st + j * PEAK_ATTENTION_BQ + r_, kp + j,      \
                                     qt + r_, dh, scale, tmax + r_);                               \
        for (; j < n; j++)                                                                         \
            PEAK_ATTENTION_ROW_PAIRS(scores_core, 1, st + j * PEAK_ATTENTION_BQ + r_, kp + j,      \
                                     qt + r_, dh, scale, tmax + r_);                               \
    }                                                                                              \
    static void isa_pv(float *oacc, const float *v, size_t ldv, const float *pt, size_t dv,        \
                       size_t n, size_t r0, size_t r1)                                             \
    {                                                                                              \
        size_t c = 0;                                                                              \
        for (; c + (nj) <= dv; c += (nj))                                                          \
            PEAK_ATTENTION_ROW_PAIRS(pv_core, nj, oacc + c * PEAK_ATTENTION_BQ + r_, v + c, ldv,   \
                                     pt + r_, n);                                                  \
        for (; c + 4 <= dv; c += 4)                                                                \
            PEAK_ATTENTION_ROW_PAIRS(pv_core, 4, oacc + c * PEAK_ATTENTION_BQ + r_, v + c, ldv,    \
                                     pt + r_, n);                                                  \
        for (; c < dv; c++)                                                                        \
            PEAK_ATTENTION_ROW_PAIRS(pv_core, 1, oacc + c * PEAK_ATTENTION_BQ + r_, v + c, ldv,    \
                                     pt + r_, n);                                                  \
    }

/* Copies rows src[0 .. n-1] (dv elements of type t each) to dst as floats
   (row stride ld); returns false if one of them holds an inf or NaN. */
static bool isa_pack_rows(float *dst, size_t ld, const void *const *src, size_t n, size_t dv,
                          peak_dtype t);
/* The row path (a block of fewer than PEAK_ATTENTION_VW / 2 rows: decode).  Lane j:
   the dot product of q (dh floats) with row kp[j] (dh elements of type kt), for
   PEAK_ATTENTION_VW rows. */
static peak_vf isa_row_dots(const float *q, const void *const *kp, size_t dh, peak_dtype kt);
/* Rows of one kv head the row path walks together, at most (they number
   fewer than PEAK_ATTENTION_VW / 2: attention_rows_tile_together). */
#define PEAK_ATTENTION_GROUP_ROWS (PEAK_ATTENTION_VW > 2 ? PEAK_ATTENTION_VW / 2 - 1 : 1)
/* isa_row_dots for nr <= PEAK_ATTENTION_GROUP_ROWS query rows q[r] at once,
   each key vector loaded once for all: dots[r] is isa_row_dots(q[r], ...),
   bit for bit. */
static void isa_rows_dots(peak_vf *dots, const float *const *q, size_t nr, const void *const *kp,
                          size_t dh, peak_dtype kt);
/* s[j] = cap tanh(s[j] / cap) in place (attention-body.h). */
static void isa_row_softcap(float *s, float cap, size_t n);
/* s[j] = 2^((s[j] - m) log2 e) in place; returns their sum. */
static float isa_row_exp(float *s, float m, size_t n);
/* acc = acc * alpha + sum_j p[j] V[vp[j]] (V rows of type vt) over the keys with vp[j] != NULL
   (a masked key's V is not read; a visible one's is, even where p[j] is 0,
   so that a NaN there reaches the row as in the scalar tier); acc holds
   round16(dv) floats. */
static void isa_row_pv(float *acc, float alpha, const float *p, const void *const *vp, size_t n,
                       size_t dv, peak_dtype vt);
/* isa_row_pv for nr rows at once (acc[r], alpha[r], p[r]), each V row
   loaded once for all; the same bits as nr calls. */
static void isa_rows_pv(float *const *acc, const float *alpha, const float *const *p, size_t nr,
                        const void *const *vp, size_t n, size_t dv, peak_dtype vt);

#endif /* PEAK_ATTENTION_ISA_H */
