/*
 * layernorm-rows.h - what the SIMD tiers of peak_add_layernorm share: the
 * row loop and the statistics, written once.  A tier supplies the three
 * passes over a row (its vector width, masks and accumulators).
 *
 * Numerics.  s = x + r is rounded to float, as in the scalar reference (the
 * value `sum` receives).  The statistics are the corrected two-pass
 * algorithm, shifted by a float close to the mean:
 *   pass 1: m1 = (float)(sum of s, accumulated in double / n)
 *   pass 2: d = s - m1 in float (exact whenever s is within a factor 2 of
 *           m1, the case of a large common offset), D1 = sum d, D2 = sum d^2,
 *           float accumulators flushed into double every
 *           PEAK_LN_FLUSH_FLOATS elements
 *   mean = m1 + D1/n,  var = D2/n - (D1/n)^2   (biased, as torch)
 *   pass 3: y = ((s - m1) - D1/n) * rstd, then * gamma + beta (one FMA)
 * The double pass-1 sum puts m1 within half a float ULP of the mean, so D1
 * is small and the subtraction in var cancels nothing of note; a float sum
 * of a row of 1e6 + noise would miss the mean by more than the noise.  The
 * float accumulators of pass 2 see at most a few terms a lane before a
 * flush, so D2 is good to a few float roundings.  Pass 3 is four float
 * roundings of values of size |y|: a few 1e-7 relative, inside the 2e-6 the
 * issue allows, for a quarter of the double work of a double pass 3.
 *
 * Memory: the row is read from memory once (pass 1) and from L1 twice (a
 * 768-float row of x and r is 6 KiB).  Passes 2 and 3 run from L1 with the
 * memory bus idle, so they prefetch x and r of the row two ahead, a line
 * per loop iteration (measured: without it ~0.6x of memcpy out of cache; a
 * burst of all of a row's prefetches at once stalls on the line fill
 * buffers).
 */
#ifndef PEAK_LAYERNORM_ROWS_H
#define PEAK_LAYERNORM_ROWS_H

#include "internal.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* Floats per pass-2 flush of the float accumulators into double. */
#define PEAK_LN_FLUSH_FLOATS 256
/* Rows ahead whose operands are prefetched. */
#define PEAK_LN_PREFETCH_ROWS 2
/* Outputs of at least this many bytes are written with non-temporal stores
   (pass 3, y and sum): without them every line of y is first read for
   ownership, a fourth memory stream beside x, r and the write-back.
   Measured: ~10% faster at 65536 x 512 (128 MiB), but ~30% slower at
   4096 x 512 (8 MiB), where y stays in the last-level cache between
   repetitions; so only outputs well beyond a cache stream. */
#define PEAK_LN_STREAM_BYTES ((size_t)32 << 20)

/* One row's operands: r, gamma, beta and sum may be NULL.  pf_x and pf_r
   are a later row's x and r (or NULL) for passes 2 and 3 to prefetch. */
typedef struct peak_ln_row {
    float *y;
    float *sum;
    const float *x;
    const float *r;
    const float *gamma;
    const float *beta;
    size_t n;
    const float *pf_x;
    const float *pf_r;
} peak_ln_row;

/* What pass 3 needs: the shift m1, the correction D1/n and rstd. */
typedef struct peak_ln_stats {
    float shift, corr, rstd;
} peak_ln_stats;

/* Pass 1: sum of s in double. */
typedef double (*peak_ln_sum_fn)(const peak_ln_row *w);
/* Pass 2: D1 and D2 about `shift`, in double. */
typedef void (*peak_ln_dev_fn)(const peak_ln_row *w, float shift, double *d1, double *d2);
/* Pass 3: y (and sum) from the statistics; stream: non-temporal stores
   where aligned vectors allow (the tier fences after the call). */
typedef void (*peak_ln_norm_fn)(const peak_ln_row *w, peak_ln_stats st, bool stream);

static inline peak_ln_stats peak_ln_finish(float shift, double d1, double d2, size_t n,
                                           float eps)
{
    const double c = d1 / (double)n;
    double var = d2 / (double)n - c * c;
    if (var < 0.0) /* rounding, for a (near) constant row */
        var = 0.0;
    peak_ln_stats st = {shift, (float)c, (float)(1.0 / sqrt(var + (double)eps))};
    return st;
}

static inline bool peak_ln_streams(size_t rows, size_t d_model)
{
    return rows * d_model * sizeof(float) >= PEAK_LN_STREAM_BYTES;
}

static inline __attribute__((always_inline)) void
peak_ln_run(float *y, ptrdiff_t ld_y, float *sum, ptrdiff_t ld_sum, const float *x,
            ptrdiff_t ld_x, const float *r, ptrdiff_t ld_r, const float *gamma,
            const float *beta, size_t rows, size_t d_model, float eps, peak_ln_sum_fn pass_sum,
            peak_ln_dev_fn pass_dev, peak_ln_norm_fn pass_norm)
{
    assert(y && x && d_model > 0 && eps >= 0.0f);
    const bool stream = peak_ln_streams(rows, d_model);
    peak_ln_row w = {y, sum, x, r, gamma, beta, d_model, NULL, NULL};
    for (size_t t = 0; t < rows; t++) {
        const ptrdiff_t pt = (ptrdiff_t)t;
        w.y = y + pt * ld_y;
        w.x = x + pt * ld_x;
        w.r = r ? r + pt * ld_r : NULL;
        w.sum = sum ? sum + pt * ld_sum : NULL;
        const bool ahead = t + PEAK_LN_PREFETCH_ROWS < rows;
        const ptrdiff_t pa = pt + PEAK_LN_PREFETCH_ROWS;
        w.pf_x = ahead ? x + pa * ld_x : NULL;
        w.pf_r = ahead && r ? r + pa * ld_r : NULL;
        const float shift = (float)(pass_sum(&w) / (double)d_model);
        double d1, d2;
        pass_dev(&w, shift, &d1, &d2);
        pass_norm(&w, peak_ln_finish(shift, d1, d2, d_model, eps), stream);
    }
}

#endif /* PEAK_LAYERNORM_ROWS_H */
