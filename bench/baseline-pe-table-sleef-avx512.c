/*
 * baseline-pe-table-sleef-avx512.c - PositionalEncoding's float32 formula
 * with SLEEF's AVX-512 sincos (u10: <= 1.0 ULP; u35: <= 3.5 ULP), 16
 * angles per call.
 *
 * The only question this baseline answers is what "just call a good vector
 * libm" buys, so it is the obvious loop: no range tricks, no recurrences.
 * Built with AVX-512 flags; the caller checks the CPU first.
 */
#include "baseline-pe-table.h"

#include <immintrin.h>
#include <sleef.h>

/* sincos: Sleef_sincosf16_u10avx512f or _u35avx512f (both are calls into
   libsleef.so already, so passing them by pointer costs nothing more). */
static void pe_table_sleef16(float *out, size_t n_pos, size_t d_model, float *div,
                             Sleef___m512_2 (*sincos)(__m512))
{
    bench_pe_div_term(div, d_model);

    /* vpermt2ps picks from sin (indices 0-15) and cos (16-31): the first
       output vector is s0 c0 s1 c1 .. s7 c7, the second s8 c8 .. s15 c15. */
    const __m512i vidx_lo =
        _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    const __m512i vidx_hi =
        _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);

    for (size_t p = 0; p < n_pos; p++) {
        const __m512 vpos = _mm512_set1_ps((float)p);
        float *row = out + p * d_model;
        size_t i = 0;
        for (; 2 * i + 32 <= d_model; i += 16) {
            const __m512 vangle = _mm512_mul_ps(vpos, _mm512_loadu_ps(div + i));
            const Sleef___m512_2 vsc = sincos(vangle);
            _mm512_storeu_ps(row + 2 * i, _mm512_permutex2var_ps(vsc.x, vidx_lo, vsc.y));
            _mm512_storeu_ps(row + 2 * i + 16, _mm512_permutex2var_ps(vsc.x, vidx_hi, vsc.y));
        }
        /* Masked tail: never reads past div's n_freq entries nor writes past
           the row, so odd and small d_model need no scalar path. */
        const size_t rem_cols = d_model - 2 * i;
        if (rem_cols != 0) {
            const size_t rem_freq = (rem_cols + 1) / 2;
            const __mmask16 kfreq = (__mmask16)((1u << rem_freq) - 1u);
            const __mmask16 klo = (__mmask16)(rem_cols >= 16 ? 0xFFFFu : (1u << rem_cols) - 1u);
            const __mmask16 khi = (__mmask16)(rem_cols > 16 ? (1u << (rem_cols - 16)) - 1u : 0u);
            const __m512 vangle = _mm512_mul_ps(vpos, _mm512_maskz_loadu_ps(kfreq, div + i));
            const Sleef___m512_2 vsc = sincos(vangle);
            _mm512_mask_storeu_ps(row + 2 * i, klo,
                                  _mm512_permutex2var_ps(vsc.x, vidx_lo, vsc.y));
            _mm512_mask_storeu_ps(row + 2 * i + 16, khi,
                                  _mm512_permutex2var_ps(vsc.x, vidx_hi, vsc.y));
        }
    }
}

void bench_pe_table_sleef_avx512(float *out, size_t n_pos, size_t d_model, float *div)
{
    pe_table_sleef16(out, n_pos, d_model, div, Sleef_sincosf16_u10avx512f);
}

void bench_pe_table_sleef_u35_avx512(float *out, size_t n_pos, size_t d_model, float *div)
{
    pe_table_sleef16(out, n_pos, d_model, div, Sleef_sincosf16_u35avx512f);
}
