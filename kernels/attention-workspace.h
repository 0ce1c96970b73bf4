/*
 * attention-workspace.h - a worker's scratch (part of attention.h; include
 * that, not this).  The scheduler (schedule/schedule-attention.c) gives
 * every worker a slot of its own; this file holds attention_ws, the regions
 * carved from a slot after its head (peak_attention_slot, internal.h),
 * their sizes (attention_ws_floats, attention_slot_bytes: the per-worker
 * part of peak_attention_workspace_size) and attention_ws_carve, plus how
 * many of a kv head's tiles the slot's tile cache keeps
 * (attention_cache_tiles) and attention_cache_claim, which empties the
 * cache when a part of another (batch, kv head) arrives.  Expects
 * PEAK_ATTENTION_BQ and PEAK_ATTENTION_BC from the including tier file.
 */
#ifndef PEAK_ATTENTION_WORKSPACE_H
#define PEAK_ATTENTION_WORKSPACE_H
#ifndef PEAK_ATTENTION_H
#error "include attention.h, which includes this after its prerequisites"
#endif

/* Scratch, carved from a worker's 64-byte aligned slot. */
typedef struct attention_ws {
    peak_attention_slot *slot; /* the head: whose tiles the cache holds */
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
    const float **kp, **vp; /* key rows of the tile [BC], packed */
    /* The same rows where K and V hold them (d->k_type, d->v_type), before
       packing: the tile path packs from these, the row path reads them. */
    const void **kraw, **vraw;
    /* The kv head's packed tiles, shared by its query blocks: tile t holds
       keys t*BC .. t*BC + cache_n[t] - 1. */
    float *kcache, *vcache; /* [cache_tiles * BC][round16(head_dim or v_head_dim)] */
    uint32_t *cache_n;      /* [cache_tiles] */
    size_t cache_tiles;
} attention_ws;

/* Bytes of packed K and V a worker keeps for its kv head, at most: the
   tiles of 4096 keys of Dh = Dv = 64, a core's L2 on current servers.
   Beyond it a block packs its tiles itself, as without the cache. */
#define PEAK_ATTENTION_CACHE_BYTES ((size_t)2 << 20)

_Static_assert(sizeof(peak_attention_slot) <= PEAK_ATTENTION_SLOT_HEAD &&
                   PEAK_ATTENTION_SLOT_HEAD % 64 == 0,
               "the slot head keeps the regions after it 64-byte aligned");

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
    const size_t ptrs = attention_round16(4 * PEAK_ATTENTION_BC * sizeof(float *) / sizeof(float));
    const size_t tile =
        PEAK_ATTENTION_BC * (attention_round16(d->v_head_dim) + attention_round16(d->head_dim));
    const size_t ct = attention_cache_tiles(d);
    return attention_round16(d->head_dim * PEAK_ATTENTION_BQ) +
           2 * PEAK_ATTENTION_BC * PEAK_ATTENTION_BQ +
           2 * attention_round16(d->v_head_dim * PEAK_ATTENTION_BQ) + 5 * PEAK_ATTENTION_BQ +
           attention_round16(dmax) + ptrs + tile + ct * tile + attention_round16(ct);
}

/* A worker's slot: its head, O(BQ * (head_dim + v_head_dim + 2 BC))
   floats for the tiles, plus at most PEAK_ATTENTION_CACHE_BYTES of packed
   K and V; independent of Lq beyond that.  A 64-byte multiple, so that
   the slots that follow one another stay aligned. */
static inline size_t attention_slot_bytes(const peak_attention_desc *d)
{
    const size_t n = attention_ws_floats(d);
    if (n == 0 || n > (SIZE_MAX - PEAK_ATTENTION_SLOT_HEAD - 63) / sizeof(float))
        return SIZE_MAX & ~(size_t)63;
    return (PEAK_ATTENTION_SLOT_HEAD + n * sizeof(float) + 63) & ~(size_t)63;
}

static inline attention_ws attention_ws_carve(void *slot, const peak_attention_desc *d)
{
    float *p = (float *)(void *)((char *)slot + PEAK_ATTENTION_SLOT_HEAD);
    attention_ws w;
    w.slot = (peak_attention_slot *)slot;
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
    w.kraw = (const void **)(void *)(w.vp + PEAK_ATTENTION_BC);
    w.vraw = w.kraw + PEAK_ATTENTION_BC;
    p += attention_round16(4 * PEAK_ATTENTION_BC * sizeof(float *) / sizeof(float));
    w.cache_tiles = attention_cache_tiles(d);
    w.kcache = p;
    p += w.cache_tiles * PEAK_ATTENTION_BC * attention_round16(d->head_dim);
    w.vcache = p;
    p += w.cache_tiles * PEAK_ATTENTION_BC * attention_round16(d->v_head_dim);
    w.cache_n = (uint32_t *)(void *)p;
    return w;
}

/* Makes the slot's tile cache that of (b, kvh): kept if it is already,
   else emptied.  The scheduler orders a kv head's parts together, so a
   worker's next part is mostly of the kv head it has packed. */
static inline void attention_cache_claim(const attention_ws *w, size_t b, size_t kvh)
{
    peak_attention_slot *s = w->slot;
    if (s->valid && s->b == b && s->kvh == kvh)
        return;
    memset(w->cache_n, 0, w->cache_tiles * sizeof *w->cache_n);
    s->valid = 1;
    s->b = b;
    s->kvh = kvh;
}

#endif /* PEAK_ATTENTION_WORKSPACE_H */
