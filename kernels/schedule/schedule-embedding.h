/*
 * schedule-embedding.h - how one peak_embed_pe call becomes kernel calls
 * (schedule-embedding.c), and the position numbering that both the
 * schedule and api.c's validation walk.
 */
#ifndef PEAK_DISPATCH_SCHEDULE_EMBEDDING_H
#define PEAK_DISPATCH_SCHEDULE_EMBEDDING_H

#include "internal.h"

#include <stddef.h>
#include <stdint.h>

/* Walks tokens in order and yields each one's position: explicit, pos0 plus
   the index within its sequence, or fairseq's numbering (make_positions:
   pad tokens get none, the others padding_idx + 1 + earlier non-pads).
   Static inline: api.c's check and the scheduler each call it once per
   token, inside their loops. */
typedef struct pos_walk {
    const peak_embed_desc *d;
    const int32_t *ids;
    size_t t, in_seq, non_pad;
} pos_walk;

static inline int64_t pos_next(pos_walk *w)
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

/* The walk from token t0 on; non_pad: with fairseq numbering, the non-pad
   tokens of t0's sequence before t0 (a scheduler's item starts there). */
static inline pos_walk pos_walk_at(const peak_embed_desc *d, const int32_t *ids, size_t t0,
                                   size_t non_pad)
{
    const size_t in_seq = d->seq_len ? t0 % d->seq_len : t0;
    pos_walk w = {d, ids, t0, in_seq, in_seq ? non_pad : 0};
    return w;
}

/* The widest d_model of a call with a 16-bit table or output: its rows
   may go through float32 rows on the stack (32 KiB, beside the kernel's
   own 32 KiB block: inside peak.h's 80 KiB). */
#define PEAK_EMBED_MAX_TYPED ((size_t)8192)

/* Runs a peak_embed_pe call that api.c has validated on the active kernel
   row: resolves the positions and cuts the tokens into work items of
   kernel calls. */
PEAK_INTERNAL void peak_schedule_embed_pe(void *out, ptrdiff_t ld_out, const int32_t *ids,
                                          size_t n_tokens, const peak_embed_desc *desc,
                                          const peak_threadpool *pool);

#endif /* PEAK_DISPATCH_SCHEDULE_EMBEDDING_H */
