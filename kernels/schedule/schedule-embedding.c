/*
 * schedule-embedding.c - the embedding scheduler: which work items
 * (parallel.h) one validated peak_embed_pe call becomes, and their kernel
 * calls.  A batch of equal-length sequences goes a block of positions at a
 * time for all its sequences at once, an item a block; any other call,
 * 256 tokens at a time with their positions resolved here, an item a run
 * of them.  Each path is one peak_work.  Whether the stores stream is
 * decided here, for the whole call (peak_embedding_streams).  An output
 * row's bits do not depend on its item: a token is E * scale + PE, its PE
 * row the table's bits however computed (embedding-body.h).
 * Kernel policy, not API: api.c has checked every argument before this runs.
 */
#include "schedule-embedding.h"

#include "convert.h"
#include "embedding.h"
#include "items.h"
#include "schedule.h"

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
   faster on 64 x 512 tokens but took 67 KiB of stack on AVX-512. */
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
    const size_t ahead = peak_embedding_prefetch_tokens(peak_dtype_bytes(d->table_type));
    for (size_t k = 0; k < ahead && k < n * batch; k++)
        peak_prefetch_bytes(peak_embedding_row_of(d, ids[k % batch * seq + s0 + k / batch]),
                            peak_embedding_row_bytes(d), PEAK_PF_L1);
}

/* Positions a batched item takes: the block above on the fly; from a
   table, as many as make about EMBED_POS_CHUNK tokens with all the
   sequences (a table's rows cost nothing to share between items, and a
   batch of 64 sequences of 512 then makes 128 items instead of 2). */
static size_t embed_batched_block(size_t full, const peak_embed_desc *d)
{
    if (!d->pe) {
        const size_t fit = EMBED_FLY_FLOATS / d->d_model;
        return fit < EMBED_FLY_ROWS ? fit : EMBED_FLY_ROWS;
    }
    return peak_clamp_size(EMBED_POS_CHUNK / full, 1, EMBED_POS_CHUNK);
}

/* Whether the call is a batch of equal-length sequences that the batched
   path takes: not with positions or fairseq numbering, and on the fly only
   for rows that fit the block. */
static bool embed_batches(size_t n_tokens, const peak_embed_desc *d)
{
    return !d->positions && d->padding_idx < 0 && d->seq_len && n_tokens > d->seq_len &&
           (d->pe || d->d_model <= EMBED_FLY_FLOATS);
}

/* The cost model, on one core (AVX2, Zen 3, d_model 512, 8192 tokens):
   a float of output 0.6 ns with the PE from a table (0.58-0.71 measured),
   1.1 ns with the PE computed per token (1.10); a batched block's PE rows
   as the table's (schedule-pe.c). */
#define EMBED_TABLE_NS 0.6
#define EMBED_FLY_NS 1.1

/* ---- the kernel calls --------------------------------------------------- */

/* The kernels a call runs on (peak_schedule_typed_kernels: the scalar
   tier's for float16 on AVX2 without F16C), and whether its pair of types
   goes through float32 rows (embed_call_staged). */
typedef struct embed_plan {
    const peak_kernels *k;
    bool staged;
} embed_plan;

static embed_plan embed_plan_for(const peak_embed_desc *d)
{
    embed_plan p;
    p.k = peak_schedule_typed_kernels(d->table_type == PEAK_F16 || d->out_type == PEAK_F16);
    p.staged = !peak_embedding_kernel_takes(p.k->isa, d->table_type, d->out_type);
    return p;
}

/* Output row i. */
static void *embed_out_row(void *out, ptrdiff_t ld_out, size_t i, peak_dtype to)
{
    return (char *)out + i * (size_t)ld_out * peak_dtype_bytes(to);
}

/* A kernel call of a pair the kernel does not take: a chunk of tokens at
   a time into float32 rows on the stack (a float32 out, which every
   kernel takes), rounded from there into out.  Its own frame, so that
   other calls never reserve the rows. */
static __attribute__((noinline)) void embed_call_staged(const embed_plan *p, void *out,
                                                        ptrdiff_t ld_out, const int32_t *ids,
                                                        const int64_t *pos, size_t n_tokens,
                                                        size_t batch, size_t seq_stride,
                                                        const peak_embed_desc *d)
{
    _Alignas(64) float rows[PEAK_EMBED_MAX_TYPED];
    peak_embed_desc f32 = *d;
    f32.out_type = PEAK_F32;
    const size_t dm = d->d_model, per = PEAK_EMBED_MAX_TYPED / dm;
    for (size_t b = 0; b < batch; b++)
        for (size_t t0 = 0; t0 < n_tokens; t0 += per) {
            const size_t c = n_tokens - t0 < per ? n_tokens - t0 : per, i = b * seq_stride + t0;
            p->k->embed_pe(rows, (ptrdiff_t)dm, ids + i, pos + t0, c, 1, 0, &f32, false);
            peak_stage_rows_out(embed_out_row(out, ld_out, i, d->out_type), d->out_type, ld_out,
                                rows, dm, c, dm);
        }
}

/* A kernel call: tokens [0, n_tokens) of batch sequences (peak_embed_pe_fn). */
static void embed_call(const embed_plan *p, void *out, ptrdiff_t ld_out, const int32_t *ids,
                       const int64_t *pos, size_t n_tokens, size_t batch, size_t seq_stride,
                       const peak_embed_desc *d, bool stream)
{
    if (p->staged)
        embed_call_staged(p, out, ld_out, ids, pos, n_tokens, batch, seq_stride, d);
    else
        p->k->embed_pe(out, ld_out, ids, pos, n_tokens, batch, seq_stride, d, stream);
}

/* ---- a batch of equal-length sequences: blocks of positions -------------- */

typedef struct embed_batched {
    void *out;
    ptrdiff_t ld_out;
    const int32_t *ids;
    const peak_embed_desc *d;
    size_t full, rest; /* full sequences; tokens of the last, shorter one */
    size_t block;      /* positions an item */
    bool stream;
    embed_plan plan;
} embed_batched;

/* Positions [*s0, *s0 + *n) of item `item`; returns its tokens. */
static size_t embed_batched_part(const embed_batched *e, size_t item, size_t *s0, size_t *n)
{
    *s0 = item * e->block;
    *n = peak_item_len(e->d->seq_len, *s0, e->block);
    const size_t last = e->rest > *s0 ? peak_item_len(e->rest, *s0, *n) : 0;
    return *n * e->full + last;
}

static void embed_batched_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const embed_batched *e = ctx;
    const peak_embed_desc *d = e->d;
    const size_t seq = d->seq_len, dm = d->d_model;
    size_t s0, n;
    const size_t tokens = embed_batched_part(e, item, &s0, &n);
    _Alignas(64) float pe[EMBED_FLY_FLOATS];
    int64_t pos[EMBED_POS_CHUNK];
    peak_embed_desc block = *d;
    embed_prefetch_block(e->ids, s0, n, seq, e->full, d);
    for (size_t r = 0; r < n; r++)
        pos[r] = d->pe ? (int64_t)(d->pos0 + s0 + r) : (int64_t)r;
    if (!d->pe) {
        block.pe = pe;
        block.pe_rows = n;
        e->plan.k->pe_table(pe, (ptrdiff_t)dm, n, dm, d->pos0 + s0, &d->pe_params, 0,
                            PEAK_PE_FREQ_END, false);
    }
    embed_call(&e->plan, embed_out_row(e->out, e->ld_out, s0, d->out_type), e->ld_out,
               e->ids + s0, pos, n, e->full, seq, &block, e->stream);
    if (tokens > n * e->full) {
        const size_t t0 = e->full * seq + s0;
        embed_call(&e->plan, embed_out_row(e->out, e->ld_out, t0, d->out_type), e->ld_out,
                   e->ids + t0, pos, tokens - n * e->full, 1, 0, &block, e->stream);
    }
}

static double embed_batched_cost(const void *ctx, size_t item)
{
    const embed_batched *e = ctx;
    const peak_embed_desc *d = e->d;
    size_t s0, n;
    const size_t tokens = embed_batched_part(e, item, &s0, &n);
    const double pe =
        d->pe ? 0.0
              : peak_schedule_pe_rows_ns(n, peak_pe_n_freq(d->d_model, d->pe_params.layout),
                                         &d->pe_params);
    return EMBED_TABLE_NS * (double)tokens * (double)d->d_model + pe;
}

static void embed_batched_run(void *out, ptrdiff_t ld_out, const int32_t *ids, size_t n_tokens,
                              const peak_embed_desc *d, const peak_threadpool *pool)
{
    const size_t full = n_tokens / d->seq_len;
    embed_batched e = {.out = out,
                       .ld_out = ld_out,
                       .ids = ids,
                       .d = d,
                       .full = full,
                       .rest = n_tokens % d->seq_len,
                       .block = embed_batched_block(full, d),
                       .stream = peak_embedding_streams(n_tokens, d->d_model),
                       .plan = embed_plan_for(d)};
    peak_work w = {.items = peak_items(d->seq_len, e.block),
                   .run = embed_batched_item,
                   .cost = embed_batched_cost,
                   .ctx = &e};
    w.total_ns = peak_work_sum_ns(&w);
    peak_work_run(&w, pool);
}

/* ---- any other call: runs of tokens --------------------------------------- */

/* An item is EMBED_POS_CHUNK tokens (one kernel call) or, past
   EMBED_MARKS items, the multiple of it that keeps EMBED_MARKS items: with
   fairseq numbering an item needs the count of non-pad tokens before it in
   its sequence, which a pass over the ids records here, one per item, on
   the stack (1 KiB). */
enum { EMBED_MARKS = 256 };

typedef struct embed_tokens {
    void *out;
    ptrdiff_t ld_out;
    const int32_t *ids;
    const peak_embed_desc *d;
    size_t n_tokens, per_item;
    const uint32_t *non_pad; /* per item, with fairseq numbering; else NULL */
    bool stream;
    embed_plan plan;
} embed_tokens;

static void embed_tokens_item(void *ctx, size_t item, void *scratch)
{
    (void)scratch;
    const embed_tokens *e = ctx;
    const size_t t0 = item * e->per_item, end = t0 + peak_item_len(e->n_tokens, t0, e->per_item);
    int64_t pos[EMBED_POS_CHUNK];
    pos_walk w = pos_walk_at(e->d, e->ids, t0, e->non_pad ? e->non_pad[item] : 0);
    for (size_t t = t0; t < end; t += EMBED_POS_CHUNK) {
        const size_t n = peak_item_len(end, t, EMBED_POS_CHUNK);
        for (size_t i = 0; i < n; i++)
            pos[i] = pos_next(&w);
        embed_call(&e->plan, embed_out_row(e->out, e->ld_out, t, e->d->out_type), e->ld_out,
                   e->ids + t, pos, n, 1, 0, e->d, e->stream);
    }
}

static double embed_tokens_cost(const void *ctx, size_t item)
{
    const embed_tokens *e = ctx;
    const double ns = e->d->pe ? EMBED_TABLE_NS : EMBED_FLY_NS;
    const size_t tokens = peak_item_len(e->n_tokens, item * e->per_item, e->per_item);
    return ns * (double)tokens * (double)e->d->d_model;
}

/* non_pad[k]: the non-pad tokens of item k's first token's sequence
   before it. */
static void embed_count_non_pad(const embed_tokens *e, uint32_t *non_pad)
{
    const size_t seq = e->d->seq_len;
    size_t count = 0, in_seq = 0, in_item = 0, item = 0;
    for (size_t t = 0; t < e->n_tokens; t++, in_seq++, in_item++) {
        if (in_seq == seq)
            count = in_seq = 0;
        if (in_item == e->per_item)
            in_item = 0;
        if (in_item == 0)
            non_pad[item++] = (uint32_t)count; /* < PEAK_MAX_POSITION: api.c */
        count += e->ids[t] != e->d->padding_idx;
    }
}

static void embed_tokens_run(void *out, ptrdiff_t ld_out, const int32_t *ids, size_t n_tokens,
                             const peak_embed_desc *d, const peak_threadpool *pool)
{
    uint32_t non_pad[EMBED_MARKS];
    const size_t chunks = peak_items(n_tokens, EMBED_POS_CHUNK);
    embed_tokens e = {.out = out,
                      .ld_out = ld_out,
                      .ids = ids,
                      .d = d,
                      .n_tokens = n_tokens,
                      .per_item = EMBED_POS_CHUNK * peak_items(chunks, EMBED_MARKS),
                      .non_pad = d->padding_idx >= 0 ? non_pad : NULL,
                      .stream = peak_embedding_streams(n_tokens, d->d_model),
                      .plan = embed_plan_for(d)};
    if (e.non_pad)
        embed_count_non_pad(&e, non_pad);
    peak_work w = {.items = peak_items(n_tokens, e.per_item),
                   .run = embed_tokens_item,
                   .cost = embed_tokens_cost,
                   .ctx = &e};
    w.total_ns = peak_work_sum_ns(&w);
    peak_work_run(&w, pool);
}

void peak_schedule_embed_pe(void *out, ptrdiff_t ld_out, const int32_t *ids, size_t n_tokens,
                            const peak_embed_desc *desc, const peak_threadpool *pool)
{
    if (embed_batches(n_tokens, desc))
        embed_batched_run(out, ld_out, ids, n_tokens, desc, pool);
    else
        embed_tokens_run(out, ld_out, ids, n_tokens, desc, pool);
}
