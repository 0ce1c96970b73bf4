/*
 * baseline-exp-sleef-avx512.c - SLEEF's AVX-512 expf (u10), 16 per call.
 * Built with the AVX-512 flags; the caller checks the CPU first.
 */
#include "baseline-exp.h"

#include <immintrin.h>
#include <sleef.h>

void bench_exp_sleef_avx512(float *y, const float *x, size_t n)
{
    size_t k = 0;
    for (; k + 16 <= n; k += 16)
        _mm512_storeu_ps(y + k, Sleef_expf16_u10avx512f(_mm512_loadu_ps(x + k)));
    if (k < n) {
        const __mmask16 m = (__mmask16)((1u << (n - k)) - 1u);
        _mm512_mask_storeu_ps(y + k, m, Sleef_expf16_u10avx512f(_mm512_maskz_loadu_ps(m, x + k)));
    }
}
