/*
 * rope.h - what the scalar, AVX2, AVX-512 and NEON rotary embeddings share.
 *
 * Every tier must produce the same bits, so everything that decides a bit
 * lives here or in ISA-free code compiled once: the scaled frequencies
 * (common/rope-freqs.c, once per call, shared read-only by the workers),
 * the double sincos (each tier's peak_pe_sincos_chunk, bit-identical by
 * pe-table.h's construction), and the driver that walks positions and
 * frequency chunks (peak_rope_rows_run below).  A tier supplies only how to
 * turn a chunk's sincos tables into floats and how to rotate a head.
 *
 * EXACT, for frequency w (double) and position p:
 *   p = P0 + k,  P0 = p & ~(PEAK_PE_BLOCK - 1),  k = p & (PEAK_PE_BLOCK - 1)
 *   (SB, CB) = sincos(P0 * w),  (SK, CK) = sincos(k * w)       [double]
 *   cos(p w) = fma(CB, CK, -(SB * SK)),  sin(p w) = fma(SB, CK, CB * SK)
 *   times the attention factor A (double), rounded once to float.
 * HF_F32: a = (float)p * wf (a float product), (s, c) = sincos((double)a),
 *   rounded to float, then times (float)A in float.
 * A row's bits depend only on (p, params): never on pos0, n_pos, the
 * thread count or the tier.
 *
 * The rotation: two float products and one add or subtract per output,
 * never fused (meson.build compiles everything with -ffp-contract=off).
 */
#ifndef PEAK_ROPE_H
#define PEAK_ROPE_H

#include "internal.h"
#include "pe-table.h" /* PEAK_PE_BLOCK, PEAK_PE_CHUNK, the sincos chunks */

#include <stdint.h>

#define PEAK_ROPE_MAX_FREQ (PEAK_ROPE_MAX_DIM / 2)

/* A call's frequencies, scaled, and its attention factor: computed once per
   call (peak_rope_freqs_init) and read by every worker. */
typedef struct peak_rope_freqs {
    size_t n;            /* rotary_dim / 2 */
    peak_rope_mode mode;
    double af;           /* EXACT: the attention factor */
    float af_f32;        /* HF_F32: (float) of it */
    PEAK_PE_ALIGN double w[PEAK_ROPE_MAX_FREQ + PEAK_PE_CHUNK]; /* zeros past n */
    PEAK_PE_ALIGN float w_f32[PEAK_ROPE_MAX_FREQ + PEAK_PE_CHUNK]; /* HF_F32: inv_freq */
} peak_rope_freqs;

/* ---- ISA-free (common/rope-freqs.c) -------------------------------------- */

/* PEAK_OK, or the status peak_rope_cache() documents for params (the
   scheme's fields only; rotary_dim, mode and scaling included). */
PEAK_INTERNAL peak_status peak_rope_params_check(const peak_rope_params *params);

/* The scaled frequencies of valid params (EXACT: double; HF_F32: the float
   inv_freq transformers computes) and the attention factor. */
PEAK_INTERNAL void peak_rope_freqs_init(peak_rope_freqs *f, const peak_rope_params *params);

/* The scheme's attention factor A, in double (0 in params resolved). */
PEAK_INTERNAL double peak_rope_attention_factor(const peak_rope_params *params);

/* ---- the rows driver ----------------------------------------------------- */

/* Rows at most per block of on-the-fly cos/sin: their rows stay in L1
   (8 x 512 floats = 16 KiB) while the block's heads are rotated. */
#define PEAK_ROPE_ROWS 8

/* One chunk's tables: the angles, the block base and the offsets. */
typedef struct peak_rope_tables {
    PEAK_PE_ALIGN double x[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double sb[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double cb[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double sk[PEAK_PE_BLOCK][PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double ck[PEAK_PE_BLOCK][PEAK_PE_CHUNK];
} peak_rope_tables;

typedef void (*peak_rope_sincos_fn)(const double *x, double *s, double *c);

/* A tier's emits: one row's frequencies i0 .. i0 + nc - 1 (cos at row[i],
   sin at row[n + i]).  exact: from the block and offset tables; hf: from
   the sincos of the float angles. */
typedef void (*peak_rope_emit_exact_fn)(float *row, const peak_rope_freqs *f, size_t i0,
                                        size_t nc, const double *sb, const double *cb,
                                        const double *sk, const double *ck);
typedef void (*peak_rope_emit_hf_fn)(float *row, const peak_rope_freqs *f, size_t i0, size_t nc,
                                     const double *s, const double *c);

/* sincos of p * w over the chunk at i0 (EXACT angles in double). */
static inline __attribute__((always_inline)) void
peak_rope_sincos_at(peak_rope_tables *tab, peak_rope_sincos_fn sincos, const double *w, size_t p,
                    double *s, double *c)
{
    for (size_t j = 0; j < PEAK_PE_CHUNK; j++)
        tab->x[j] = (double)p * w[j];
    sincos(tab->x, s, c);
}

/* Rows t < n_rows of cos/sin into out + t * ld_out, row t at position
   pos[t] (pos != NULL) or pos0 + t.  Frequency chunk outermost, then rows:
   a block base (SB, CB) is reused while consecutive rows stay in its block
   of PEAK_PE_BLOCK positions and an offset k is evaluated the first time a
   row of the chunk needs it, so n consecutive rows cost about 1 + n/32 +
   min(n, 32) sincos chunks per frequency chunk, a single row 2. */
static inline __attribute__((always_inline)) void
peak_rope_rows_run(float *out, ptrdiff_t ld_out, size_t n_rows, size_t pos0, const int64_t *pos,
                   const peak_rope_freqs *f, peak_rope_sincos_fn sincos,
                   peak_rope_emit_exact_fn emit_exact, peak_rope_emit_hf_fn emit_hf)
{
    peak_rope_tables tab;
    for (size_t i0 = 0; i0 < f->n; i0 += PEAK_PE_CHUNK) {
        const size_t nc = f->n - i0 < PEAK_PE_CHUNK ? f->n - i0 : PEAK_PE_CHUNK;
        if (f->mode == PEAK_ROPE_HF_F32) {
            for (size_t t = 0; t < n_rows; t++) {
                const float pf = (float)(pos ? (size_t)pos[t] : pos0 + t);
                for (size_t j = 0; j < PEAK_PE_CHUNK; j++)
                    tab.x[j] = (double)(pf * f->w_f32[i0 + j]);
                sincos(tab.x, tab.sb, tab.cb);
                emit_hf(out + (ptrdiff_t)t * ld_out, f, i0, nc, tab.sb, tab.cb);
            }
            continue;
        }
        uint64_t have_k = 0;    /* offsets k already in sk/ck */
        size_t base = SIZE_MAX; /* the block whose sincos is in sb/cb */
        for (size_t t = 0; t < n_rows; t++) {
            const size_t p = pos ? (size_t)pos[t] : pos0 + t;
            const size_t p0 = p & ~(size_t)(PEAK_PE_BLOCK - 1);
            const size_t k = p - p0;
            if (!(have_k >> k & 1)) {
                peak_rope_sincos_at(&tab, sincos, f->w + i0, k, tab.sk[k], tab.ck[k]);
                have_k |= (uint64_t)1 << k;
            }
            if (p0 != base) {
                peak_rope_sincos_at(&tab, sincos, f->w + i0, p0, tab.sb, tab.cb);
                base = p0;
            }
            emit_exact(out + (ptrdiff_t)t * ld_out, f, i0, nc, tab.sb, tab.cb, tab.sk[k],
                       tab.ck[k]);
        }
    }
}

/* ---- the rotation -------------------------------------------------------- */

/* With c, s the token's cos/sin (its cache row: n cosines, n sines):
     half-split:   y_i = x_i c_i - x_{n+i} s_i,  y_{n+i} = x_{n+i} c_i + x_i s_i,
                   straight from the row;
     interleaved:  y = x C + swap_pairs(x) S with the row expanded once per
                   token (and shared by its heads) into C = [c0, c0, c1, c1
                   ..], S = [-s0, s0, -s1, s1 ..].
   a - b s = a + b (-s) exactly, so both round as transformers'
   q * cos + rotate_half(q) * sin: two products, one add or subtract.
   cs: the row (half-split) or the expansion [C | S] (interleaved). */
typedef void (*peak_rope_head_fn)(float *y, const float *x, const float *cs, size_t r,
                                  const peak_rope_desc *desc, bool copy_tail, bool stream);

/* Out-of-place outputs of at least this many bytes are written with
   non-temporal stores where a head's rotated part starts on a vector
   boundary.  Without them every line of y is first read for ownership:
   out of place took 1.8x the in-place time (Q [1, 4096, 32, 128], Zen 3;
   doc/perf-notes.md).  16 MiB: as
   softmax, more than a 2-core share of any last-level cache, so y would
   not be read back from it anyway; attention's rotated copies of Q and K
   (read next) stay below it while batch * L * heads * head_dim < 4M. */
#define PEAK_ROPE_STREAM_BYTES ((size_t)16 << 20)

/* Whether a rope_apply call of desc from x into y streams (asked by the
   scheduler, for the whole call): in place, y's lines are already x's. */
static inline bool peak_rope_streams(const float *y, const float *x, const peak_rope_desc *d)
{
    return y != x && d->batch * d->seq_len * d->heads * d->head_dim >=
                         PEAK_ROPE_STREAM_BYTES / sizeof(float);
}

/* The frequencies a rope_apply call of desc reads: with a cache only f->n
   (the kernels read no more of it), else the scaled frequencies. */
static inline void peak_rope_apply_freqs(peak_rope_freqs *f, const peak_rope_desc *d)
{
    if (d->cache)
        f->n = d->params.rotary_dim / 2;
    else
        peak_rope_freqs_init(f, &d->params);
}

/* cs2[0 .. r) = C, cs2[r .. 2r) = S of cache row `row` (interleaved). */
static inline void peak_rope_expand(float *cs2, const float *row, size_t r)
{
    const size_t n = r / 2;
    float *c2 = cs2, *s2 = cs2 + r;
    for (size_t i = 0; i < n; i++) {
        const float c = row[i], s = row[n + i];
        c2[2 * i] = c;
        c2[2 * i + 1] = c;
        s2[2 * i] = -s;
        s2[2 * i + 1] = s;
    }
}

/* Position of token l of sequence b (validated: >= 0). */
static inline size_t peak_rope_position(const peak_rope_desc *d, size_t b, size_t l)
{
    const ptrdiff_t at = (ptrdiff_t)b * d->positions_stride + (ptrdiff_t)l;
    if (d->positions)
        return (size_t)d->positions[at];
    if (d->positions32)
        return (size_t)d->positions32[at];
    return d->pos0 + l;
}

/* On-the-fly cos/sin rows computed at once: at most this many floats
   (16 KiB, in L1 while their tokens' heads rotate) and this many rows. */
#define PEAK_ROPE_BLOCK_FLOATS 4096
#define PEAK_ROPE_BLOCK_ROWS 64

/* Tokens l0 .. l1-1 of sequence b, every head: the tiers' rope_apply, with
   their cache kernel and head rotation. */
static inline __attribute__((always_inline)) void
peak_rope_apply_run(float *y, const float *x, const peak_rope_desc *d, const peak_rope_freqs *f,
                    size_t b, size_t l0, size_t l1, bool stream, peak_rope_cache_fn cache_fn,
                    peak_rope_head_fn head)
{
    const size_t r = 2 * f->n; /* rotary_dim: f->n is set with or without a cache */
    const float *const cache = d->cache;
    const bool copy_tail = y != x;
    const bool explicit_pos = d->positions || d->positions32;
    PEAK_PE_ALIGN float rows[PEAK_ROPE_BLOCK_FLOATS];
    PEAK_PE_ALIGN float cs2[2 * PEAK_ROPE_MAX_DIM];
    int64_t pos[PEAK_ROPE_BLOCK_ROWS];
    size_t block = PEAK_ROPE_BLOCK_FLOATS / r;
    block = block < PEAK_ROPE_BLOCK_ROWS ? block : PEAK_ROPE_BLOCK_ROWS;

    for (size_t l = l0; l < l1; l += block) {
        const size_t m = l1 - l < block ? l1 - l : block;
        if (!cache) {
            if (explicit_pos) {
                for (size_t t = 0; t < m; t++)
                    pos[t] = (int64_t)peak_rope_position(d, b, l + t);
            }
            cache_fn(rows, (ptrdiff_t)r, m, d->pos0 + l, explicit_pos ? pos : NULL, f);
        }
        for (size_t t = 0; t < m; t++) {
            const float *row = cache ? cache + peak_rope_position(d, b, l + t) * r : rows + t * r;
            const bool expand = d->pairing == PEAK_ROPE_INTERLEAVED;
            if (expand)
                peak_rope_expand(cs2, row, r);
            const ptrdiff_t xo = (ptrdiff_t)b * d->x_stride[0] + (ptrdiff_t)(l + t) * d->x_stride[1];
            const ptrdiff_t yo = (ptrdiff_t)b * d->y_stride[0] + (ptrdiff_t)(l + t) * d->y_stride[1];
            for (size_t h = 0; h < d->heads; h++)
                head(y + yo + (ptrdiff_t)h * d->y_stride[2], x + xo + (ptrdiff_t)h * d->x_stride[2],
                     expand ? cs2 : row, r, d, copy_tail, stream);
        }
    }
}

/* ---- inside attention (peak_attention_rope) ------------------------------ */

/* The rope_apply call that rotates attention's Q (keys false) or K (keys
   true) into a packed [B, L, heads, Dh] copy: y_stride packed, y itself
   the caller's (the workspace). */
static inline void peak_attention_rope_desc(const peak_attention_desc *d, bool keys,
                                            peak_rope_desc *r)
{
    const peak_attention_rope *rp = d->rope;
    const peak_rope_desc none = PEAK_ROPE_DESC_DEFAULT;
    *r = none;
    r->batch = d->batch;
    r->seq_len = keys ? d->kv_len : d->q_len;
    r->heads = keys ? d->kv_heads : d->heads;
    r->head_dim = d->head_dim;
    for (int k = 0; k < 3; k++)
        r->x_stride[k] = keys ? d->k_stride[k] : d->q_stride[k];
    r->y_stride[2] = (ptrdiff_t)d->head_dim;
    r->y_stride[1] = r->y_stride[2] * (ptrdiff_t)r->heads;
    r->y_stride[0] = r->y_stride[1] * (ptrdiff_t)r->seq_len;
    r->pairing = rp->pairing;
    r->params = rp->params;
    r->cache = rp->cache;
    r->cache_rows = rp->cache_rows;
    r->pos0 = keys ? rp->k_pos0 : rp->q_pos0;
    r->positions = keys ? rp->k_positions : rp->q_positions;
    r->positions_stride = keys ? rp->k_positions_stride : rp->q_positions_stride;
}

/* Whether d's rope rotates K (keys) or Q. */
static inline bool peak_attention_rope_rotates(const peak_attention_desc *d, bool keys)
{
    return d->rope && (keys ? d->rope->rotate_k : d->rope->rotate_q);
}

#endif /* PEAK_ROPE_H */
