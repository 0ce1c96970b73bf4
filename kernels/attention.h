/*
 * attention.h - the tile driver shared by the AVX2, AVX-512 and NEON
 * attention kernels (peak_attention in peak.h).  Everything here is plain C: block
 * planning, the masks, Q packing, the rare exact paths and the final
 * division.  The including file supplies the vector micro-kernels and the
 * tile sizes, then calls attention_tiles_run():
 *
 *   PEAK_ATTENTION_VW  lanes per vector;   PEAK_ATTENTION_BQ  query rows per block (a multiple
 *   of PEAK_ATTENTION_VW, at most 64);     PEAK_ATTENTION_BC  keys per tile;
 *   isa_scores(), isa_online_softmax(), isa_pv(), isa_pack_rows() and the
 *   row path's isa_dot(), isa_row_exp(), isa_row_pv() (their contracts
 *   are stated where they are declared below); optionally PEAK_ATTENTION_T8X8_IN and
 *   PEAK_ATTENTION_T8X8_OUT, 8 x 8 transposes for the block start and finish.
 *
 * Design.  Flash-style: per kv head, blocks of PEAK_ATTENTION_BQ query rows -- the
 * rows of every query head sharing that kv head (GQA), position-major, so
 * that decode and MQA fill a block too -- stream over tiles of PEAK_ATTENTION_BC
 * keys with an online softmax (running max m and sum l per row, one
 * rescale of the accumulator per tile).  Both products are laid out
 * transposed, with query rows along the vector lanes:
 *   S^T[j][r] = sum_d K[j][d] Q^T[d][r]     (Q^T packed once per block)
 *   O^T[c][r] += sum_j V[j][c] P^T[j][r]
 * so K and V enter as broadcasts (one per element, no column tails), the
 * softmax over keys is element-wise across the vectors of a tile (no
 * horizontal reductions), and the per-row rescale is one multiply per
 * accumulator vector.  K and V tiles are copied contiguously first (any
 * strides), and a kv head's whole tiles are kept for its next blocks (the
 * tile cache, up to PEAK_ATTENTION_CACHE_BYTES).  Decode -- a kv head with fewer
 * than PEAK_ATTENTION_VW / 2 rows -- takes the row path instead, vectorised along
 * head_dim, several kv heads' rows walking the keys in step.
 *
 * Masks.  Each row's structural key range comes from mask.h.  A tile no
 * active row can see is skipped; rows whose vectors see nothing of the
 * tile are not computed.  A tile every active row sees whole (and no
 * keep/bias mask) runs unmasked.  Otherwise an additive tile B^T (bias or
 * 0 where visible, -inf where not) is built, and a key no row of the block
 * sees is "dead": its K and V pointers are redirected to a row of zeros, so
 * masked keys are never read.  A key visible to some rows but not others
 * is read; if one of its V values is inf or NaN the tile falls back to an
 * exact P.V that skips zero weights, so that 0 * inf cannot reach a row
 * that does not see the key.
 *
 * Special rows need no branch in the vector code: with m_safe = 0 when
 * m = -inf, a row that has seen no visible score keeps p = 0 and l = 0
 * (zeros, lse -inf), and a visible +inf or NaN score makes l NaN, which
 * stays NaN (O and lse NaN), as the scalar reference specifies.
 */
#ifndef PEAK_ATTENTION_H
#define PEAK_ATTENTION_H

#include "internal.h"
#include "mask.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define PEAK_ATTENTION_NRV (PEAK_ATTENTION_BQ / PEAK_ATTENTION_VW) /* row vectors per block */

/* Scratch, carved from the caller's 64-byte aligned workspace. */
typedef struct attention_ws {
    float *qt;    /* Q^T [head_dim][BQ]                       */
    float *st;    /* S^T, then P^T, [BC][BQ]                  */
    float *bt;    /* B^T [BC][BQ] (masked tiles only)         */
    float *oacc;  /* O^T [v_head_dim][BQ]                     */
    float *m, *l; /* running max and sum [BQ]                 */
    float *tmax;  /* the tile's max scaled score [BQ]         */
    float *oacc2, *m2, *l2; /* the folded sums (attention_fold)  */
    float *zero;  /* max(head_dim, v_head_dim) zeros          */
    float *vpack; /* the tile's V rows [BC][round16(v_head_dim)] */
    float *kpack; /* the tile's K rows [BC][round16(head_dim)]   */
    const float **kp, **vp; /* key rows of the tile [BC]      */
    /* The kv head's packed tiles, shared by its query blocks: tile t holds
       keys t*BC .. t*BC + cache_n[t] - 1. */
    float *kcache, *vcache; /* [cache_tiles * BC][round16(head_dim or v_head_dim)] */
    uint32_t *cache_n;      /* [cache_tiles] */
    size_t cache_tiles;
} attention_ws;

/* Bytes of packed K and V kept per kv head, at most: the tiles of 4096 keys
   of Dh = Dv = 64, a core's L2 on current servers.  Beyond it a block packs
   its tiles itself, as without the cache. */
#define PEAK_ATTENTION_CACHE_BYTES ((size_t)2 << 20)

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

/* Copies rows src[0 .. n-1] (dv floats each) to dst (row stride ld);
   returns false if one of them holds an inf or NaN. */
static bool isa_pack_rows(float *dst, size_t ld, const float *const *src, size_t n, size_t dv);
/* The row path (a block of fewer than PEAK_ATTENTION_VW / 2 rows: decode).  The dot
   product of two vectors of n floats (one rounding per FMA). */
static float isa_dot(const float *a, const float *b, size_t n);
/* s[j] = 2^((s[j] - m) log2 e) in place; returns their sum. */
static float isa_row_exp(float *s, float m, size_t n);
/* acc = acc * alpha + sum_j p[j] V[vp[j]] over the keys with vp[j] != NULL
   (a masked key's V is not read; a visible one's is, even where p[j] is 0,
   so that a NaN there reaches the row as in the scalar tier); acc holds
   round16(dv) floats. */
static void isa_row_pv(float *acc, float alpha, const float *p, const float *const *vp, size_t n,
                       size_t dv);

/* One block: up to BQ rows (query head, position) sharing one kv head. */
typedef struct attention_block {
    const peak_attention_desc *d;
    const float *k, *v; /* key 0 of the kv head */
    size_t b, rows;
    bool elem_masks;    /* keep or bias present */
    size_t lo[PEAK_ATTENTION_BQ], hi[PEAK_ATTENTION_BQ];
    size_t head[PEAK_ATTENTION_BQ], pos[PEAK_ATTENTION_BQ];
    const uint8_t *keep[PEAK_ATTENTION_BQ];
    const float *bias[PEAK_ATTENTION_BQ];
} attention_block;

static inline size_t attention_round16(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

/* Tiles of the kv head's K and V worth keeping packed: none when the kv
   head has a single block of query rows (it reads each tile once anyway),
   else those of the first PEAK_ATTENTION_CACHE_BYTES.  Whole-tile reuse is what the
   cache buys: a [B, L, H, D] layout puts one head's rows a power of two
   apart, so they share a few L2 sets and are evicted between blocks, and
   each block would pack every tile again (the cache made L = 2048, H = 8
   in that layout 12% faster, measured). */
static inline size_t attention_cache_tiles(const peak_attention_desc *d)
{
    const size_t group = d->heads / d->kv_heads;
    if (d->q_len <= PEAK_ATTENTION_BQ / group)
        return 0;
    const size_t tile_bytes = PEAK_ATTENTION_BC *
                              (attention_round16(d->head_dim) + attention_round16(d->v_head_dim)) *
                              sizeof(float);
    const size_t fit = PEAK_ATTENTION_CACHE_BYTES / tile_bytes,
                 need = (d->kv_len + PEAK_ATTENTION_BC - 1) / PEAK_ATTENTION_BC;
    return need < fit ? need : fit;
}

/* Floats of each region, in the order attention_ws_carve lays them out; 0 on
   overflow. */
static inline size_t attention_ws_floats(const peak_attention_desc *d)
{
    const size_t dmax = d->head_dim > d->v_head_dim ? d->head_dim : d->v_head_dim;
    if (dmax > SIZE_MAX / 8 / PEAK_ATTENTION_BQ / 2)
        return 0;
    const size_t ptrs = attention_round16(2 * PEAK_ATTENTION_BC * sizeof(float *) / sizeof(float));
    const size_t tile =
        PEAK_ATTENTION_BC * (attention_round16(d->v_head_dim) + attention_round16(d->head_dim));
    const size_t ct = attention_cache_tiles(d);
    return attention_round16(d->head_dim * PEAK_ATTENTION_BQ) +
           2 * PEAK_ATTENTION_BC * PEAK_ATTENTION_BQ +
           2 * attention_round16(d->v_head_dim * PEAK_ATTENTION_BQ) + 5 * PEAK_ATTENTION_BQ +
           attention_round16(dmax) + ptrs + tile + ct * tile + attention_round16(ct);
}

/* The workspace: O(BQ * (head_dim + v_head_dim + 2 BC)) floats for the
   tiles, plus at most PEAK_ATTENTION_CACHE_BYTES of packed K and V; independent of
   Lq beyond that. */
static inline size_t attention_tiles_workspace(const peak_attention_desc *d)
{
    const size_t n = attention_ws_floats(d);
    if (n == 0 || n > SIZE_MAX / sizeof(float))
        return SIZE_MAX & ~(size_t)63;
    return n * sizeof(float);
}

static inline attention_ws attention_ws_carve(void *workspace, const peak_attention_desc *d)
{
    float *p = (float *)workspace;
    attention_ws w;
    w.qt = p;
    p += attention_round16(d->head_dim * PEAK_ATTENTION_BQ);
    w.st = p;
    p += PEAK_ATTENTION_BC * PEAK_ATTENTION_BQ;
    w.bt = p;
    p += PEAK_ATTENTION_BC * PEAK_ATTENTION_BQ;
    w.oacc = p;
    p += attention_round16(d->v_head_dim * PEAK_ATTENTION_BQ);
    w.m = p;
    w.l = p + PEAK_ATTENTION_BQ;
    w.tmax = p + 2 * PEAK_ATTENTION_BQ;
    w.m2 = p + 3 * PEAK_ATTENTION_BQ;
    w.l2 = p + 4 * PEAK_ATTENTION_BQ;
    p += 5 * PEAK_ATTENTION_BQ;
    w.oacc2 = p;
    p += attention_round16(d->v_head_dim * PEAK_ATTENTION_BQ);
    w.zero = p;
    const size_t dmax = d->head_dim > d->v_head_dim ? d->head_dim : d->v_head_dim;
    memset(w.zero, 0, dmax * sizeof(float));
    p += attention_round16(dmax);
    w.vpack = p;
    p += PEAK_ATTENTION_BC * attention_round16(d->v_head_dim);
    w.kpack = p;
    p += PEAK_ATTENTION_BC * attention_round16(d->head_dim);
    w.kp = (const float **)(void *)p;
    w.vp = w.kp + PEAK_ATTENTION_BC;
    p += attention_round16(2 * PEAK_ATTENTION_BC * sizeof(float *) / sizeof(float));
    w.cache_tiles = attention_cache_tiles(d);
    w.kcache = p;
    p += w.cache_tiles * PEAK_ATTENTION_BC * attention_round16(d->head_dim);
    w.vcache = p;
    p += w.cache_tiles * PEAK_ATTENTION_BC * attention_round16(d->v_head_dim);
    w.cache_n = (uint32_t *)(void *)p;
    return w;
}

/* ---- block set-up ---------------------------------------------------------- */

static inline const float *attention_q_row(const float *q, const peak_attention_desc *d, size_t b,
                                           size_t h, size_t i)
{
    return q + (ptrdiff_t)b * d->q_stride[0] + (ptrdiff_t)i * d->q_stride[1] +
           (ptrdiff_t)h * d->q_stride[2];
}

/* Rows first .. first+rows-1 of the kv head's group, numbered
   position-major: row R is query head kvh * group + R % group at position
   R / group, so that causal ranges grow along the block. */
static inline void attention_block_rows(attention_block *blk, size_t kvh, size_t first)
{
    const peak_attention_desc *d = blk->d;
    const size_t group = d->heads / d->kv_heads;
    for (size_t r = 0; r < blk->rows; r++) {
        const size_t R = first + r, h = kvh * group + R % group, i = R / group;
        const peak_key_range kr = peak_mask_keys(&d->mask, blk->b, i, d->q_len, d->kv_len);
        blk->head[r] = h;
        blk->pos[r] = i;
        blk->lo[r] = kr.lo;
        blk->hi[r] = kr.hi;
        blk->keep[r] = peak_mask_keep_row(&d->mask, blk->b, h, i);
        blk->bias[r] = peak_mask_bias_row(&d->mask, blk->b, h, i);
    }
    for (size_t r = blk->rows; r < PEAK_ATTENTION_BQ; r++) {
        blk->lo[r] = blk->hi[r] = 0; /* rows past the block see nothing */
        blk->keep[r] = NULL;
        blk->bias[r] = NULL;
    }
}

/* Rows the block start and finish request ahead of the one they copy: the
   rows of one head in [B, L, H, D] are a power-of-two stride apart, in
   other pages, where no hardware prefetcher follows, so copying them one
   miss at a time cost as much as two tiles of arithmetic per block
   (measured at L = 2048, H = 8). */
#define PEAK_ATTENTION_ROWS_AHEAD 8

static inline float *attention_o_row(float *o, const peak_attention_desc *d, size_t b, size_t h,
                                     size_t i)
{
    return o + (ptrdiff_t)b * d->o_stride[0] + (ptrdiff_t)i * d->o_stride[1] +
           (ptrdiff_t)h * d->o_stride[2];
}

/* lse[b, h, i] (d->lse is not NULL). */
static inline float *attention_lse_at(const peak_attention_desc *d, size_t b, size_t h, size_t i)
{
    return d->lse + (ptrdiff_t)b * d->lse_stride[0] + (ptrdiff_t)h * d->lse_stride[1] +
           (ptrdiff_t)i * d->lse_stride[2];
}

/* Q^T with zero columns past the block's rows (their scores are finite
   garbage, never stored), a zero accumulator, m = -inf and l = 0.  Eight
   rows at a time: through the including file's 8 x 8 transpose
   (PEAK_ATTENTION_T8X8_IN) when it has one. */
static inline void attention_block_start(const attention_block *blk, const attention_ws *w,
                                         const float *q)
{
    const peak_attention_desc *d = blk->d;
    for (size_t r = 0; r < PEAK_ATTENTION_ROWS_AHEAD && r < blk->rows; r++)
        peak_prefetch(attention_q_row(q, d, blk->b, blk->head[r], blk->pos[r]), d->head_dim,
                      PEAK_PF_L1);
    for (size_t r8 = 0; r8 < PEAK_ATTENTION_BQ; r8 += 8) {
        const float *rows[8];
        for (size_t k = 0; k < 8; k++) {
            const size_t r = r8 + k, ra = r + PEAK_ATTENTION_ROWS_AHEAD;
            if (ra < blk->rows)
                peak_prefetch(attention_q_row(q, d, blk->b, blk->head[ra], blk->pos[ra]),
                              d->head_dim, PEAK_PF_L1);
            rows[k] =
                r < blk->rows ? attention_q_row(q, d, blk->b, blk->head[r], blk->pos[r]) : w->zero;
            w->m[r] = -INFINITY;
            w->l[r] = 0.0f;
        }
        size_t c = 0;
#ifdef PEAK_ATTENTION_T8X8_IN
        for (; c + 8 <= d->head_dim; c += 8)
            PEAK_ATTENTION_T8X8_IN(w->qt + c * PEAK_ATTENTION_BQ + r8, PEAK_ATTENTION_BQ, rows, c);
#endif
        for (; c < d->head_dim; c++)
            for (size_t k = 0; k < 8; k++)
                w->qt[c * PEAK_ATTENTION_BQ + r8 + k] = rows[k][c];
    }
    memset(w->oacc, 0, d->v_head_dim * PEAK_ATTENTION_BQ * sizeof(float));
}

/* ---- one tile -------------------------------------------------------------- */

/* Rows [*r0, *r1) are the vectors holding a row that sees part of keys
   [t0, t1); returns false when none does.  *whole: every real row of those
   vectors sees the whole tile. */
static inline bool attention_tile_rows(const attention_block *blk, size_t t0, size_t t1, size_t *r0,
                                       size_t *r1, bool *whole)
{
    size_t first = PEAK_ATTENTION_BQ, last = 0;
    for (size_t r = 0; r < blk->rows; r++) {
        if (blk->lo[r] < t1 && blk->hi[r] > t0 && blk->lo[r] < blk->hi[r]) {
            if (first == PEAK_ATTENTION_BQ)
                first = r;
            last = r;
        }
    }
    if (first == PEAK_ATTENTION_BQ)
        return false;
    *r0 = first / PEAK_ATTENTION_VW * PEAK_ATTENTION_VW;
    *r1 = (last / PEAK_ATTENTION_VW + 1) * PEAK_ATTENTION_VW;
    *whole = !blk->elem_masks;
    for (size_t r = *r0; r < *r1 && r < blk->rows && *whole; r++)
        *whole = blk->lo[r] <= t0 && blk->hi[r] >= t1;
    return true;
}

/* B^T and the live keys of a block with a keep or bias mask, per element. */
static inline void attention_tile_elem_mask(const attention_block *blk, const attention_ws *w,
                                            size_t t0, size_t n, size_t r0, size_t r1, bool *live)
{
    for (size_t r = r0; r < r1; r++) {
        for (size_t j = 0; j < n; j++) {
            const size_t key = t0 + j;
            const bool vis = key >= blk->lo[r] && key < blk->hi[r] &&
                             peak_mask_visible(blk->keep[r], blk->bias[r], key);
            w->bt[j * PEAK_ATTENTION_BQ + r] = !vis           ? -INFINITY
                                               : blk->bias[r] ? blk->bias[r][key]
                                                              : 0.0f;
            live[j] |= vis;
        }
    }
}

/* B^T for keys t0 .. t0+n-1 and rows [r0, r1), and each key's K/V row (the
   zero row for a key no row sees).  Rows past the block have lo = hi = 0. */
static inline void attention_tile_mask(const attention_block *blk, const attention_ws *w, size_t t0,
                                       size_t n, size_t r0, size_t r1)
{
    const peak_attention_desc *d = blk->d;
    bool live[PEAK_ATTENTION_BC] = {false};
    if (blk->elem_masks) {
        attention_tile_elem_mask(blk, w, t0, n, r0, r1, live);
    } else {
        /* Key ranges only (causal, window, padding; the diagonal tiles of a
           causal mask): a row of B^T at a time, in a loop the compiler
           vectorises.  Per element through peak_mask_visible() it took
           twice as long as the tile's arithmetic. */
        for (size_t j = 0; j < n; j++) {
            const size_t key = t0 + j;
            float *bj = w->bt + j * PEAK_ATTENTION_BQ;
            int any = 0;
            for (size_t r = r0; r < r1; r++) {
                const int vis = key >= blk->lo[r] && key < blk->hi[r];
                bj[r] = vis ? 0.0f : -INFINITY;
                any |= vis;
            }
            live[j] = any;
        }
    }
    for (size_t j = 0; j < n; j++) {
        w->kp[j] = live[j] ? blk->k + (ptrdiff_t)(t0 + j) * d->k_stride[1] : w->zero;
        w->vp[j] = live[j] ? blk->v + (ptrdiff_t)(t0 + j) * d->v_stride[1] : w->zero;
    }
}

/* O^T += V^T P^T one weight at a time, skipping the keys each row does not
   see (B^T = -inf): the masked tile whose V holds inf or NaN (rare, so
   plain C).  A key the row sees contributes p * V even when p is 0, as in
   the scalar tier: 0 * NaN is NaN. */
static inline void attention_pv_exact(const attention_ws *w, size_t dv, size_t n, size_t r0,
                                      size_t r1)
{
    for (size_t j = 0; j < n; j++)
        for (size_t r = r0; r < r1; r++) {
            const float p = w->st[j * PEAK_ATTENTION_BQ + r];
            if (w->bt[j * PEAK_ATTENTION_BQ + r] == -INFINITY)
                continue;
            for (size_t c = 0; c < dv; c++)
                w->oacc[c * PEAK_ATTENTION_BQ + r] += p * w->vp[j][c];
        }
}

/* Points kp[0 .. n-1] and vp[0 .. n-1] at contiguous copies of the rows
   they point at; returns false if one of the V rows holds an inf or NaN
   (which matters to a masked tile only: attention_pv_exact).
   In place, rows a power-of-two stride apart (any [B, L, H, D] layout)
   fall into a few L1 sets, are evicted between the column passes of
   isa_pv, and the broadcasts of isa_scores wait on L2 (20% slower
   measured).  A whole tile -- its keys visible to every row of the block,
   so read legitimately -- goes to the kv head's cache, where the next
   blocks find it; a masked tile (dead keys point at the zero row) is
   packed for this block alone. */
static inline bool attention_tile_pack(const attention_block *blk, const attention_ws *w, size_t t0,
                                       size_t n, bool whole)
{
    const peak_attention_desc *d = blk->d;
    const size_t ldk = attention_round16(d->head_dim), ldv = attention_round16(d->v_head_dim);
    const size_t t = t0 / PEAK_ATTENTION_BC;
    float *kdst = w->kpack, *vdst = w->vpack;
    bool finite;
    if (whole && t0 % PEAK_ATTENTION_BC == 0 && t < w->cache_tiles) {
        kdst = w->kcache + t * PEAK_ATTENTION_BC * ldk;
        vdst = w->vcache + t * PEAK_ATTENTION_BC * ldv;
        /* A later block may see more of the tile (causal): append. */
        const size_t have = w->cache_n[t];
        if (have < n) {
            isa_pack_rows(kdst + have * ldk, ldk, w->kp + have, n - have, d->head_dim);
            isa_pack_rows(vdst + have * ldv, ldv, w->vp + have, n - have, d->v_head_dim);
            w->cache_n[t] = (uint32_t)n;
        }
        finite = true; /* whole: P.V as it is */
    } else {
        isa_pack_rows(kdst, ldk, w->kp, n, d->head_dim);
        finite = isa_pack_rows(vdst, ldv, w->vp, n, d->v_head_dim);
    }
    for (size_t j = 0; j < n; j++) {
        w->kp[j] = kdst + j * ldk;
        w->vp[j] = vdst + j * ldv;
    }
    return finite;
}

/* A masked tile whose later row vectors see more of it than the earlier
   ones (the diagonal tile of a causal mask: a staircase), when no V is
   inf or NaN: row vector v computes keys [0, n_v) only, n_v covering its
   rows' key ranges (made non-decreasing), so the scores and P.V run once
   per step of keys for the vectors from that step on -- 10/16 of the
   tile's arithmetic on a causal diagonal.  Keys a vector skips are masked
   for all its rows (their weights would be 0).  Returns false, having
   done nothing, when every vector needs the whole tile. */
static inline bool attention_tile_staircase(const attention_block *blk, const attention_ws *w,
                                            size_t t0, size_t n, size_t r0, size_t r1)
{
    const peak_attention_desc *d = blk->d;
    size_t nv[PEAK_ATTENTION_NRV] = {0}, prev = 0;
    for (size_t v = r0 / PEAK_ATTENTION_VW; v < r1 / PEAK_ATTENTION_VW; v++) {
        size_t need = prev;
        for (size_t r = v * PEAK_ATTENTION_VW; r < (v + 1) * PEAK_ATTENTION_VW; r++)
            if (blk->hi[r] > t0 + need)
                need = blk->hi[r] - t0 < n ? blk->hi[r] - t0 : n;
        nv[v] = prev = need;
    }
    if (nv[r0 / PEAK_ATTENTION_VW] == n)
        return false;
    const size_t ldv = attention_round16(d->v_head_dim);
    prev = 0;
    for (size_t v = r0 / PEAK_ATTENTION_VW; v < r1 / PEAK_ATTENTION_VW; prev = nv[v++])
        if (nv[v] > prev)
            isa_scores(w->st + prev * PEAK_ATTENTION_BQ, w->kp + prev, w->qt, d->head_dim,
                       nv[v] - prev, d->scale, w->tmax, v * PEAK_ATTENTION_VW, r1);
    for (size_t v = r0 / PEAK_ATTENTION_VW; v < r1 / PEAK_ATTENTION_VW; v++)
        if (nv[v])
            isa_online_softmax(w, w->bt, d->v_head_dim, nv[v], v * PEAK_ATTENTION_VW,
                               (v + 1) * PEAK_ATTENTION_VW);
    prev = 0;
    for (size_t v = r0 / PEAK_ATTENTION_VW; v < r1 / PEAK_ATTENTION_VW; prev = nv[v++])
        if (nv[v] > prev)
            isa_pv(w->oacc, w->vp[prev], ldv, w->st + prev * PEAK_ATTENTION_BQ, d->v_head_dim,
                   nv[v] - prev, v * PEAK_ATTENTION_VW, r1);
    return true;
}

static inline void attention_tile(const attention_block *blk, const attention_ws *w, size_t t0,
                                  size_t n)
{
    const peak_attention_desc *d = blk->d;
    size_t r0, r1;
    bool whole;
    if (!attention_tile_rows(blk, t0, t0 + n, &r0, &r1, &whole))
        return;
    if (whole) {
        for (size_t j = 0; j < n; j++) {
            w->kp[j] = blk->k + (ptrdiff_t)(t0 + j) * d->k_stride[1];
            w->vp[j] = blk->v + (ptrdiff_t)(t0 + j) * d->v_stride[1];
        }
    } else {
        attention_tile_mask(blk, w, t0, n, r0, r1);
    }
    const bool finite = attention_tile_pack(blk, w, t0, n, whole);
    /* S^T[j][r0..r1) = K[kp[j]] . Q^T[.][r0..r1) * scale, j < n, and their
       max. */
    for (size_t r = r0; r < r1; r++)
        w->tmax[r] = -INFINITY;
    if (!whole && finite && attention_tile_staircase(blk, w, t0, n, r0, r1))
        return;
    isa_scores(w->st, w->kp, w->qt, d->head_dim, n, d->scale, w->tmax, r0, r1);
    /* Mask with B^T unless NULL, update m and l, rescale O^T by
       e^(m_old - m_new), and leave P^T in st. */
    isa_online_softmax(w, whole ? NULL : w->bt, d->v_head_dim, n, r0, r1);
    /* A whole tile's keys are seen by all its rows: P.V as it is, whatever
       V holds. */
    if (finite || whole)
        isa_pv(w->oacc, w->vp[0], attention_round16(d->v_head_dim), w->st, d->v_head_dim, n, r0,
               r1);
    else
        attention_pv_exact(w, d->v_head_dim, n, r0, r1);
}

/* Tiles whose sums the running accumulators take before they are folded
   into a second level.  One running sum over all keys rounds once per key
   (the P.V FMA chain) and once per tile (l): with Lk = 65536 the error
   reached 1.1e-5 * max|V| (measured, V = 1 +- 0.01); folding every 1024
   keys keeps each chain short. */
#define PEAK_ATTENTION_FOLD_TILES 16

/* Scale of the folded sums (relative to m2) at the running max m: 0 while
   nothing was folded (m2 = -inf; also keeps exp(-inf - -inf) out), NaN
   for a poisoned row, which stays so. */
static inline float attention_fold_scale(float m2, float m)
{
    return m2 == -INFINITY ? 0.0f : expf(m2 - m);
}

/* ---- the row path ------------------------------------------------------------ */

/* Scores s[j] = q . K[kp[j]] * scale + b[j] where b[j] > -inf, else -inf
   (K not read); returns their max (NaN ignored). */
static inline float attention_row_scores(float *s, const float *q, const float *const *kp,
                                         const float *b, float scale, size_t n, size_t dh)
{
    float m = -INFINITY;
    for (size_t j = 0; j < n; j++) {
        s[j] = b[j] == -INFINITY ? -INFINITY : isa_dot(q, kp[j], dh) * scale + b[j];
        m = s[j] > m ? s[j] : m;
    }
    return m;
}

/* Requests the lines of a visible key's K and V rows ahead of their use.
   Rows of one head in an interleaved [B, L, H, D] cache are a few KiB
   apart, so the L2 streamer, which stays within a 4 KiB page, never
   follows them, and a decode step would wait on one miss at a time. */
static inline void attention_prefetch_row(const float *k, size_t dh, const float *v, size_t dv)
{
    peak_prefetch(k, dh, PEAK_PF_L1);
    peak_prefetch(v, dv, PEAK_PF_L1);
}

/* One query row of the row path and its running softmax. */
typedef struct attention_row_state {
    const float *q;          /* the query row */
    const float *k, *v;      /* key 0 of its kv head */
    const uint8_t *keep;     /* element masks of the row, or NULL */
    const float *bias;
    size_t lo, hi, head, pos; /* keys [lo, hi) by the key-range masks */
    float m, l;
    float *acc;              /* round16(v_head_dim) floats */
    float m2, l2, *acc2;     /* the folded sums, as attention_fold's */
    size_t tiles;            /* since the last fold */
} attention_row_state;

/* Prefetches `key` of row s if the row sees it (masked keys are never
   touched). */
static inline void attention_prefetch_key(const peak_attention_desc *d,
                                          const attention_row_state *s, size_t key)
{
    if (key >= s->lo && key < s->hi && peak_mask_visible(s->keep, s->bias, key))
        attention_prefetch_row(s->k + (ptrdiff_t)key * d->k_stride[1], d->head_dim,
                               s->v + (ptrdiff_t)key * d->v_stride[1], d->v_head_dim);
}

/* Keys whose scores the row path computes between two groups of
   prefetches for the next tile. */
#define PEAK_ATTENTION_ROW_CHUNK 8

/* attention_fold for one row of the row path. */
static inline void attention_row_fold(attention_row_state *r, size_t dv)
{
    const float sc = attention_fold_scale(r->m2, r->m);
    for (size_t c = 0; c < dv; c++) {
        r->acc2[c] = r->acc2[c] * sc + r->acc[c];
        r->acc[c] = 0.0f;
    }
    r->l2 = r->l2 * sc + r->l;
    r->l = 0.0f;
    r->m2 = r->m;
    r->tiles = 0;
}

/* Keys [t0, t1) (inside [lo, hi), at most BC) of one row, vectorised along
   head_dim instead of rows: a decode step (or a small MQA group) would
   fill 1 lane of PEAK_ATTENTION_VW in the tiled path. */
static inline void attention_row_tile(const peak_attention_desc *d, const attention_ws *w,
                                      attention_row_state *r, size_t t0, size_t t1)
{
    float *s = w->st, *bias = w->bt;
    const size_t n = t1 - t0;
    for (size_t j = 0; j < n; j++) {
        const size_t key = t0 + j;
        const bool vis = peak_mask_visible(r->keep, r->bias, key);
        bias[j] = !vis ? -INFINITY : r->bias ? r->bias[key] : 0.0f;
        w->kp[j] = r->k + (ptrdiff_t)key * d->k_stride[1];
        w->vp[j] = vis ? r->v + (ptrdiff_t)key * d->v_stride[1] : NULL;
    }
    /* The row's next tile is requested a few keys at a time between the
       scores, so that the misses stay in flight while this tile computes
       (requested all at once, they stall on the line fill buffers and the
       tile waits for them). */
    float mt = -INFINITY;
    for (size_t j0 = 0; j0 < n; j0 += PEAK_ATTENTION_ROW_CHUNK) {
        const size_t nc = n - j0 < PEAK_ATTENTION_ROW_CHUNK ? n - j0 : PEAK_ATTENTION_ROW_CHUNK;
        const float mc =
            attention_row_scores(s + j0, r->q, w->kp + j0, bias + j0, d->scale, nc, d->head_dim);
        mt = mc > mt ? mc : mt;
        for (size_t j = j0; j < j0 + nc; j++)
            attention_prefetch_key(d, r, t0 + PEAK_ATTENTION_BC + j);
    }
    const float mn = mt > r->m ? mt : r->m;
    const float ms = mn == -INFINITY ? 0.0f : mn; /* as in the tiled path */
    const float alpha = isnan(r->m) ? NAN : r->m == -INFINITY ? 0.0f : expf(r->m - ms);
    const float sum = isa_row_exp(s, ms, n);
    r->l = r->l * alpha + sum;
    r->m = mn;
    isa_row_pv(r->acc, alpha, s, w->vp, n, d->v_head_dim);
    if (++r->tiles == PEAK_ATTENTION_FOLD_TILES)
        attention_row_fold(r, d->v_head_dim);
}

/* The natural log-sum-exp of a finished row (-inf: it saw nothing). */
static inline float attention_lse(float m, float l)
{
    return isnan(l) ? NAN : l == 0.0f ? -INFINITY : (float)((double)m + log((double)l));
}

/* Row states the row path keeps at once: kv heads are taken together, up
   to this many rows, and walk their keys tile by tile in step.  In an
   interleaved [B, L, H, D] cache the heads' rows of one key are adjacent,
   so a decode step reads K and V as one sequential stream instead of one
   pass per head over every row. */
#define PEAK_ATTENTION_ROW_STATES 32

/* Rows first .. first + rows - 1 of each of kv heads kvh0 .. kvh0 + nkvh - 1
   (nkvh * rows <= PEAK_ATTENTION_ROW_STATES) by the row path, into O and lse. */
static inline void attention_rows_run(const peak_attention_desc *d, const attention_ws *w, float *o,
                                      const float *q, const float *k, const float *v, size_t b,
                                      size_t kvh0, size_t nkvh, size_t first, size_t rows)
{
    const size_t group = d->heads / d->kv_heads, ldacc = attention_round16(d->v_head_dim);
    attention_row_state st[PEAK_ATTENTION_ROW_STATES];
    size_t n = 0, lo = SIZE_MAX, hi = 0;
    for (size_t kvh = kvh0; kvh < kvh0 + nkvh; kvh++)
        for (size_t R = first; R < first + rows; R++, n++) {
            attention_row_state *r = &st[n];
            const peak_key_range kr = peak_mask_keys(&d->mask, b, R / group, d->q_len, d->kv_len);
            r->head = kvh * group + R % group;
            r->pos = R / group;
            r->q = attention_q_row(q, d, b, r->head, r->pos);
            r->k = k + (ptrdiff_t)b * d->k_stride[0] + (ptrdiff_t)kvh * d->k_stride[2];
            r->v = v + (ptrdiff_t)b * d->v_stride[0] + (ptrdiff_t)kvh * d->v_stride[2];
            r->keep = peak_mask_keep_row(&d->mask, b, r->head, r->pos);
            r->bias = peak_mask_bias_row(&d->mask, b, r->head, r->pos);
            r->lo = kr.lo;
            r->hi = kr.hi;
            r->m = -INFINITY;
            r->l = 0.0f;
            r->acc = w->vpack + n * ldacc;
            r->acc2 = w->vpack + (PEAK_ATTENTION_ROW_STATES + n) * ldacc;
            memset(r->acc, 0, ldacc * sizeof(float));
            memset(r->acc2, 0, ldacc * sizeof(float));
            r->m2 = -INFINITY;
            r->l2 = 0.0f;
            r->tiles = 0;
            for (size_t key = r->lo; key < r->lo + PEAK_ATTENTION_BC; key++)
                attention_prefetch_key(d, r, key);
            if (r->lo < r->hi) {
                lo = r->lo < lo ? r->lo : lo;
                hi = r->hi > hi ? r->hi : hi;
            }
        }
    for (size_t t = lo < hi ? lo / PEAK_ATTENTION_BC * PEAK_ATTENTION_BC : hi; t < hi;
         t += PEAK_ATTENTION_BC)
        for (size_t e = 0; e < n; e++) {
            const size_t t0 = st[e].lo > t ? st[e].lo : t;
            const size_t t1 = st[e].hi < t + PEAK_ATTENTION_BC ? st[e].hi : t + PEAK_ATTENTION_BC;
            if (t0 < t1)
                attention_row_tile(d, w, &st[e], t0, t1);
        }
    for (size_t e = 0; e < n; e++) {
        attention_row_state *r = &st[e];
        if (r->m2 != -INFINITY) { /* folded (a NaN m2 too): as attention_unfold */
            const float sc = attention_fold_scale(r->m2, r->m);
            for (size_t c = 0; c < d->v_head_dim; c++)
                r->acc[c] += r->acc2[c] * sc;
            r->l += r->l2 * sc;
        }
        float *orow = attention_o_row(o, d, b, r->head, r->pos);
        /* As attention_block_finish: a division, +0 for a row that saw nothing. */
        for (size_t c = 0; c < d->v_head_dim; c++)
            orow[c] = r->l == 0.0f ? 0.0f : r->acc[c] / r->l;
        if (d->lse)
            *attention_lse_at(d, b, r->head, r->pos) = attention_lse(r->m, r->l);
    }
}

/* ---- output ---------------------------------------------------------------- */

static inline void attention_block_finish(const attention_block *blk, const attention_ws *w,
                                          float *o)
{
    const peak_attention_desc *d = blk->d;
    /* O = O^T / l, in place, along the rows (vectorised by the compiler):
       a division, not a multiply by 1/l -- one rounding, not two.  A row
       with l = 0 saw nothing and is +0; one with l = NaN gets NaN from the
       division. */
    float div[PEAK_ATTENTION_BQ];
    for (size_t r = 0; r < blk->rows; r++)
        div[r] = w->l[r] == 0.0f ? 1.0f : w->l[r];
    for (size_t c = 0; c < d->v_head_dim; c++)
        for (size_t r = 0; r < blk->rows; r++)
            w->oacc[c * PEAK_ATTENTION_BQ + r] =
                w->l[r] == 0.0f ? 0.0f : w->oacc[c * PEAK_ATTENTION_BQ + r] / div[r];
    /* Eight rows at a time, through the including file's 8 x 8 transpose
       (PEAK_ATTENTION_T8X8_OUT) when it has one and the group is whole. */
    for (size_t r = 0; r < PEAK_ATTENTION_ROWS_AHEAD && r < blk->rows; r++)
        peak_prefetch(attention_o_row(o, d, blk->b, blk->head[r], blk->pos[r]), d->v_head_dim,
                      PEAK_PF_WRITE);
    for (size_t r8 = 0; r8 < blk->rows; r8 += 8) {
        const size_t nr = blk->rows - r8 < 8 ? blk->rows - r8 : 8;
        float *rows[8];
        for (size_t k = 0; k < nr; k++) {
            const size_t r = r8 + k, ra = r + PEAK_ATTENTION_ROWS_AHEAD;
            if (ra < blk->rows)
                peak_prefetch(attention_o_row(o, d, blk->b, blk->head[ra], blk->pos[ra]),
                              d->v_head_dim, PEAK_PF_WRITE);
            rows[k] = attention_o_row(o, d, blk->b, blk->head[r], blk->pos[r]);
        }
        size_t c = 0;
#ifdef PEAK_ATTENTION_T8X8_OUT
        if (nr == 8)
            for (; c + 8 <= d->v_head_dim; c += 8)
                PEAK_ATTENTION_T8X8_OUT(rows, c, w->oacc + c * PEAK_ATTENTION_BQ + r8,
                                        PEAK_ATTENTION_BQ);
#endif
        for (; c < d->v_head_dim; c++)
            for (size_t k = 0; k < nr; k++)
                rows[k][c] = w->oacc[c * PEAK_ATTENTION_BQ + r8 + k];
        if (d->lse)
            for (size_t r = r8; r < r8 + nr; r++)
                *attention_lse_at(d, blk->b, blk->head[r], blk->pos[r]) =
                    attention_lse(w->m[r], w->l[r]);
    }
}

/* Requests rows [*done, *done + n) of 2 BQ into L2: first the block's O
   rows (finish writes them), then the Q rows of the next block (the kv
   head's next, else the next kv head's first).  Spread over the block's
   tiles, so that start and finish find their strided rows in L2 instead
   of waiting on them. */
static inline void attention_prefetch_rows_ahead(const attention_block *blk, const float *q,
                                                 float *o, size_t kvh, size_t first,
                                                 size_t group_rows, size_t *done, size_t n)
{
    const peak_attention_desc *d = blk->d;
    const size_t group = d->heads / d->kv_heads;
    const size_t end = *done + n < 2 * PEAK_ATTENTION_BQ ? *done + n : 2 * PEAK_ATTENTION_BQ;
    for (size_t k = *done; k < end; k++) {
        if (k < PEAK_ATTENTION_BQ) {
            if (k < blk->rows)
                peak_prefetch(attention_o_row(o, d, blk->b, blk->head[k], blk->pos[k]),
                              d->v_head_dim, PEAK_PF_WRITE);
        } else {
            /* Row k - BQ of the next block: this kv head's, or the next kv
               head's first (cross-attention: one block per kv head). */
            const bool last = first + PEAK_ATTENTION_BQ >= group_rows;
            const size_t nkvh = last ? kvh + 1 : kvh, R = last ? k - PEAK_ATTENTION_BQ : first + k;
            if (nkvh < d->kv_heads && R < group_rows)
                peak_prefetch(attention_q_row(q, d, blk->b, nkvh * group + R % group, R / group),
                              d->head_dim, PEAK_PF_L2);
        }
    }
    *done = end;
}

/* Empty folded sums, before a block's first fold. */
static inline void attention_fold_start(const attention_ws *w, size_t dv)
{
    for (size_t r = 0; r < PEAK_ATTENTION_BQ; r++) {
        w->m2[r] = -INFINITY;
        w->l2[r] = 0.0f;
    }
    memset(w->oacc2, 0, dv * PEAK_ATTENTION_BQ * sizeof(float));
}

/* O2 = O2 * e^(m2 - m) + O^T and l2 likewise, then O^T = 0, l = 0, m2 = m:
   the block's running sums restart from zero at the same max. */
static inline void attention_fold(const attention_ws *w, size_t dv)
{
    float s[PEAK_ATTENTION_BQ];
    for (size_t r = 0; r < PEAK_ATTENTION_BQ; r++) {
        s[r] = attention_fold_scale(w->m2[r], w->m[r]);
        w->l2[r] = w->l2[r] * s[r] + w->l[r];
        w->l[r] = 0.0f;
        w->m2[r] = w->m[r];
    }
    for (size_t c = 0; c < dv; c++)
        for (size_t r = 0; r < PEAK_ATTENTION_BQ; r++) {
            w->oacc2[c * PEAK_ATTENTION_BQ + r] =
                w->oacc2[c * PEAK_ATTENTION_BQ + r] * s[r] + w->oacc[c * PEAK_ATTENTION_BQ + r];
            w->oacc[c * PEAK_ATTENTION_BQ + r] = 0.0f;
        }
}

/* The last fold, into O^T and l, for attention_block_finish (after at least
   one attention_fold). */
static inline void attention_unfold(const attention_ws *w, size_t dv)
{
    float s[PEAK_ATTENTION_BQ];
    for (size_t r = 0; r < PEAK_ATTENTION_BQ; r++) {
        s[r] = attention_fold_scale(w->m2[r], w->m[r]);
        w->l[r] += w->l2[r] * s[r];
    }
    for (size_t c = 0; c < dv; c++)
        for (size_t r = 0; r < PEAK_ATTENTION_BQ; r++)
            w->oacc[c * PEAK_ATTENTION_BQ + r] += w->oacc2[c * PEAK_ATTENTION_BQ + r] * s[r];
}

/* Requests cached tile t's K and V into L2 while the tile before it
   computes: with Lk = 4096 at Dh = 64 the cache is the size of L2 and
   lives partly in L3. */
static inline void attention_prefetch_cached_tile(const attention_ws *w,
                                                  const peak_attention_desc *d, size_t t)
{
    if (t >= w->cache_tiles || !w->cache_n[t])
        return;
    const size_t ldk = attention_round16(d->head_dim), ldv = attention_round16(d->v_head_dim);
    peak_prefetch(w->kcache + t * PEAK_ATTENTION_BC * ldk, w->cache_n[t] * ldk, PEAK_PF_L2);
    peak_prefetch(w->vcache + t * PEAK_ATTENTION_BC * ldv, w->cache_n[t] * ldv, PEAK_PF_L2);
}

/* Keys [lo, hi) some row of the block may see. */
static inline peak_key_range attention_block_keys(const attention_block *blk)
{
    peak_key_range k = {SIZE_MAX, 0};
    for (size_t r = 0; r < blk->rows; r++)
        if (blk->lo[r] < blk->hi[r]) {
            k.lo = blk->lo[r] < k.lo ? blk->lo[r] : k.lo;
            k.hi = blk->hi[r] > k.hi ? blk->hi[r] : k.hi;
        }
    if (k.lo >= k.hi)
        k.lo = k.hi = 0;
    return k;
}

static inline void attention_tiles_run(float *o, const float *q, const float *k, const float *v,
                                       const peak_attention_desc *d, void *workspace)
{
    assert(o && q && k && v && d && workspace);
    assert(d->kv_heads > 0 && d->heads % d->kv_heads == 0 && d->v_head_dim > 0);
    const attention_ws w = attention_ws_carve(workspace, d);
    const size_t group_rows = d->heads / d->kv_heads * d->q_len;
    if (2 * group_rows < PEAK_ATTENTION_VW) {
        /* Decode: each kv head has a few rows, all for the row path. */
        const size_t step = PEAK_ATTENTION_ROW_STATES / group_rows;
        for (size_t b = 0; b < d->batch; b++)
            for (size_t kvh = 0; kvh < d->kv_heads; kvh += step)
                attention_rows_run(d, &w, o, q, k, v, b, kvh,
                                   d->kv_heads - kvh < step ? d->kv_heads - kvh : step, 0,
                                   group_rows);
        return;
    }
    attention_block blk;
    blk.d = d;
    blk.elem_masks = d->mask.keep || d->mask.bias;
    for (size_t b = 0; b < d->batch; b++)
        for (size_t kvh = 0; kvh < d->kv_heads; kvh++) {
            blk.b = b;
            blk.k = k + (ptrdiff_t)b * d->k_stride[0] + (ptrdiff_t)kvh * d->k_stride[2];
            blk.v = v + (ptrdiff_t)b * d->v_stride[0] + (ptrdiff_t)kvh * d->v_stride[2];
            memset(w.cache_n, 0, w.cache_tiles * sizeof *w.cache_n);
            for (size_t first = 0; first < group_rows; first += PEAK_ATTENTION_BQ) {
                blk.rows =
                    group_rows - first < PEAK_ATTENTION_BQ ? group_rows - first : PEAK_ATTENTION_BQ;
                attention_block_rows(&blk, kvh, first);
                if (2 * blk.rows < PEAK_ATTENTION_VW) { /* the kv head's last few rows */
                    attention_rows_run(d, &w, o, q, k, v, b, kvh, 1, first, blk.rows);
                    continue;
                }
                attention_block_start(&blk, &w, q);
                const peak_key_range keys = attention_block_keys(&blk);
                const size_t tiles =
                    (keys.hi - keys.lo + PEAK_ATTENTION_BC - 1) / PEAK_ATTENTION_BC;
                size_t ahead = 0, since_fold = 0;
                bool folded = false;
                for (size_t t0 = keys.lo; t0 < keys.hi; t0 += PEAK_ATTENTION_BC) {
                    attention_prefetch_rows_ahead(&blk, q, o, kvh, first, group_rows, &ahead,
                                                  (2 * PEAK_ATTENTION_BQ + tiles - 1) / tiles);
                    if (since_fold++ == PEAK_ATTENTION_FOLD_TILES) {
                        if (!folded)
                            attention_fold_start(&w, d->v_head_dim);
                        attention_fold(&w, d->v_head_dim);
                        folded = true;
                        since_fold = 1;
                    }
                    attention_prefetch_cached_tile(&w, d, t0 / PEAK_ATTENTION_BC + 1);
                    attention_tile(&blk, &w, t0,
                                   keys.hi - t0 < PEAK_ATTENTION_BC ? keys.hi - t0
                                                                    : PEAK_ATTENTION_BC);
                }
                if (folded)
                    attention_unfold(&w, d->v_head_dim);
                attention_block_finish(&blk, &w, o);
            }
        }
}

#endif /* PEAK_ATTENTION_H */
