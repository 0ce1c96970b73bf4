/*
 * baseline-plain-loops.h - the "plain C loop" baselines of the embedding
 * and LayerNorm benchmarks, each built twice from one text
 * (baseline-plain-loops.c): *_vec with the project's flags, under which GCC
 * 12 auto-vectorises parts of them (SSE2 at -O2/-O3 without -march), and
 * *_novec with -fno-tree-vectorize, the straightforward scalar loop.  Both
 * are reported: a speed-up over *_vec is what hand vectorisation adds to
 * the compiler's, over *_novec what it adds to scalar code.
 */
#ifndef PEAK_BASELINE_PLAIN_LOOPS_H
#define PEAK_BASELINE_PLAIN_LOOPS_H

#include <stddef.h>
#include <stdint.h>

#define PEAK_PLAIN_LOOPS(sfx)                                                                 \
    /* y = LayerNorm(x + r) * gamma + beta, rows of d contiguous floats,                   \
       the textbook two passes with double accumulators. */                                \
    void bench_layernorm_plain_loop##sfx(float *y, const float *x, const float *r,                 \
                                  const float *gamma, const float *beta, size_t rows,       \
                                  size_t d, float eps);                                     \
    /* out[t] = E[ids[t]] * scale + pe[t % seq], rows of d contiguous floats. */           \
    void bench_embedding_plain_loop##sfx(float *out, const float *table, const int32_t *ids,      \
                                   const float *pe, size_t batch, size_t seq, size_t d,     \
                                   float scale);

PEAK_PLAIN_LOOPS(_vec)
PEAK_PLAIN_LOOPS(_novec)

#endif
