/*
 * exp-avx2.c - peak_exp and attention's 2^t over arrays, 8 at a time
 * (the functions themselves, their method and accuracy: exp-avx2.h).
 * The tail is a VMASKMOVPS load and a partial store (simd/f32-avx2.h:
 * VMASKMOVPS stores are slow on Zen 3): nothing past x[n-1] is read or
 * y[n-1] written, and y == x works since each vector is read before it is
 * written.
 */
#include "internal.h"
#include "avx2/exp-avx2.h"
#include "simd/f32-avx2.h"

#include <assert.h>
#include <immintrin.h>

void peak_f32_exp__avx2(float *y, const float *x, size_t n)
{
    assert(y && x);
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(y + j, peak_avx2_exp(_mm256_loadu_ps(x + j)));
    if (j < n) {
        const __m256i k = peak_avx2_first_lanes(n - j);
        peak_avx2_store_first(y + j, peak_avx2_exp(_mm256_maskload_ps(x + j, k)), n - j);
    }
}

void peak_f32_exp2__avx2(float *y, const float *x, size_t n)
{
    assert(y && x);
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(y + j, peak_avx2_exp2_ftz(_mm256_loadu_ps(x + j)));
    if (j < n) {
        const __m256i k = peak_avx2_first_lanes(n - j);
        peak_avx2_store_first(y + j, peak_avx2_exp2_ftz(_mm256_maskload_ps(x + j, k)), n - j);
    }
}
