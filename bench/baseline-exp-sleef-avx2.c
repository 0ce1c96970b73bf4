/*
 * baseline-exp-sleef-avx2.c - SLEEF's AVX2 expf (u10), 8 per call.  Built
 * with -mavx2 -mfma; the caller checks the CPU first.
 */
#include "baseline-exp.h"

#include <immintrin.h>
#include <sleef.h>

void bench_exp_sleef_avx2(float *y, const float *x, size_t n)
{
    size_t k = 0;
    for (; k + 8 <= n; k += 8)
        _mm256_storeu_ps(y + k, Sleef_expf8_u10avx2(_mm256_loadu_ps(x + k)));
    if (k < n) {
        float t[8] = {0};
        for (size_t j = 0; j < n - k; j++)
            t[j] = x[k + j];
        _mm256_storeu_ps(t, Sleef_expf8_u10avx2(_mm256_loadu_ps(t)));
        for (size_t j = 0; j < n - k; j++)
            y[k + j] = t[j];
    }
}
