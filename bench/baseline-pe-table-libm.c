/*
 * baseline-pe-table-libm.c - PyTorch PositionalEncoding's float32 table as a
 * plain scalar C loop.
 *
 * Built with the project's default flags only: no -m flags and no
 * -ffast-math, so glibc's scalar sin and cos are called per element.  GCC
 * 12 at -O2 and above merges each sinf/cosf pair into one sincosf call;
 * any plain C port gets that too, so the baseline keeps it.
 * bench_pe_table_sleef_scalar is the same loop with SLEEF's scalar sincos.
 * This is the "before" number of the pe_table speed-up goals (AVX-512 12x
 * and AVX2 6x faster than this loop; GOALS in bench/report_model.py).
 */
#include "baseline-pe-table.h"

#include <math.h>
#include <sleef.h>

void bench_pe_div_term(float *div, size_t d_model)
{
    /* PyTorch multiplies a float32 arange by a Python float, which it first
       rounds to float32: the constant and the product are both float. */
    const float c = (float)(-log(10000.0) / (double)d_model);
    const size_t n_freq = (d_model + 1) / 2;
    for (size_t i = 0; i < n_freq; i++)
        div[i] = expf((float)(2 * i) * c);
}

void bench_pe_table_libm(float *out, size_t n_pos, size_t d_model, float *div)
{
    bench_pe_div_term(div, d_model);
    const size_t n_pairs = d_model / 2;
    for (size_t p = 0; p < n_pos; p++) {
        const float fp = (float)p;
        float *row = out + p * d_model;
        for (size_t i = 0; i < n_pairs; i++) {
            const float angle = fp * div[i];
            row[2 * i] = sinf(angle);
            row[2 * i + 1] = cosf(angle);
        }
        if (d_model & 1)
            row[d_model - 1] = sinf(fp * div[n_pairs]);
    }
}

void bench_pe_table_sleef_scalar(float *out, size_t n_pos, size_t d_model, float *div)
{
    bench_pe_div_term(div, d_model);
    const size_t n_pairs = d_model / 2;
    for (size_t p = 0; p < n_pos; p++) {
        const float fp = (float)p;
        float *row = out + p * d_model;
        for (size_t i = 0; i < n_pairs; i++) {
            const Sleef_float2 sc = Sleef_sincosf_u10(fp * div[i]);
            row[2 * i] = sc.x;
            row[2 * i + 1] = sc.y;
        }
        if (d_model & 1)
            row[d_model - 1] = Sleef_sincosf_u10(fp * div[n_pairs]).x;
    }
}
