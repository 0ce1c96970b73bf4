/*
 * baseline-plain-loops.c - what a C programmer writes first for the
 * embedding + PE add and for residual + LayerNorm.  Built twice
 * (bench/meson.build): PEAK_PLAIN_SFX is _vec or _novec, see
 * baseline-plain-loops.h.
 */
#include "baseline-plain-loops.h"

#include <math.h>

#define PLAIN_CAT2(a, b) a##b
#define PLAIN_CAT(a, b) PLAIN_CAT2(a, b)
#define PLAIN(name) PLAIN_CAT(name, PEAK_PLAIN_SFX)

void PLAIN(bench_layernorm_plain_loop)(float *y, const float *x, const float *r, const float *gamma,
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

void PLAIN(bench_embedding_plain_loop)(float *out, const float *table, const int32_t *ids,
                                 const float *pe, size_t batch, size_t seq, size_t d,
                                 float scale)
{
    for (size_t b = 0; b < batch; b++)
        for (size_t s = 0; s < seq; s++) {
            const size_t t = b * seq + s;
            const float *e = table + (size_t)ids[t] * d;
            for (size_t j = 0; j < d; j++)
                out[t * d + j] = e[j] * scale + pe[s * d + j];
        }
}
