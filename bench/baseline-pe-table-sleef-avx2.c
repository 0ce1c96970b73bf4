/*
 * baseline-pe-table-sleef-avx2.c - PositionalEncoding's float32 formula
 * with SLEEF's AVX2 sincos (u10: <= 1.0 ULP), 8 angles per call.  Built
 * with -mavx2 -mfma; the caller checks the CPU first.
 */
#include "baseline-pe-table.h"

#include <immintrin.h>
#include <sleef.h>

void bench_pe_table_sleef_avx2(float *out, size_t n_pos, size_t d_model, float *div)
{
    bench_pe_div_term(div, d_model);

    for (size_t p = 0; p < n_pos; p++) {
        const __m256 vpos = _mm256_set1_ps((float)p);
        float *row = out + p * d_model;
        size_t i = 0;
        for (; 2 * i + 16 <= d_model; i += 8) {
            const __m256 vangle = _mm256_mul_ps(vpos, _mm256_loadu_ps(div + i));
            const Sleef___m256_2 vsc = Sleef_sincosf8_u10avx2(vangle);
            /* unpack interleaves within 128-bit lanes only (s0 c0 s1 c1 |
               s4 c4 s5 c5 and s2 c2 s3 c3 | s6 c6 s7 c7); the lane permutes
               put the halves back in column order. */
            const __m256 vlo = _mm256_unpacklo_ps(vsc.x, vsc.y);
            const __m256 vhi = _mm256_unpackhi_ps(vsc.x, vsc.y);
            _mm256_storeu_ps(row + 2 * i, _mm256_permute2f128_ps(vlo, vhi, 0x20));
            _mm256_storeu_ps(row + 2 * i + 8, _mm256_permute2f128_ps(vlo, vhi, 0x31));
        }
        /* The tail (none for the benchmarked shapes) goes through a stack
           buffer: simpler than AVX2 mask loads and off the measured path. */
        const size_t rem_cols = d_model - 2 * i;
        if (rem_cols != 0) {
            float angle[8] = {0}, s[8], c[8];
            for (size_t k = 0; k < (rem_cols + 1) / 2; k++)
                angle[k] = (float)p * div[i + k];
            const Sleef___m256_2 vsc = Sleef_sincosf8_u10avx2(_mm256_loadu_ps(angle));
            _mm256_storeu_ps(s, vsc.x);
            _mm256_storeu_ps(c, vsc.y);
            for (size_t k = 0; k < rem_cols; k++)
                row[2 * i + k] = (k & 1) ? c[k / 2] : s[k / 2];
        }
    }
}
