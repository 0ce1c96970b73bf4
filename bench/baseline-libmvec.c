/*
 * baseline-libmvec.c - glibc's vector math library (libmvec) as a user
 * reaches it: plain C loops over sinf, cosf and expf that GCC vectorises
 * into calls of _ZGV{d,e}N{8,16}v_{sinf,cosf,expf} because glibc's <math.h>
 * declares those functions `simd` under -ffast-math.
 *
 * Built twice (bench/meson.build): with -mavx2 -mfma and
 * BENCH_LIBMVEC_ISA=avx2, and with the AVX-512 flags,
 * -mprefer-vector-width=512 and BENCH_LIBMVEC_ISA=avx512; both with
 * -O3 -ffast-math, the only bench sources with -ffast-math.  The program is
 * linked without it, so no crtfastmath.o sets FTZ/DAZ behind the other
 * benchmarks' backs.
 *
 * The loops compute PositionalEncoding's float32 formula
 * (baseline-pe-table.h).  Sine and cosine run in separate loops on
 * purpose: in one loop GCC merges the pair into a scalar sincosf call,
 * which libmvec cannot vectorise.  The caller checks the CPU before
 * calling.
 */
#include "baseline-exp.h"
#include "baseline-pe-table.h"

#include <math.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)
#define NAME(f) CAT(f, BENCH_LIBMVEC_ISA)

/* Angles of one row are at most ceil(d_model/2); the PE shapes stop at
   d_model 1024, and a larger one goes through the row in chunks. */
#define CHUNK 512

void NAME(bench_pe_table_libmvec_)(float *out, size_t n_pos, size_t d_model, float *div)
{
    bench_pe_div_term(div, d_model);
    const size_t n_freq = (d_model + 1) / 2;
    float angle[CHUNK], s[CHUNK], c[CHUNK];
    for (size_t p = 0; p < n_pos; p++) {
        const float fp = (float)p;
        float *row = out + p * d_model;
        for (size_t i0 = 0; i0 < n_freq; i0 += CHUNK) {
            const size_t n = n_freq - i0 < CHUNK ? n_freq - i0 : CHUNK;
            for (size_t i = 0; i < n; i++)
                angle[i] = fp * div[i0 + i];
            for (size_t i = 0; i < n; i++)
                s[i] = sinf(angle[i]);
            for (size_t i = 0; i < n; i++)
                c[i] = cosf(angle[i]);
            for (size_t i = 0; i < n; i++) {
                const size_t col = 2 * (i0 + i);
                row[col] = s[i];
                if (col + 1 < d_model)
                    row[col + 1] = c[i];
            }
        }
    }
}

void NAME(bench_exp_libmvec_)(float *restrict y, const float *restrict x, size_t n)
{
    for (size_t k = 0; k < n; k++)
        y[k] = expf(x[k]);
}
