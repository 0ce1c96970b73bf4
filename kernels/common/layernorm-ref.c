/*
 * layernorm-ref.c - residual add + LayerNorm in plain C, compiled once with
 * no ISA flags: the reference every SIMD tier is tested against
 * (peak_add_layernorm in peak.h), the scalar tier's kernel, and what the
 * SIMD tiers compute the rows with that they leave to the reference.
 *
 * s = x + r is rounded to float (that float is what `sum` receives and what
 * is normalised, so pre-norm chains see one consistent value).  Mean and
 * variance are two-pass in double: a row of 1e4 + small noise keeps its
 * noise (one-pass E[s^2] - E[s]^2 would cancel it away).  Before the final
 * rounding to float the result is within ~1e-12 absolute of the exact
 * LayerNorm of s (measured: <= 2 ULP from the correctly rounded value, the
 * 2 only for outputs near 0).
 *
 * No buffer holds s: each pass recomputes x + r, which is the same float
 * every time.  The last pass reads x[j] and r[j] before writing sum[j] and
 * y[j], so y == x, sum == x and sum == r are all safe.
 */
#include "common/layernorm-ref.h"
#include "internal.h"

#include <assert.h>
#include <math.h>

static double row_mean(const peak_layernorm_row *w)
{
    double acc = 0.0;
    for (size_t j = 0; j < w->n; j++)
        acc += (double)peak_layernorm_input(w, j);
    return acc / (double)w->n;
}

/* Biased (population) variance, as torch.nn.LayerNorm. */
static double row_variance(const peak_layernorm_row *w, double mean)
{
    double acc = 0.0;
    for (size_t j = 0; j < w->n; j++) {
        const double dev = (double)peak_layernorm_input(w, j) - mean;
        acc += dev * dev;
    }
    return acc / (double)w->n;
}

static void row_normalise(const peak_layernorm_row *w, double mean, double rstd)
{
    for (size_t j = 0; j < w->n; j++) {
        const float s = peak_layernorm_input(w, j);
        double v = ((double)s - mean) * rstd;
        if (w->gamma)
            v *= (double)w->gamma[j];
        if (w->beta)
            v += (double)w->beta[j];
        if (w->sum)
            ((float *)w->sum)[j] = s;
        ((float *)w->y)[j] = (float)v;
    }
}

void peak_layernorm_rows_ref(float *y, ptrdiff_t ld_y, float *sum, ptrdiff_t ld_sum,
                             const float *x, ptrdiff_t ld_x, const float *r, ptrdiff_t ld_r,
                             const float *gamma, const float *beta, size_t rows, size_t d_model,
                             float eps)
{
    assert(y && x && d_model > 0 && eps >= 0.0f);
    peak_layernorm_row w = {y, sum, x, r, gamma, beta, d_model, NULL, NULL, PEAK_F32, NULL};
    for (size_t t = 0; t < rows; t++) {
        const ptrdiff_t pt = (ptrdiff_t)t;
        w.y = y + pt * ld_y;
        w.x = x + pt * ld_x;
        w.r = r ? r + pt * ld_r : NULL;
        w.sum = sum ? sum + pt * ld_sum : NULL;
        const double mean = row_mean(&w);
        const double rstd = 1.0 / sqrt(row_variance(&w, mean) + (double)eps);
        row_normalise(&w, mean, rstd);
    }
}
