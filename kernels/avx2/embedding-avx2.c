/*
 * embedding-avx2.c - x += PE and out = E[id] * scale + PE with AVX2: 8
 * floats a vector, the row ends through plain stores (simd/f32-avx2.h: a
 * masked store is slow on Zen 3).  The code is embedding-body.h's.
 */
#include "simd/f32-avx2.h"

/* x += PE kept as this tier had it (intrinsics): GCC orders VADDPS's
   operands, hence which NaN a NaN + NaN returns, by the form of the calls. */
#define PEAK_EMBEDDING_HAS_ADD_ROW 1
static inline __attribute__((always_inline)) void peak_pe_add_row(float *x, const float *pe,
                                                                  size_t n)
{
    size_t j = 0;
    for (; j + 16 <= n; j += 16) {
        const __m256 v0 = _mm256_add_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(pe + j));
        const __m256 v1 = _mm256_add_ps(_mm256_loadu_ps(x + j + 8), _mm256_loadu_ps(pe + j + 8));
        _mm256_storeu_ps(x + j, v0);
        _mm256_storeu_ps(x + j + 8, v1);
    }
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(x + j, _mm256_add_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(pe + j)));
    if (j < n) {
        const __m256i m = peak_avx2_first_lanes(n - j);
        const __m256 v = _mm256_add_ps(_mm256_maskload_ps(x + j, m), _mm256_maskload_ps(pe + j, m));
        peak_avx2_store_first(x + j, v, n - j);
    }
}

#include "embedding-body.h"
