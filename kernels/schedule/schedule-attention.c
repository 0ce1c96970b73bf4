/*
 * schedule-attention.c - peak_attention as work items: the parts of a call
 * (internal.h, peak_attention_part), their order and cost model, each
 * worker's scratch slot, and split-KV.
 *
 * Parts, cut by the call's shapes (and mask) alone:
 *   - a kv head with fewer rows than the tier's row_path_rows (decode, a
 *     small MQA group) goes to the rows kernel, a bundle of kv heads per
 *     part walking their keys in step (up to row_states rows);
 *   - any other kv head is cut into blocks of block_rows rows for the block
 *     kernel; its last rows, if fewer than row_path_rows, go to the rows
 *     kernel, and so do its last group_rows % (2 row_path_rows) rows when
 *     they are at most row_path_rows / 2 (plan_tail): the block kernel
 *     computes whole vectors of rows.
 * The order: batch, kv head, then the kv head's blocks heaviest first
 * (causal: the last block first).  Greedy list scheduling (parallel.h)
 * then ends on light items, while the parts a worker takes one after the
 * other mostly share a kv head, whose packed K/V tiles its slot keeps
 * (attention-workspace.h): with 256 blocks per kv head (L 4096, 4 query
 * heads per kv head) a worker of 16 takes ~16 blocks of a kv head in a
 * row.  The cost model (part_cost) is what the simulation in the tests
 * balances: visible keys x rows x (Dh + Dv) at the tier's ns per element.
 *
 * Split-KV (flash-decoding).  A call whose kv heads are one part each
 * (decode, a short query against a long cache) has too few parts for a
 * pool; its keys are then cut into chunks of one size, a multiple of the
 * tier's tile, by the shape alone (never by the worker count): every
 * (unit, chunk) is a part whose O rows and lse go to a partial result in
 * the workspace's shared region, and a second phase merges each row's
 * chunks through their log-sum-exp, in chunk order (schedule-merge.c, the
 * code of peak_attention_merge), then the row's sink: the chunks leave
 * each row's ALiBi shift and sink to the merge (attention-logits.h).  So
 * the bytes depend on the shape and the tier only.  The chunks aim at
 * SPLIT_ITEMS parts, no shorter than SPLIT_MIN_TILES tiles and within
 * SPLIT_MAX_BYTES of partials; calls
 * modelled below SPLIT_MIN_NS, calls that would get fewer than
 * SPLIT_MIN_CHUNKS chunks, and tiers that do not allow it (the scalar
 * reference, which rounds once), are not split.
 *
 * The workspace: the shared region (split-KV's partials and their pointer
 * arrays, shape-only), then one slot per worker (the tier's slot_bytes).
 */
#include "schedule.h"

#include "mask.h"

#include <string.h>

/* Parts a split call aims at: greedy scheduling of n equal parts on W
   workers ends within (1 + W / n) of the mean, so 2048 leaves at most ~9%
   idle at 192 workers (1.03 for a decode step of 8 kv heads). */
#define SPLIT_ITEMS 2048

/* Calls modelled below this are not split: a split costs a merge pass,
   and a call this short finds few workers anyway (4x the inline
   threshold, 80 us: a decode step of 8 kv heads up to ~300 keys). */
#define SPLIT_MIN_NS (4.0 * PEAK_INLINE_NS)

/* Tiles per chunk, at least.  A part's fixed cost (Q^T, the finish, its
   first tile's misses, its rows' share of the merge) is ~1 us; at two
   tiles, the smallest part (4 query rows, K/V in L3) measured ~6% of its
   keys' time, and a decode step of 32 heads over 2048 keys (16 chunks)
   2% slower than unsplit on one core, Zen 3. */
#define SPLIT_MIN_TILES 2

/* Chunks a split call has at least: fewer buy less than 8x the parts of
   an unsplit call for the same per-chunk cost, so a call of fewer than 8
   chunks' keys (under 1024 at the minimum length: cross-attention over
   512 keys, a short decode step) is not split (measured: Lq 50, Lk 512,
   8 heads in 4 chunks was 4-8% slower on one core). */
#define SPLIT_MIN_CHUNKS 8

/* The partials of a split call, at most (beyond it fewer chunks): a
   decode step of 32 heads in 256 chunks takes 2.0 MiB. */
#define SPLIT_MAX_BYTES ((size_t)4 << 20)

/* A part's fixed cost (its rows' masks, Q^T's set-up, the finish, its
   first tile's misses: ~1 us measured) and, per row and element of
   Dh + Dv, moving its Q in and its O out (ns). */
#define PART_NS 1000.0
#define ROW_IO_NS 0.5

typedef peak_attention_plan att_plan;

static size_t min_size(size_t a, size_t b)
{
    return a < b ? a : b;
}

static size_t ceil_div(size_t a, size_t b)
{
    return (a + b - 1) / b;
}

/* Item -> part; the unit's chunks follow each other. */
static void plan_part(const att_plan *p, size_t item, peak_attention_part *part)
{
    const peak_attention_desc *d = p->d;
    const size_t c = item % p->chunks, u = item / p->chunks, ub = u % p->units;
    part->b = u / p->units;
    if (p->rows_only) {
        part->kvh = ub * p->bundle;
        part->nkvh = min_size(p->bundle, d->kv_heads - part->kvh);
        part->first = 0;
        part->rows = p->group_rows;
    } else {
        const size_t j = p->reverse ? p->blocks - 1 - ub % p->blocks : ub % p->blocks;
        part->kvh = ub / p->blocks;
        part->nkvh = 1;
        if (p->tail && j == p->blocks - 1) {
            part->first = p->group_rows - p->tail;
            part->rows = p->tail;
        } else {
            part->first = j * p->g.block_rows;
            part->rows = min_size(p->g.block_rows, p->group_rows - p->tail - part->first);
        }
    }
    part->key_lo = c * p->chunk_keys;
    part->key_hi = min_size(d->kv_len, part->key_lo + p->chunk_keys);
    part->next_b = SIZE_MAX;
}

static bool part_on_rows(const att_plan *p, const peak_attention_part *part)
{
    return part->rows < p->g.row_path_rows;
}

/* Keys of [lo, hi) row position i of batch b sees by the key ranges. */
static double keys_seen(const peak_attention_desc *d, size_t b, size_t i, size_t lo, size_t hi)
{
    const peak_key_range r = peak_mask_keys(&d->mask, b, i, d->q_len, d->kv_len);
    const size_t a = r.lo > lo ? r.lo : lo, z = r.hi < hi ? r.hi : hi;
    return a < z ? (double)(z - a) : 0.0;
}

/* The cost model: a part's time on one core (ns).  Its rows' visible keys
   by the trapezoid between its first and last position (exact for causal
   and unmasked, close for windows); the block kernel computes whole
   vectors of rows (2 row_path_rows lanes), the rows kernel its rows; both
   read each visible key's K and V rows once per kv head. */
static double part_cost(const att_plan *p, const peak_attention_part *part)
{
    const peak_attention_desc *d = p->d;
    const double e = (double)(d->head_dim + d->v_head_dim);
    const size_t i0 = part->first / p->group, i1 = (part->first + part->rows - 1) / p->group;
    const double k0 = keys_seen(d, part->b, i0, part->key_lo, part->key_hi),
                 k1 = keys_seen(d, part->b, i1, part->key_lo, part->key_hi);
    const double keys = k0 > k1 ? k0 : k1, mean = (k0 + k1) / 2.0;
    const double kv = (double)part->nkvh * keys * p->g.kv_ns;
    double rows = (double)(part->rows * part->nkvh), ns;
    if (part_on_rows(p, part)) {
        ns = rows * mean * p->g.row_ns;
    } else {
        const size_t lanes = 2 * p->g.row_path_rows;
        ns = (double)(lanes ? ceil_div(part->rows, lanes) * lanes : part->rows) * mean *
             p->g.tile_ns;
    }
    return PART_NS + e * (ns + kv + rows * ROW_IO_NS);
}

static double item_cost(const void *ctx, size_t item)
{
    const att_plan *p = ctx;
    peak_attention_part part;
    plan_part(p, item, &part);
    return part_cost(p, &part);
}

static double plan_total(const att_plan *p)
{
    double t = 0.0;
    for (size_t i = 0; i < p->items; i++)
        t += item_cost(p, i);
    return t;
}

static void item_run(void *ctx, size_t item, void *slot)
{
    const att_plan *p = ctx;
    peak_attention_part part, next;
    plan_part(p, item, &part);
    if (item + 1 < p->items) {
        plan_part(p, item + 1, &next);
        part.next_b = next.b;
        part.next_kvh = next.kvh;
        part.next_first = next.first;
        part.next_key_lo = next.key_lo;
    }
    const peak_attention_block_fn run =
        part_on_rows(p, &part) ? p->kern->attention_rows : p->kern->attention_block;
    if (p->chunks == 1) {
        run(p->o, p->q, p->k, p->v, p->d, &part, slot);
        return;
    }
    /* Chunk c's partial: column c of [.., chunks, Dv] and of [.., chunks]. */
    const size_t c = item % p->chunks;
    peak_attention_desc pd = p->pd;
    pd.lse = p->plse + c;
    run(p->po + c * p->d->v_head_dim, p->q, p->k, p->v, &pd, &part, slot);
}

/* Rows at the end of each kv head's group that the rows kernel takes
   instead of the block kernel, which would compute a whole vector of
   lanes for them: the part of group_rows past whole vectors when it is at
   most row_path_rows / 2.  A row there costs ~3.3 vector lanes (SPR,
   AVX-512, H 8, Lk 512: 8.3 ns a key against 2.5 ns a lane), so up to a
   quarter of a vector is cheaper apart: cross-attention over 50 queries
   ran 48 block rows in 490 us and 2 rows in 68 us, against 600-740 us for
   64 lanes. */
static size_t plan_tail(const att_plan *p)
{
    const size_t lanes = 2 * p->g.row_path_rows;
    const size_t t = lanes ? p->group_rows % lanes : 0;
    return t > 0 && 2 * t <= p->g.row_path_rows && p->group_rows > t ? t : 0;
}

/* The units of a call cut by kv heads and blocks, not yet by keys. */
static void plan_units(att_plan *p, size_t bundle)
{
    const peak_attention_desc *d = p->d;
    p->rows_only = p->group_rows < p->g.row_path_rows;
    p->tail = 0;
    if (p->rows_only) {
        p->bundle = bundle;
        p->blocks = 1;
        p->units = ceil_div(d->kv_heads, bundle);
    } else {
        p->bundle = 1;
        p->tail = plan_tail(p);
        p->blocks = ceil_div(p->group_rows - p->tail, p->g.block_rows) + (p->tail ? 1 : 0);
        p->units = d->kv_heads * p->blocks;
    }
    p->items = d->batch * p->units * p->chunks;
}

/* Heaviest block first: backwards when a kv head's last block sees more
   keys than its first (causal), as modelled for batch 0. */
static void plan_order(att_plan *p)
{
    p->reverse = false;
    if (p->rows_only || p->blocks < 2)
        return;
    peak_attention_part first, last;
    plan_part(p, 0, &first);
    plan_part(p, (p->blocks - 1) * p->chunks, &last);
    p->reverse = part_cost(p, &last) > part_cost(p, &first);
}

/* Keys per chunk for split-KV, or Lk when the call is not split (see the
   head comment).  The units of a split call are its bundles of kv heads
   (the rows kernel: a decode step reads the heads' rows of a key as one
   stream; one kv head a part was 30% slower, measured at 8 heads, Lk 2048)
   or its kv heads (the block kernel). */
static size_t plan_chunk_keys(const att_plan *p, double total_ns)
{
    const peak_attention_desc *d = p->d;
    const size_t lk = d->kv_len, tile = p->g.key_tile ? p->g.key_tile : 1;
    if (!p->g.split_keys || p->blocks > 1 || total_ns < SPLIT_MIN_NS)
        return lk;
    const size_t units = d->batch * p->units;
    const size_t rows = d->batch * d->q_len * d->heads;
    size_t n = ceil_div(SPLIT_ITEMS, units);
    n = min_size(n, lk / (SPLIT_MIN_TILES * tile));
    n = min_size(n, SPLIT_MAX_BYTES / ((d->v_head_dim + 1) * sizeof(float)) / rows);
    if (n < SPLIT_MIN_CHUNKS)
        return lk;
    return ceil_div(ceil_div(lk, n), tile) * tile;
}

/* Bytes of the shared region: split-KV's partial O and lse, 64-byte
   multiples each. */
static size_t plan_shared_bytes(const att_plan *p)
{
    if (p->chunks == 1)
        return 0;
    const peak_attention_desc *d = p->d;
    const size_t rows = d->batch * d->q_len * d->heads * p->chunks;
    return ((rows * d->v_head_dim * sizeof(float) + 63) & ~(size_t)63) +
           ((rows * sizeof(float) + 63) & ~(size_t)63) +
           ((2 * p->chunks * sizeof(float *) + 63) & ~(size_t)63);
}

/* The workspace: the shared region, then a slot per worker; the sentinel
   when that does not fit in a size_t. */
static size_t plan_bytes(const att_plan *p)
{
    const size_t shared = plan_shared_bytes(p), slot = p->g.slot_bytes;
    const size_t n = p->workers, sentinel = SIZE_MAX & ~(size_t)63;
    if (slot == sentinel || slot > (sentinel - shared) / n)
        return sentinel;
    return shared + n * slot;
}

/* The plan of a call: units, split, order, all by the shape.  workers
   only narrows the rows kernel's bundle when the call is not split, which
   never changes a row's bytes (its tiles are aligned to the tile size
   whatever rows walk with it): as many kv heads as the row states take on
   one worker, fewer on a pool so that each worker has a part. */
static void plan_make(att_plan *p, const peak_kernels *kern, const peak_attention_desc *d,
                      size_t workers)
{
    memset(p, 0, sizeof *p);
    p->kern = kern;
    p->d = d;
    p->kern->attention_geometry(d, &p->g);
    p->group = d->heads / d->kv_heads;
    p->group_rows = p->group * d->q_len;
    p->chunks = 1;
    p->chunk_keys = d->kv_len;
    const size_t shape_bundle =
        p->group_rows < p->g.row_path_rows ? p->g.row_states / p->group_rows : 1;
    plan_units(p, shape_bundle);
    p->total_ns = plan_total(p);
    p->chunk_keys = plan_chunk_keys(p, p->total_ns);
    if (p->chunk_keys < d->kv_len) {
        p->chunks = ceil_div(d->kv_len, p->chunk_keys);
        plan_units(p, shape_bundle);
        p->total_ns = plan_total(p);
    } else if (p->rows_only && workers > 1) {
        const size_t per_worker = d->batch * d->kv_heads / workers;
        plan_units(p, min_size(shape_bundle, per_worker ? per_worker : 1));
        p->total_ns = plan_total(p);
    }
    plan_order(p);
    p->workers = workers ? workers : 1;
    p->bytes = plan_bytes(p);
}

/* The partials' descriptor: the call's, with O and lse in the shared
   region ([B, Lq, H, chunks, Dv] and [B, H, Lq, chunks]: a row's chunks
   side by side for the merge). */
static void plan_partials(att_plan *p, void *shared)
{
    const peak_attention_desc *d = p->d;
    const size_t c = p->chunks, dv = d->v_head_dim, rows = d->batch * d->q_len * d->heads * c;
    p->po = shared;
    p->plse = (float *)(void *)((char *)shared + ((rows * dv * sizeof(float) + 63) & ~(size_t)63));
    p->pd = *d;
    const ptrdiff_t ho = (ptrdiff_t)(c * dv);
    p->pd.o_stride[2] = ho;
    p->pd.o_stride[1] = ho * (ptrdiff_t)d->heads;
    p->pd.o_stride[0] = p->pd.o_stride[1] * (ptrdiff_t)d->q_len;
    p->pd.lse_stride[2] = (ptrdiff_t)c;
    p->pd.lse_stride[1] = (ptrdiff_t)(c * d->q_len);
    p->pd.lse_stride[0] = p->pd.lse_stride[1] * (ptrdiff_t)d->heads;
}

/* The second phase: each row's chunks merged in chunk order. */
static void plan_merge(const att_plan *p, const peak_threadpool *pool)
{
    const peak_attention_desc *d = p->d;
    const size_t c = p->chunks, rows = d->batch * d->q_len * d->heads * c;
    const float **parts = (const float **)(void *)((char *)p->plse +
                                                   ((rows * sizeof(float) + 63) & ~(size_t)63));
    for (size_t i = 0; i < c; i++) {
        parts[i] = p->po + i * d->v_head_dim;
        parts[c + i] = p->plse + i;
    }
    peak_attention_merge_desc md = PEAK_ATTENTION_MERGE_DESC_DEFAULT;
    md.batch = d->batch;
    md.heads = d->heads;
    md.q_len = d->q_len;
    md.v_head_dim = d->v_head_dim;
    memcpy(md.o_stride, d->o_stride, sizeof md.o_stride);
    memcpy(md.lse_stride, d->lse_stride, sizeof md.lse_stride);
    memcpy(md.part_o_stride, p->pd.o_stride, sizeof md.part_o_stride);
    memcpy(md.part_lse_stride, p->pd.lse_stride, sizeof md.part_lse_stride);
    peak_schedule_attention_merge_split(p->o, d->lse, parts, parts + c, c, &md, d, pool);
}

void peak_schedule_attention_plan(peak_attention_plan *plan, const peak_kernels *kern,
                                  const peak_attention_desc *d, size_t workers)
{
    plan_make(plan, kern, d, workers);
}

void peak_schedule_attention_run(peak_attention_plan *plan, float *o, const float *q,
                                 const void *k, const void *v, void *workspace,
                                 const peak_threadpool *pool)
{
    att_plan *p = plan;
    p->o = o;
    p->q = q;
    p->k = k;
    p->v = v;
    const size_t shared = plan_shared_bytes(p);
    if (p->chunks > 1)
        plan_partials(p, workspace);
    char *slots = (char *)workspace + shared;
    /* Empty tile caches: nothing of an earlier call is taken. */
    for (size_t s = 0; s < p->workers; s++)
        memset(slots + s * p->g.slot_bytes, 0, PEAK_ATTENTION_SLOT_HEAD);
    peak_work w = {0};
    w.items = p->items;
    w.run = item_run;
    w.cost = item_cost;
    w.ctx = p;
    w.total_ns = p->total_ns;
    w.scratch = slots;
    w.slot_bytes = p->g.slot_bytes;
    w.slots = p->workers;
    peak_work_run(&w, pool);
    if (p->chunks > 1)
        plan_merge(p, pool);
}

size_t peak_schedule_attention_workspace(const peak_kernels *kern, const peak_attention_desc *d,
                                         size_t workers)
{
    att_plan p;
    plan_make(&p, kern, d, workers);
    return p.bytes;
}

void peak_schedule_attention(const peak_kernels *kern, float *o, const float *q, const void *k,
                             const void *v, const peak_attention_desc *d, void *workspace,
                             size_t workers, const peak_threadpool *pool)
{
    att_plan p;
    plan_make(&p, kern, d, workers);
    peak_schedule_attention_run(&p, o, q, k, v, workspace, pool);
}
