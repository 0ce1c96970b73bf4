/*
 * attention.h - the tile driver shared by the AVX2, AVX-512 and NEON
 * attention kernels (peak_attention in peak.h).  Everything here is plain
 * C: the masks, Q packing, the rare exact paths, the final division and a
 * worker's scratch.  The including file supplies the vector micro-kernels
 * and the tile sizes, then includes this header; attention-body.h defines
 * the tier's three kernels from it: its geometry (sizes and cost model),
 * the block kernel (attention_block_run) and the rows kernel
 * (attention_rows_run).
 *
 *   PEAK_ATTENTION_VW  lanes per vector;   PEAK_ATTENTION_BQ  query rows per block (a multiple
 *   of PEAK_ATTENTION_VW, at most 64);     PEAK_ATTENTION_BC  keys per tile;
 *   isa_scores(), isa_online_softmax(), isa_pv(), isa_pack_rows() and the
 *   row path's isa_dot(), isa_row_exp(), isa_row_pv() (their contracts
 *   are stated in attention-isa.h); optionally PEAK_ATTENTION_T8X8_IN and
 *   PEAK_ATTENTION_T8X8_OUT, 8 x 8 transposes for the block start and finish.
 *   The vector tiers write the register tiles (isa_scores, isa_pv,
 *   isa_row_pv) per ISA and take the rest, written once over the vector
 *   vocabulary, from attention-body.h, included after this header.
 *
 * Design.  The kernels compute parts of a call, never the whole: the
 * ISA-free scheduler (schedule/schedule-attention.c) cuts a call into
 * parts -- a block of rows of one (batch, kv head), or the row path's rows
 * of a few kv heads, against all keys or, for decode and other calls of
 * few rows, against one chunk of them (split-KV, merged through the lse)
 * -- and runs them on the caller's pool, each with the scratch slot of the
 * worker that runs it.  A part's result depends on the part alone, so the
 * bytes are the same at any thread count.
 *
 * Flash-style: per kv head, blocks of PEAK_ATTENTION_BQ query rows -- the
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
 * strides), and a kv head's whole tiles are kept in the worker's slot for
 * the next blocks it runs of that kv head (the tile cache, up to
 * PEAK_ATTENTION_CACHE_BYTES, tagged with its (batch, kv head)).  Decode --
 * a kv head with fewer than PEAK_ATTENTION_VW / 2 rows -- takes the row
 * path instead, vectorised along head_dim, several kv heads' rows walking
 * the keys in step.
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
 * Logit options (peak_logits; attention-logits.h).  Soft-capping and
 * ALiBi shape the scores in one pass over the tile in L1 after isa_scores
 * (isa_logits), before B^T's masks and bias: a whole tile stays whole.
 * ALiBi's distances are taken from a key of the row's range (its frame),
 * the rest of the term is the row's shift, added at the finish with the
 * sink (attention_logits_finish).  The row path puts ALiBi in its bias
 * array and caps after the dots.  A split-KV chunk leaves the shift and the
 * sink to the merge.
 *
 * Special rows need no branch in the vector code: with m_safe = 0 when
 * m = -inf, a row that has seen no visible score keeps p = 0 and l = 0
 * (zeros, lse -inf), and a visible +inf or NaN score makes l NaN, which
 * stays NaN (O and lse NaN), as the scalar reference specifies.
 *
 * The pieces, in the order they are included (each one's head comment
 * says what it holds and what it needs from the ones before it):
 *   attention-logits.h     a row's logit options, ISA-free (also the
 *                          merge's): the ALiBi frame, the finish;
 *   attention-workspace.h  a worker's scratch: regions, sizes, carving,
 *                          the tile cache's tag;
 *   attention-isa.h        the tier's micro-kernels and their contracts;
 *   attention-block.h      a block of query rows, its set-up, row addresses;
 *   attention-mask.h       a tile through the masks: B^T, dead keys;
 *   attention-tile.h       one tile: packing (the tile cache), products;
 *   attention-decode.h     the row path (decode): the rows kernel;
 *   attention-loop.h       attention_block_run, the block kernel: the loop
 *                          over tiles, folding, prefetching, the finish.
 */
#ifndef PEAK_ATTENTION_H
#define PEAK_ATTENTION_H

#include "attention-logits.h"
#include "convert.h"
#include "internal.h"
#include "mask.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#define PEAK_ATTENTION_NRV (PEAK_ATTENTION_BQ / PEAK_ATTENTION_VW) /* row vectors per block */

#include "attention-workspace.h"
#include "attention-isa.h"
#include "attention-block.h"
#include "attention-mask.h"
#include "attention-tile.h"
#include "attention-decode.h"
#include "attention-loop.h"

#endif /* PEAK_ATTENTION_H */
