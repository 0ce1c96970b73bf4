/*
 * layernorm-rows.h - what the SIMD tiers of peak_add_layernorm share: the
 * row loop and the statistics, written once.  A tier supplies the passes
 * over a row (its vector width, masks and accumulators).
 *
 * Numerics.  s = x + r is rounded to float, as in the scalar reference (the
 * value `sum` receives).  The statistics are shifted sums, the shift a float
 * near the mean so that the common offset of a row (1e4 + noise) cancels
 * exactly before anything is squared:
 *   guess:  m0 = mean of the row's first vector (or two), in float
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
 * |y|: a few 1e-7 relative, inside the 2e-6 the issue allows.
 *
 * Why one statistics pass: a row is read from memory once (pass 1) and then
 * from L1; the compute of the passes is time the core issues no new memory
 * traffic, so it must be small beside the row's memory time (~6 KiB a
 * 512-float row) for the kernel to run at memory speed.  The earlier three
 * passes (a double-precision sum for the shift, then D1/D2, then y) spent
 * about half the memory time on arithmetic.
 *
 * Prefetch: passes 1 and 2 run mostly from L1 with the memory bus idle, so
 * they prefetch x (pass 1) and r (pass 2) of the row two ahead, a line per
 * vector (measured with the three-pass kernel: without it ~0.6x of memcpy
 * out of cache; a burst of all of a row's prefetches at once stalls on the
 * line fill buffers).  With the two passes, 1, 2 or 4 rows ahead and no
 * prefetch at all measured alike within this machine's noise (+-10%), so
 * the tested distance of 2 stays.
 */
#ifndef PEAK_LAYERNORM_ROWS_H
#define PEAK_LAYERNORM_ROWS_H

#include "internal.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* Rows ahead whose operands are prefetched. */
#define PEAK_LN_PREFETCH_ROWS 2
/* Outputs of at least this many bytes are written with non-temporal stores
   (pass 2, y and sum): without them every line of y is first read for
   ownership, a fourth memory stream beside x, r and the write-back.
   Measured: ~10% faster at 65536 x 512 (128 MiB), but ~30% slower at
   4096 x 512 (8 MiB), where y stays in the last-level cache between
   repetitions; so only outputs well beyond a cache stream. */
#define PEAK_LN_STREAM_BYTES ((size_t)32 << 20)

/* One row's operands: r, gamma, beta and sum may be NULL.  pf_x and pf_r
   are a later row's x and r (or NULL) for passes 1 and 2 to prefetch. */
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

/* What pass 2 needs: the shift, the correction D1/n and rstd. */
typedef struct peak_ln_stats {
    float shift, corr, rstd;
} peak_ln_stats;

/* The shift guess m0: a float near the row's mean from its first few
   values. */
typedef float (*peak_ln_guess_fn)(const peak_ln_row *w);
/* Pass 1: D1 and D2 about `shift`, in double. */
typedef void (*peak_ln_dev_fn)(const peak_ln_row *w, float shift, double *d1, double *d2);
/* Pass 2: y (and sum) from the statistics; stream: non-temporal stores
   where aligned vectors allow (the tier fences after the call). */
typedef void (*peak_ln_norm_fn)(const peak_ln_row *w, peak_ln_stats st, bool stream);

/* Whether the shift is too far from the mean for D2/n - c^2 (see the top):
   c^2 > var, i.e. 2 c^2 > D2/n.  False for NaN, which needs no second
   look. */
static inline bool peak_ln_reshift(double d1, double d2, size_t n)
{
    const double c = d1 / (double)n;
    return 2.0 * c * c > d2 / (double)n;
}

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
            const float *beta, size_t rows, size_t d_model, float eps,
            peak_ln_guess_fn pass_guess, peak_ln_dev_fn pass_dev, peak_ln_norm_fn pass_norm)
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
        float shift = pass_guess(&w);
        double d1, d2;
        pass_dev(&w, shift, &d1, &d2);
        if (peak_ln_reshift(d1, d2, d_model)) {
            shift = (float)((double)shift + d1 / (double)d_model);
            pass_dev(&w, shift, &d1, &d2);
        }
        /* The float squares d^2 overflowed (|s - shift| beyond about 1.8e19)
           or may have been subnormal (D2/n below 2^-100: a near-constant
           row of tiny deviations, where they lose precision, or are flushed
           to 0 under FTZ and rstd becomes inf when eps is 0), or the row
           holds inf or NaN: the scalar reference, which works in double,
           computes the row, so every tier gives its answer.  Found by
           tests/fuzz: AVX2 returned NaN for a row of values near -3e38, and
           inf (under FTZ, eps 0) for one of values near -1e-20, whose
           LayerNorms are finite.  Costs a compare a row; constant rows take
           the scalar path. */
        if (!(d2 >= (double)d_model * 0x1p-100 && d2 <= DBL_MAX)) {
            peak_f32_add_layernorm__scalar(w.y, ld_y, w.sum, ld_sum, w.x, ld_x, w.r, ld_r, gamma,
                                           beta, 1, d_model, eps);
            continue;
        }
        pass_norm(&w, peak_ln_finish(shift, d1, d2, d_model, eps), stream);
    }
}

#endif /* PEAK_LAYERNORM_ROWS_H */
