/*
 * baseline-layernorm-novec.c - the layernorm benchmark's plain C loop again,
 * built with -fno-tree-vectorize (bench/meson.build) so that it is the
 * straightforward scalar loop the "plain C loop" means.  The copy in
 * bench-layernorm.c, built with the project's flags, is auto-vectorised by
 * GCC in part (its normalising loop becomes SSE2 cvtps2pd/mulpd), so both
 * are reported.  The loop text is the same as there.
 */
#include <math.h>
#include <stddef.h>

void bench_ln_plain_loop_novec(float *y, const float *x, const float *r, const float *gamma,
                               const float *beta, size_t rows, size_t d, float eps);

void bench_ln_plain_loop_novec(float *y, const float *x, const float *r, const float *gamma,
                               const float *beta, size_t rows, size_t d, float eps)
{
    for (size_t t = 0; t < rows; t++) {
        const float *xt = x + t * d, *rt = r + t * d;
        double acc = 0.0;
        for (size_t j = 0; j < d; j++)
            acc += (double)(xt[j] + rt[j]);
        const double mean = acc / (double)d;
        double var = 0.0;
        for (size_t j = 0; j < d; j++) {
            const double dev = (double)(xt[j] + rt[j]) - mean;
            var += dev * dev;
        }
        const double rstd = 1.0 / sqrt(var / (double)d + (double)eps);
        for (size_t j = 0; j < d; j++)
            y[t * d + j] =
                (float)(((double)(xt[j] + rt[j]) - mean) * rstd * gamma[j] + beta[j]);
    }
}
