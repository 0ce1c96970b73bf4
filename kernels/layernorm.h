/*
 * layernorm.h - what the SIMD tiers of peak_add_layernorm share outside
 * the vector code: the constants, the row operands, the statistics and
 * the rows left to the reference.  The vector code, the passes over a row
 * and the row loop are written once in layernorm-body.h.
 *
 * Numerics.  s = x + r is rounded to float, as in the scalar reference (the
 * value `sum` receives).  The statistics are shifted sums, the shift a float
 * near the mean so that the common offset of a row (1e4 + noise) cancels
 * exactly before anything is squared:
 *   guess:  m0 = mean of the row's first 16 values, in float
 *   pass 1: d = s - m0 in float (exact whenever s is within a factor 2 of
 *           m0, the case of a large common offset), D1 = sum d,
 *           D2 = sum d^2, float accumulators widened into double every
 *           block of a few terms a lane
 *   c = D1/n, var = D2/n - c^2   (biased, as torch)
 *   pass 2: y = ((s - m0) - c) * rstd, then * gamma + beta (one FMA)
 * The cancellation in var costs a factor D2/n / var = 1 + c^2/var of the
 * relative accuracy of D2; when c^2 > var (m0 more than a standard deviation
 * from the mean: about 1 row in 10^4 of iid data, since m0 averages 16
 * values, or a row whose first values are atypical) pass 1 runs again about
 * m1 = (float)(m0 + c), which then is within a small fraction of a standard
 * deviation of the mean.  So var loses at most a factor 2, and D2 itself is
 * good to a few float roundings (a few terms a lane per block), leaving
 * rstd within a few 1e-7.  Pass 2 is four float roundings of values of size
 * |y|: a few 1e-7 relative, inside the 2e-6 that peak.h promises.
 *
 * Why one statistics pass: a row is read from memory once (pass 1) and then
 * from L1; the compute of the passes is time the core issues no new memory
 * traffic, so it must be small beside the row's memory time (~6 KiB a
 * 512-float row) for the kernel to run at memory speed.  The earlier three
 * passes (a double-precision sum for the shift, then D1/D2, then y) spent
 * about half the memory time on arithmetic.
 *
 * Pipelining: pass 2 of row t runs in the same loop as pass 1 of row t+1
 * (layernorm_fused in layernorm-body.h), so that every iteration both
 * reads new memory (row t+1) and writes (row t), as a copy loop does.  Run one after the
 * other, the passes alternate between a burst of reads with the write port
 * idle and a burst of stores with no new reads: 0.6-0.7x memcpy's
 * bandwidth out of cache, against 0.9-1.0x pipelined (doc/perf-notes.md).
 * Row t+1's statistics do not depend on whether its pass 1 ran fused: the
 * accumulation order is the same.  So a row's bits do not depend on where
 * the scheduler (schedule/schedule-layernorm.c) cuts a call into items of
 * rows, though an item's first row runs pass 1 alone and its last row
 * pass 2 alone: that costs the pipelining of one row an item.
 *
 * Prefetch: the fused loop prefetches x and r of row t+1+PEAK_LAYERNORM_PREFETCH_ROWS,
 * a line per 16 floats of each, spreading the requests over the loop (a
 * burst of a row's prefetches at once stalls on the line fill buffers):
 * 0.7-0.9x of memcpy without it, 0.9-1.0x with it (doc/perf-notes.md).
 * It runs on past an item's last row into the call's next rows
 * (rows_after): 1024 x 768 in items of 32 rows took 295 us with the
 * prefetch stopping at each item's end, 281 us with it running on (277
 * as one kernel call).
 */
#ifndef PEAK_LAYERNORM_H
#define PEAK_LAYERNORM_H

#include "common/layernorm-ref.h"
#include "internal.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* Rows ahead whose operands are prefetched. */
#define PEAK_LAYERNORM_PREFETCH_ROWS 2
/* Calls whose output reaches this many bytes are written with non-temporal
   stores (pass 2, y and sum, rows that start on a vector boundary; the
   scheduler decides for the whole call, peak_layernorm_streams): without them
   every line of y is first read for ownership, a fourth memory stream
   beside x, r and the write-back.  Measured: ~10% faster at 65536 x 512
   (128 MiB), but ~30% slower at 4096 x 512 (8 MiB), where y stays in the
   last-level cache between repetitions; so only outputs well beyond a
   cache stream. */
#define PEAK_LAYERNORM_STREAM_BYTES ((size_t)32 << 20)
/* Floats between two prefetches of a row: a 64-byte line. */
#define PEAK_LAYERNORM_PREFETCH_FLOATS 16
/* Values the shift guess averages (up to), as many as one AVX-512 vector. */
#define PEAK_LAYERNORM_GUESS_FLOATS 16
/* Pass 1 sums in this many independent float chains a sum, a vector each
   a step: each add/FMA waits on its own result only every fourth vector,
   so latency is not the limit. */
#define PEAK_LAYERNORM_CHAINS 4
/* Steps a block before the chains are widened into double: each lane of
   each chain sees 4 terms, which keeps D2 good to a few float roundings. */
#define PEAK_LAYERNORM_BLOCK_STEPS 4

/* Requests the line at p + j (p may be NULL: no request).  GCC 12 drops
   _mm_prefetch() as dead code once layernorm_dev_rows() is inlined into
   its callers (no prefetch instruction was left in the fused kernels),
   but keeps __builtin_prefetch(). */
static inline void peak_layernorm_prefetch(const void *p, size_t j, peak_dtype t)
{
    if (p)
        __builtin_prefetch((const char *)p + j * peak_dtype_bytes(t), 0, 3);
}

/* What pass 2 needs: the shift, the correction D1/n and rstd. */
typedef struct peak_layernorm_stats {
    float shift, corr, rstd;
    bool reference; /* the row is left to the scalar reference (see peak_layernorm_stats_of) */
} peak_layernorm_stats;

/* Whether the shift is too far from the mean for D2/n - c^2 (see the top):
   c^2 > var, i.e. 2 c^2 > D2/n.  False for NaN, which needs no second
   look. */
static inline bool peak_layernorm_reshift(double d1, double d2, size_t n)
{
    const double c = d1 / (double)n;
    return 2.0 * c * c > d2 / (double)n;
}

/* The shift moved by the mean deviation D1/n found about it. */
static inline float peak_layernorm_moved_shift(float shift, double d1, size_t n)
{
    return (float)((double)shift + d1 / (double)n);
}

static inline peak_layernorm_stats peak_layernorm_finish(float shift, double d1, double d2,
                                                         size_t n, float eps)
{
    const double c = d1 / (double)n;
    double var = d2 / (double)n - c * c;
    if (var < 0.0) /* rounding, for a (near) constant row */
        var = 0.0;
    peak_layernorm_stats st = {shift, (float)c, (float)(1.0 / sqrt(var + (double)eps)), false};
    return st;
}

/* Whether a call of rows x d_model streams (asked by the scheduler, for the
   whole call). */
static inline bool peak_layernorm_streams(size_t rows, size_t d_model)
{
    return rows * d_model * sizeof(float) >= PEAK_LAYERNORM_STREAM_BYTES;
}

/* The operands of row t. */
/* The longest row a call with a 16-bit tensor takes: its rows go through
   a float32 buffer on the stack (64 KiB, within peak.h's 80 KiB). */
#define PEAK_LAYERNORM_MAX_STAGED ((size_t)16384)

typedef struct peak_layernorm_args {
    void *y;
    ptrdiff_t ld_y;
    void *sum;
    ptrdiff_t ld_sum;
    const void *x;
    ptrdiff_t ld_x;
    const void *r;
    ptrdiff_t ld_r;
    const float *gamma, *beta;
    size_t rows, d_model;
    size_t rows_after; /* of the call, after these: prefetched, not computed */
    peak_dtype t;      /* of y, sum, x and r */
} peak_layernorm_args;

/* Row `row` of p (rows ld elements of type t apart); NULL for NULL. */
static inline const void *peak_layernorm_row_of(const void *p, ptrdiff_t ld, size_t row,
                                                peak_dtype t)
{
    return p ? (const char *)p + (ptrdiff_t)row * ld * (ptrdiff_t)peak_dtype_bytes(t) : NULL;
}

static inline peak_layernorm_row peak_layernorm_row_at(const peak_layernorm_args *a, size_t t)
{
    const bool ahead = t + PEAK_LAYERNORM_PREFETCH_ROWS < a->rows + a->rows_after;
    const size_t ta = t + PEAK_LAYERNORM_PREFETCH_ROWS;
    peak_layernorm_row w = {(void *)(uintptr_t)peak_layernorm_row_of(a->y, a->ld_y, t, a->t),
                            (void *)(uintptr_t)peak_layernorm_row_of(a->sum, a->ld_sum, t, a->t),
                            peak_layernorm_row_of(a->x, a->ld_x, t, a->t),
                            peak_layernorm_row_of(a->r, a->ld_r, t, a->t),
                            a->gamma,
                            a->beta,
                            a->d_model,
                            ahead ? peak_layernorm_row_of(a->x, a->ld_x, ta, a->t) : NULL,
                            ahead ? peak_layernorm_row_of(a->r, a->ld_r, ta, a->t) : NULL,
                            a->t,
                            NULL};
    return w;
}

/* Pass 2's statistics of w from D1 and D2 about `shift` (those of its
   last pass 1), or the flag that leaves w to the reference. */
static inline peak_layernorm_stats peak_layernorm_stats_of(const peak_layernorm_row *w, float shift,
                                                           double d1, double d2, float eps)
{
    peak_layernorm_stats st = peak_layernorm_finish(shift, d1, d2, w->n, eps);
    /* The float squares d^2 overflowed (|s - shift| beyond about 1.8e19)
       or may have been subnormal (D2/n below 2^-100: a near-constant row of
       tiny deviations, where they lose precision, or are flushed to 0 under
       FTZ and rstd becomes inf when eps is 0), or the row holds inf or NaN:
       the scalar reference, which works in double, computes the row, so
       every tier gives its answer.  Found by tests/fuzz: AVX2 returned NaN
       for a row of values near -3e38, and inf (under FTZ, eps 0) for one of
       values near -1e-20, whose LayerNorms are finite.  Costs a compare a
       row; constant rows take the scalar path. */
    st.reference = !(d2 >= (double)w->n * 0x1p-100 && d2 <= DBL_MAX);
    return st;
}

/* A 16-bit row by the plain-C reference: s = x + r widened into the float
   row s (n floats), normalised in place, y and sum rounded from it. */
static inline void peak_layernorm_reference_16_in(const peak_layernorm_row *w, float eps, float *s)
{
    for (size_t j = 0; j < w->n; j++)
        s[j] = peak_layernorm_input(w, j);
    if (w->sum)
        for (size_t j = 0; j < w->n; j++)
            peak_convert_store(w->sum, w->t, j, peak_f32_to_bits(s[j]));
    peak_layernorm_rows_ref(s, 0, NULL, 0, s, 0, NULL, 0, w->gamma, w->beta, 1, w->n, eps);
    for (size_t j = 0; j < w->n; j++)
        peak_convert_store(w->y, w->t, j, peak_f32_to_bits(s[j]));
}

/* The same through a row on the stack (d_model <= PEAK_LAYERNORM_MAX_STAGED).
   Not inline: its 64 KiB frame only while it runs (rare rows:
   peak_layernorm_stats_of). */
static __attribute__((noinline, unused)) void
peak_layernorm_reference_16(const peak_layernorm_row *w, float eps)
{
    float s[PEAK_LAYERNORM_MAX_STAGED];
    assert(w->n <= PEAK_LAYERNORM_MAX_STAGED);
    peak_layernorm_reference_16_in(w, eps, s);
}

/* Row t by the plain-C reference (rows peak_layernorm_stats_of leaves to it). */
static inline void peak_layernorm_reference(const peak_layernorm_args *a,
                                            const peak_layernorm_row *w, float eps)
{
    if (w->t != PEAK_F32) {
        if (w->s) /* the row pass 1 kept: as long as the row */
            peak_layernorm_reference_16_in(w, eps, w->s);
        else
            peak_layernorm_reference_16(w, eps);
        return;
    }
    peak_layernorm_rows_ref((float *)w->y, a->ld_y, (float *)w->sum, a->ld_sum,
                            (const float *)w->x, a->ld_x, (const float *)w->r, a->ld_r, a->gamma,
                            a->beta, 1, a->d_model, eps);
}

#endif /* PEAK_LAYERNORM_H */
