/*
 * api.c - the public entry points: validate everything, then call the active
 * tier's kernel.  No output byte is written before every check has passed,
 * so a rejected call leaves the caller's buffers exactly as they were.
 */
#include "embedding.h"
#include "internal.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *peak_status_string(peak_status s)
{
    switch (s) {
    case PEAK_OK: return "success";
    case PEAK_ERR_INVALID_ARG: return "invalid argument";
    case PEAK_ERR_OUT_OF_RANGE: return "index or size out of range";
    case PEAK_ERR_UNSUPPORTED: return "instruction set not supported on this CPU/OS/build";
    case PEAK_ERR_WORKSPACE: return "workspace too small";
    case PEAK_ERR_NO_MEMORY: return "out of memory";
    }
    return "unknown status";
}

/* ---- shared checks ------------------------------------------------------ */

/* The largest element offset a kernel may touch, computed without overflow:
   sum over dims of (n[k]-1)*stride[k], plus `inner` contiguous elements.
   Sizes are >= 1 and strides >= 0 here.  Returns 0 if the extent, in bytes,
   would not fit in a ptrdiff_t. */
static int extent_fits(const size_t *n, const ptrdiff_t *stride, int dims, size_t inner)
{
    size_t limit = (size_t)PTRDIFF_MAX / sizeof(float);
    size_t total = inner;
    if (inner > limit)
        return 0;
    for (int k = 0; k < dims; k++) {
        size_t span = n[k] - 1, s = (size_t)stride[k];
        if (span && s > (limit - total) / span)
            return 0;
        total += span * s;
    }
    return 1;
}

static int strides_nonneg(const ptrdiff_t *stride, int dims)
{
    for (int k = 0; k < dims; k++)
        if (stride[k] < 0)
            return 0;
    return 1;
}

/* An output's rows must not overlap one another.  Sufficient test: order
   the dimensions that have more than one entry by stride; each stride must
   step over everything the smaller ones span (a row for the smallest).  It
   accepts every packed or padded layout ([B,L,H,D], [B,H,L,D], gaps) and
   rejects layouts such as {16, 4, 4} where two index tuples share a row.
   Assumes extent_fits() holds, so no product below overflows. */
static int rows_apart(const size_t *n, const ptrdiff_t *stride, int dims, size_t row)
{
    int order[3], m = 0;
    for (int k = 0; k < dims; k++) {
        if (n[k] < 2)
            continue;
        int j = m++;
        while (j > 0 && stride[order[j - 1]] > stride[k]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = k;
    }
    size_t span = row;
    for (int j = 0; j < m; j++) {
        size_t s = (size_t)stride[order[j]];
        if (s < span)
            return 0;
        span = s * (n[order[j]] - 1) + span;
    }
    return 1;
}

/* Zero tests on the bits, not with ==: under MXCSR.DAZ (callers built with
   -ffast-math run with it) a subnormal compares equal to 0, which turned a
   subnormal scale into "the default scale" and rejected a subnormal base
   (found by tests/fuzz).  A kernel then reads the subnormal as the FPU
   does: as 0 under DAZ. */
static int f64_is_zero(double v)
{
    uint64_t b;
    memcpy(&b, &v, sizeof b);
    return (b << 1) == 0;
}

/* The bytes an [n0][n1][n2] tensor of `inner` contiguous elements spans
   (empty for NULL).  Assumes extent_fits(). */
typedef struct span {
    uintptr_t lo, hi;
} span;

static span tensor_span(const void *p, const size_t *n, const ptrdiff_t *stride, int dims,
                        size_t inner, size_t elem)
{
    span sp = {0, 0};
    if (!p)
        return sp;
    size_t off = inner;
    for (int k = 0; k < dims; k++)
        off += (n[k] - 1) * (size_t)stride[k];
    sp.lo = (uintptr_t)p;
    sp.hi = sp.lo + off * elem;
    return sp;
}

static span array_span(const void *p, size_t n, size_t elem)
{
    const ptrdiff_t one = 1;
    return tensor_span(p, &n, &one, 1, 1, elem);
}

/* Whether two spans share a byte (conservative for strided tensors: two
   that interleave without sharing an element also meet). */
static int spans_meet(span a, span b)
{
    return a.lo < b.hi && b.lo < a.hi;
}

/* A strided set of `rows` rows of `d` floats (one row: any stride). */
typedef struct row_set {
    const float *p;
    ptrdiff_t ld;
    size_t rows;
} row_set;

/* Whether two row sets share no float.  Exact when the strides are equal
   or the set at the higher address is one row (so the rows of one
   interleaved buffer, [x | y] with ld = 2d, and a gamma in y's row padding
   count as apart); otherwise the two extents must not meet, which rejects
   some disjoint interleavings of different strides.  Addresses are
   compared as integers: the sets may lie in different objects.  Assumes
   extent_fits(). */
static int rows_disjoint(row_set a, row_set b, size_t d)
{
    if (!spans_meet(tensor_span(a.p, &a.rows, &a.ld, 1, d, sizeof(float)),
                    tensor_span(b.p, &b.rows, &b.ld, 1, d, sizeof(float))))
        return 1;
    if ((uintptr_t)a.p > (uintptr_t)b.p) {
        const row_set t = a;
        a = b;
        b = t;
    }
    const uintptr_t pa = (uintptr_t)a.p, pb = (uintptr_t)b.p;
    if (a.rows < 2 || (b.rows > 1 && a.ld != b.ld) || (pb - pa) % sizeof(float))
        return 0;
    const size_t off = (size_t)((pb - pa) / sizeof(float)) % (size_t)a.ld;
    return off >= d && (size_t)a.ld - off >= d;
}

/* An output row set and an input one: the same rows (in place), or apart. */
static int in_place_or_apart(row_set out, row_set in, size_t d)
{
    return (out.p == in.p && out.ld == in.ld) || rows_disjoint(out, in, d);
}

/* An output must not overlap the mask's arrays: the kernels read them
   row by row while writing. */
static int apart_from_mask(span out, const peak_mask *m, size_t batch, size_t heads,
                           size_t q_len, size_t k_len)
{
    const size_t n[3] = {batch, heads, q_len};
    return !spans_meet(out, array_span(m->key_len, batch, sizeof(int32_t))) &&
           !spans_meet(out, tensor_span(m->keep, n, m->keep_stride, 3, k_len, 1)) &&
           !spans_meet(out, tensor_span(m->bias, n, m->bias_stride, 3, k_len, sizeof(float)));
}

static int pe_params_ok(const peak_pe_params *p)
{
    return (unsigned)p->layout <= PEAK_PE_SPLIT_PAPER && (unsigned)p->mode <= PEAK_PE_TORCH_F32 &&
           !signbit(p->base) && !f64_is_zero(p->base) && isfinite(p->base);
}

static const peak_pe_params default_pe_params = PEAK_PE_PARAMS_DEFAULT;

/* ---- sinusoid table ----------------------------------------------------- */

peak_status peak_pe_table(float *out, size_t n_pos, size_t d_model, size_t pos0,
                          const peak_pe_params *params)
{
    const peak_pe_params *p = params ? params : &default_pe_params;
    if (!out || n_pos == 0 || d_model == 0 || !pe_params_ok(p))
        return PEAK_ERR_INVALID_ARG;
    if (pos0 > PEAK_MAX_POSITION || n_pos > PEAK_MAX_POSITION - pos0)
        return PEAK_ERR_OUT_OF_RANGE;
    ptrdiff_t ld = (ptrdiff_t)d_model;
    if (!extent_fits(&n_pos, &ld, 1, d_model))
        return PEAK_ERR_OUT_OF_RANGE;
    peak_active_kernels()->pe_table(out, ld, n_pos, d_model, pos0, p);
    return PEAK_OK;
}

peak_status peak_pe_add(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                        size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                        size_t pe_rows, const peak_pe_params *params)
{
    const peak_pe_params *p = params ? params : &default_pe_params;
    if (!x || batch == 0 || seq_len == 0 || d_model == 0 || batch_stride < 0 || ld_x < 0)
        return PEAK_ERR_INVALID_ARG;
    size_t n[2] = {batch, seq_len};
    ptrdiff_t st[2] = {batch_stride, ld_x};
    if (!extent_fits(n, st, 2, d_model))
        return PEAK_ERR_OUT_OF_RANGE;
    if ((size_t)ld_x < d_model || !rows_apart(n, st, 2, d_model) || x == pe)
        return PEAK_ERR_INVALID_ARG;
    if (!pe && !pe_params_ok(p))
        return PEAK_ERR_INVALID_ARG;
    size_t limit = pe ? pe_rows : PEAK_MAX_POSITION;
    if (pos0 > limit || seq_len > limit - pos0)
        return PEAK_ERR_OUT_OF_RANGE;
    if (pe) {
        ptrdiff_t ld_pe = (ptrdiff_t)d_model;
        if (!extent_fits(&pe_rows, &ld_pe, 1, d_model))
            return PEAK_ERR_OUT_OF_RANGE;
        if (spans_meet(tensor_span(x, n, st, 2, d_model, sizeof(float)),
                       tensor_span(pe, &pe_rows, &ld_pe, 1, d_model, sizeof(float))))
            return PEAK_ERR_INVALID_ARG;
    }
    peak_active_kernels()->pe_add(x, batch_stride, ld_x, batch, seq_len, d_model, pos0, pe, p);
    return PEAK_OK;
}

/* ---- embedding + PE ------------------------------------------------------ */

/* Walks tokens in order and yields each one's position: explicit, pos0 plus
   the index within its sequence, or fairseq's numbering (make_positions:
   pad tokens get none, the others padding_idx + 1 + earlier non-pads). */
typedef struct pos_walk {
    const peak_embed_desc *d;
    const int32_t *ids;
    size_t t, in_seq, non_pad;
} pos_walk;

static int64_t pos_next(pos_walk *w)
{
    const peak_embed_desc *d = w->d;
    size_t t = w->t++;
    if (d->positions)
        return d->positions[t];
    if (d->seq_len && w->in_seq == d->seq_len)
        w->in_seq = w->non_pad = 0;
    size_t s = w->in_seq++;
    if (d->padding_idx < 0)
        return (int64_t)(d->pos0 + s);
    if (w->ids[t] == d->padding_idx)
        return -1;
    return (int64_t)(d->pos0 + (size_t)d->padding_idx + 1 + w->non_pad++);
}

static peak_status embed_check(float *out, ptrdiff_t ld_out, const int32_t *ids, size_t n_tokens,
                               const peak_embed_desc *d)
{
    if (!out || !ids || !d || !d->table || n_tokens == 0 || d->vocab == 0 || d->d_model == 0)
        return PEAK_ERR_INVALID_ARG;
    if (ld_out < 0 || d->ld_table < 0 || (size_t)ld_out < d->d_model ||
        (size_t)d->ld_table < d->d_model || !isfinite(d->scale))
        return PEAK_ERR_INVALID_ARG;
    if (d->padding_idx < -1 || (d->padding_idx >= 0 && (size_t)d->padding_idx >= d->vocab) ||
        (d->padding_idx >= 0 && d->positions))
        return PEAK_ERR_INVALID_ARG;
    if (out == d->table || (d->pe && out == d->pe) || (!d->pe && !pe_params_ok(&d->pe_params)))
        return PEAK_ERR_INVALID_ARG;
    ptrdiff_t ld_pe = (ptrdiff_t)d->d_model;
    if (!extent_fits(&n_tokens, &ld_out, 1, d->d_model) ||
        !extent_fits(&d->vocab, &d->ld_table, 1, d->d_model) ||
        (d->pe && d->pe_rows && !extent_fits(&d->pe_rows, &ld_pe, 1, d->d_model)))
        return PEAK_ERR_OUT_OF_RANGE;
    /* The kernels read ids, positions, table and pe while they write out
       (a chunk of tokens at a time). */
    const span so = tensor_span(out, &n_tokens, &ld_out, 1, d->d_model, sizeof(float));
    if (spans_meet(so, array_span(ids, n_tokens, sizeof(int32_t))) ||
        spans_meet(so, array_span(d->positions, n_tokens, sizeof(int64_t))) ||
        spans_meet(so, tensor_span(d->table, &d->vocab, &d->ld_table, 1, d->d_model,
                                   sizeof(float))) ||
        (d->pe_rows && spans_meet(so, tensor_span(d->pe, &d->pe_rows, &ld_pe, 1, d->d_model,
                                                  sizeof(float)))))
        return PEAK_ERR_INVALID_ARG;
    /* pos0 bounded first, so pos0 + index (+ padding_idx + 1) cannot wrap.
       Against PEAK_MAX_POSITION, not the table: a call of pad tokens only
       uses no position, and is valid with a table as it is on the fly. */
    if (!d->positions && d->pos0 >= PEAK_MAX_POSITION)
        return PEAK_ERR_OUT_OF_RANGE;
    /* Every id and position is checked before the first row is written. */
    const uint64_t limit = d->pe ? d->pe_rows : PEAK_MAX_POSITION;
    pos_walk w = {d, ids, 0, 0, 0};
    for (size_t t = 0; t < n_tokens; t++) {
        int64_t pos = pos_next(&w);
        if (ids[t] < 0 || (size_t)ids[t] >= d->vocab)
            return PEAK_ERR_OUT_OF_RANGE;
        if (pos < -1 || (pos == -1 && d->padding_idx < 0) || (pos >= 0 && (uint64_t)pos >= limit))
            return PEAK_ERR_OUT_OF_RANGE;
    }
    return PEAK_OK;
}

/* A batch of equal-length sequences (pos0 + t % seq_len, no fairseq
   numbering) needs the same PE rows in every sequence, so the kernels are
   handed a block of positions at a time for all the full sequences at once
   (peak_embed_pe_fn's batch), and take the tokens that share a position
   one after another: each PE row is read into L1 once per batch.  A last,
   shorter sequence takes the same block on its own.

   With a table the block is rows of it.  Without one, the block is
   computed here, once per position, into the stack by the pe_table kernel
   (peak_pe_table's values: the kernels' on-the-fly path gives the same
   bits, the tests hold both to them), and the kernels take their table
   path.  The kernels' own on-the-fly path computes a double-precision
   sincos pair per element for every token; here it is one per element per
   position, 1/64 of the work for a batch of 64 (bench-embedding.c: fly:1
   against fly:0).  The stack block is 16 KiB (8 rows of d_model 512): it
   stays in L1 while the batch reads it, and keeps this path's stack below
   the per-token path's (tests/test-stack.c); a 32 KiB block measured ~6%
   faster on 64 x 512 tokens but took 67 KiB of stack on AVX-512.
   false: not this case, or rows wider than the block. */
enum { EMBED_FLY_FLOATS = 4096, EMBED_FLY_ROWS = 64 };
/* Positions per kernel call, resolved into an array on the stack so that
   nothing is allocated (2 KiB). */
enum { EMBED_POS_CHUNK = 256 };

/* The kernel prefetches the E rows of the tokens a few places ahead of the
   one it works on, within its call; a block's first rows are requested
   here, before its PE rows are computed, so that work hides their latency.
   They are the first in the kernel's order: position by position, the
   batch's tokens at each (the block is n positions of batch sequences). */
static void embed_prefetch_block(const int32_t *ids, size_t s0, size_t n, size_t seq,
                                 size_t batch, const peak_embed_desc *d)
{
    for (size_t k = 0; k < PEAK_EMBEDDING_PREFETCH_TOKENS && k < n * batch; k++)
        peak_prefetch(peak_embedding_row_of(d, ids[k % batch * seq + s0 + k / batch]), d->d_model,
                      PEAK_PF_L1);
}

static bool embed_seq_batched(float *out, ptrdiff_t ld_out, const int32_t *ids, size_t n_tokens,
                              const peak_embed_desc *d)
{
    const size_t seq = d->seq_len, dm = d->d_model;
    if (d->positions || d->padding_idx >= 0 || seq == 0 || n_tokens <= seq ||
        (!d->pe && dm > EMBED_FLY_FLOATS))
        return false;
    const size_t full = n_tokens / seq, rest = n_tokens % seq;
    size_t rows = EMBED_POS_CHUNK;
    _Alignas(64) float pe[EMBED_FLY_FLOATS];
    int64_t pos[EMBED_POS_CHUNK];
    peak_embed_desc block = *d;
    if (!d->pe) {
        rows = EMBED_FLY_FLOATS / dm < EMBED_FLY_ROWS ? EMBED_FLY_FLOATS / dm : EMBED_FLY_ROWS;
        block.pe = pe;
        block.pe_rows = rows;
        for (size_t r = 0; r < rows; r++)
            pos[r] = (int64_t)r;
    }
    const peak_kernels *k = peak_active_kernels();
    const bool stream = peak_embedding_streams(n_tokens, dm);
    for (size_t s0 = 0; s0 < seq; s0 += rows) {
        const size_t n = seq - s0 < rows ? seq - s0 : rows;
        embed_prefetch_block(ids, s0, n, seq, full, d);
        if (d->pe)
            for (size_t r = 0; r < n; r++)
                pos[r] = (int64_t)(d->pos0 + s0 + r);
        else
            k->pe_table(pe, (ptrdiff_t)dm, n, dm, d->pos0 + s0, &d->pe_params);
        k->embed_pe(out + s0 * (size_t)ld_out, ld_out, ids + s0, pos, n, full, seq, &block,
                    stream);
        if (rest > s0) {
            const size_t t0 = full * seq + s0;
            k->embed_pe(out + t0 * (size_t)ld_out, ld_out, ids + t0, pos,
                        rest - s0 < n ? rest - s0 : n, 1, 0, &block, stream);
        }
    }
    return true;
}

peak_status peak_embed_pe(float *out, ptrdiff_t ld_out, const int32_t *ids, size_t n_tokens,
                          const peak_embed_desc *desc)
{
    peak_status s = embed_check(out, ld_out, ids, n_tokens, desc);
    if (s != PEAK_OK)
        return s;
    if (embed_seq_batched(out, ld_out, ids, n_tokens, desc))
        return PEAK_OK;
    int64_t pos[EMBED_POS_CHUNK];
    pos_walk w = {desc, ids, 0, 0, 0};
    peak_embed_pe_fn kernel = peak_active_kernels()->embed_pe;
    const bool stream = peak_embedding_streams(n_tokens, desc->d_model);
    for (size_t t0 = 0; t0 < n_tokens; t0 += EMBED_POS_CHUNK) {
        size_t n = n_tokens - t0 < EMBED_POS_CHUNK ? n_tokens - t0 : EMBED_POS_CHUNK;
        for (size_t t = 0; t < n; t++)
            pos[t] = pos_next(&w);
        kernel(out + t0 * (size_t)ld_out, ld_out, ids + t0, pos, n, 1, 0, desc, stream);
    }
    return PEAK_OK;
}

/* ---- masks --------------------------------------------------------------- */

/* qpos = i + q_offset (+ Lk - Lq) must stay far from int64 overflow. */
#define PEAK_MAX_INDEX ((size_t)1 << 40)

static peak_status mask_check(const peak_mask *m, size_t batch, size_t heads, size_t q_len,
                              size_t k_len)
{
    if ((unsigned)m->align > PEAK_ALIGN_BOTTOM_RIGHT || !strides_nonneg(m->keep_stride, 3) ||
        !strides_nonneg(m->bias_stride, 3))
        return PEAK_ERR_INVALID_ARG;
    size_t n[3] = {batch, heads, q_len};
    if ((m->keep && !extent_fits(n, m->keep_stride, 3, k_len)) ||
        (m->bias && !extent_fits(n, m->bias_stride, 3, k_len)))
        return PEAK_ERR_OUT_OF_RANGE;
    if (m->q_offset > PEAK_MAX_INDEX || m->window > PEAK_MAX_INDEX || q_len > PEAK_MAX_INDEX ||
        k_len > PEAK_MAX_INDEX)
        return PEAK_ERR_OUT_OF_RANGE;
    if (m->key_len)
        for (size_t b = 0; b < batch; b++)
            if (m->key_len[b] < 0 || (size_t)m->key_len[b] > k_len)
                return PEAK_ERR_OUT_OF_RANGE;
    return PEAK_OK;
}

/* ---- softmax ------------------------------------------------------------ */

peak_status peak_softmax(float *y, const float *x, const peak_softmax_desc *desc)
{
    if (!y || !x || !desc)
        return PEAK_ERR_INVALID_ARG;
    const peak_softmax_desc *d = desc;
    size_t n[3] = {d->batch, d->heads, d->q_len};
    if (!d->batch || !d->heads || !d->q_len || !d->k_len || !isfinite(d->scale))
        return PEAK_ERR_INVALID_ARG;
    if (!strides_nonneg(d->x_stride, 3) || !strides_nonneg(d->y_stride, 3))
        return PEAK_ERR_INVALID_ARG;
    if (!extent_fits(n, d->x_stride, 3, d->k_len) || !extent_fits(n, d->y_stride, 3, d->k_len))
        return PEAK_ERR_OUT_OF_RANGE;
    if (!rows_apart(n, d->y_stride, 3, d->k_len))
        return PEAK_ERR_INVALID_ARG;
    if (y == x && (d->x_stride[0] != d->y_stride[0] || d->x_stride[1] != d->y_stride[1] ||
                   d->x_stride[2] != d->y_stride[2]))
        return PEAK_ERR_INVALID_ARG;
    peak_status s = mask_check(&d->mask, d->batch, d->heads, d->q_len, d->k_len);
    if (s != PEAK_OK)
        return s;
    const span sy = tensor_span(y, n, d->y_stride, 3, d->k_len, sizeof(float));
    if ((y != x && spans_meet(sy, tensor_span(x, n, d->x_stride, 3, d->k_len, sizeof(float)))) ||
        !apart_from_mask(sy, &d->mask, d->batch, d->heads, d->q_len, d->k_len))
        return PEAK_ERR_INVALID_ARG;
    /* Kernels never see the "0 means 1" default. */
    peak_softmax_desc resolved = *d;
    if (peak_f32_is_zero(resolved.scale))
        resolved.scale = 1.0f;
    peak_active_kernels()->softmax(y, x, &resolved);
    return PEAK_OK;
}

/* ---- exponential ---------------------------------------------------------- */

peak_status peak_exp(float *y, const float *x, size_t n)
{
    if (!y || !x || n == 0)
        return PEAK_ERR_INVALID_ARG;
    if (n > (size_t)PTRDIFF_MAX / sizeof(float))
        return PEAK_ERR_OUT_OF_RANGE;
    if (y != x && spans_meet(array_span(y, n, sizeof(float)), array_span(x, n, sizeof(float))))
        return PEAK_ERR_INVALID_ARG;
    peak_active_kernels()->exp(y, x, n);
    return PEAK_OK;
}

/* ---- attention ------------------------------------------------------------ */

/* Fills the zero "defaults" (kv_heads, v_head_dim, scale) and checks shapes. */
static peak_status attention_resolve(const peak_attention_desc *in, peak_attention_desc *d)
{
    *d = *in;
    if (!d->batch || !d->heads || !d->q_len || !d->kv_len || !d->head_dim || !isfinite(d->scale))
        return PEAK_ERR_INVALID_ARG;
    if (!d->kv_heads)
        d->kv_heads = d->heads;
    if (!d->v_head_dim)
        d->v_head_dim = d->head_dim;
    if (peak_f32_is_zero(d->scale))
        d->scale = (float)(1.0 / sqrt((double)d->head_dim));
    if (d->kv_heads > d->heads || d->heads % d->kv_heads)
        return PEAK_ERR_INVALID_ARG;
    if (!strides_nonneg(d->q_stride, 3) || !strides_nonneg(d->k_stride, 3) ||
        !strides_nonneg(d->v_stride, 3) || !strides_nonneg(d->o_stride, 3) ||
        !strides_nonneg(d->lse_stride, 3))
        return PEAK_ERR_INVALID_ARG;
    size_t nq[3] = {d->batch, d->q_len, d->heads};
    size_t nk[3] = {d->batch, d->kv_len, d->kv_heads};
    size_t nl[3] = {d->batch, d->heads, d->q_len};
    if (!extent_fits(nq, d->q_stride, 3, d->head_dim) ||
        !extent_fits(nk, d->k_stride, 3, d->head_dim) ||
        !extent_fits(nk, d->v_stride, 3, d->v_head_dim) ||
        !extent_fits(nq, d->o_stride, 3, d->v_head_dim) ||
        (d->lse && !extent_fits(nl, d->lse_stride, 3, 1)))
        return PEAK_ERR_OUT_OF_RANGE;
    if (!rows_apart(nq, d->o_stride, 3, d->v_head_dim) ||
        (d->lse && !rows_apart(nl, d->lse_stride, 3, 1)))
        return PEAK_ERR_INVALID_ARG;
    return mask_check(&d->mask, d->batch, d->heads, d->q_len, d->kv_len);
}

/* O, lse and the workspace (its first ws_bytes; none when NULL) must not
   overlap an input, the mask's arrays or each other: the kernels write all
   three while they read Q, K, V and the mask. */
static int attention_outputs_apart(const float *o, const float *q, const float *k, const float *v,
                                   const peak_attention_desc *d, const void *ws, size_t ws_bytes)
{
    const size_t nq[3] = {d->batch, d->q_len, d->heads};
    const size_t nk[3] = {d->batch, d->kv_len, d->kv_heads};
    const size_t nl[3] = {d->batch, d->heads, d->q_len};
    const span in[3] = {tensor_span(q, nq, d->q_stride, 3, d->head_dim, sizeof(float)),
                        tensor_span(k, nk, d->k_stride, 3, d->head_dim, sizeof(float)),
                        tensor_span(v, nk, d->v_stride, 3, d->v_head_dim, sizeof(float))};
    const span out[3] = {tensor_span(o, nq, d->o_stride, 3, d->v_head_dim, sizeof(float)),
                         tensor_span(d->lse, nl, d->lse_stride, 3, 1, sizeof(float)),
                         ws_bytes ? array_span(ws, ws_bytes, 1) : (span){0, 0}};
    for (int j = 0; j < 3; j++) {
        for (int i = j + 1; i < 3; i++)
            if (spans_meet(out[j], out[i]))
                return 0;
        for (int i = 0; i < 3; i++)
            if (spans_meet(out[j], in[i]))
                return 0;
        if (!apart_from_mask(out[j], &d->mask, d->batch, d->heads, d->q_len, d->kv_len))
            return 0;
    }
    return 1;
}

peak_status peak_attention_workspace_size(const peak_attention_desc *desc, size_t *bytes)
{
    if (!desc || !bytes)
        return PEAK_ERR_INVALID_ARG;
    peak_attention_desc d;
    peak_status s = attention_resolve(desc, &d);
    if (s != PEAK_OK)
        return s;
    *bytes = peak_active_kernels()->attention_workspace(&d);
    return PEAK_OK;
}

peak_status peak_attention(float *o, const float *q, const float *k, const float *v,
                           const peak_attention_desc *desc, void *workspace, size_t workspace_size)
{
    if (!o || !q || !k || !v || !desc)
        return PEAK_ERR_INVALID_ARG;
    if (o == q || o == k || o == v || (desc->lse && (desc->lse == o)))
        return PEAK_ERR_INVALID_ARG;
    peak_attention_desc d;
    peak_status s = attention_resolve(desc, &d);
    if (s != PEAK_OK)
        return s;
    const peak_kernels *kern = peak_active_kernels();
    size_t need = kern->attention_workspace(&d);
    if (workspace && (uintptr_t)workspace % 64)
        return PEAK_ERR_INVALID_ARG;
    /* The size first: a workspace of at least `need` bytes is one whose
       extent below cannot wrap around the address space. */
    if (workspace && workspace_size < need)
        return PEAK_ERR_WORKSPACE;
    if (!attention_outputs_apart(o, q, k, v, &d, workspace, workspace ? need : 0))
        return PEAK_ERR_INVALID_ARG;
    void *ws = workspace, *owned = NULL;
    if (!workspace && need) {
        /* The convenience path; callers in a hot loop pass their own. */
        owned = ws = aligned_alloc(64, (need + 63) & ~(size_t)63);
        if (!owned)
            return PEAK_ERR_NO_MEMORY;
    }
    kern->attention(o, q, k, v, &d, ws);
    free(owned);
    return PEAK_OK;
}

/* ---- residual + LayerNorm ------------------------------------------------ */

peak_status peak_add_layernorm(float *y, ptrdiff_t ld_y, float *sum, ptrdiff_t ld_sum,
                               const float *x, ptrdiff_t ld_x, const float *r, ptrdiff_t ld_r,
                               const float *gamma, const float *beta, size_t rows,
                               size_t d_model, float eps)
{
    if (!y || !x || !rows || !d_model || (signbit(eps) && !peak_f32_is_zero(eps)) || !isfinite(eps))
        return PEAK_ERR_INVALID_ARG;
    if (ld_y < 0 || ld_x < 0 || (size_t)ld_y < d_model || (size_t)ld_x < d_model)
        return PEAK_ERR_INVALID_ARG;
    if ((r && (ld_r < 0 || (size_t)ld_r < d_model)) ||
        (sum && (ld_sum < 0 || (size_t)ld_sum < d_model)))
        return PEAK_ERR_INVALID_ARG;
    if (!extent_fits(&rows, &ld_y, 1, d_model) || !extent_fits(&rows, &ld_x, 1, d_model) ||
        (r && !extent_fits(&rows, &ld_r, 1, d_model)) ||
        (sum && !extent_fits(&rows, &ld_sum, 1, d_model)))
        return PEAK_ERR_OUT_OF_RANGE;
    /* The SIMD tiers write row t while they read row t+1 (layernorm.h),
       so any overlap but the exact in-place one would change the result. */
    const row_set ys = {y, ld_y, rows}, ss = {sum, ld_sum, rows}, xs = {x, ld_x, rows},
                  rs = {r, ld_r, rows}, gs = {gamma, 0, 1}, bs = {beta, 0, 1};
    const row_set outs[2] = {ys, ss};
    for (int k = 0; k < 2; k++)
        if (!in_place_or_apart(outs[k], xs, d_model) || !in_place_or_apart(outs[k], rs, d_model) ||
            !rows_disjoint(outs[k], gs, d_model) || !rows_disjoint(outs[k], bs, d_model))
            return PEAK_ERR_INVALID_ARG;
    if (!rows_disjoint(ys, ss, d_model))
        return PEAK_ERR_INVALID_ARG;
    peak_active_kernels()->add_layernorm(y, ld_y, sum, ld_sum, x, ld_x, r, ld_r, gamma, beta,
                                         rows, d_model, eps);
    return PEAK_OK;
}
