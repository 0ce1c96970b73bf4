/*
 * embedding-avx512.c - x += PE and out = E[id] * scale + PE with AVX-512
 * F: 16 floats a vector, masked row ends.  The code is embedding-body.h's.
 */
#include "simd/f32-avx512.h"

/* x += PE kept as this tier had it (intrinsics): GCC orders VADDPS's
   operands, hence which NaN a NaN + NaN returns, by the form of the calls. */
#define PEAK_EMBEDDING_HAS_ADD_ROW 1
static inline __attribute__((always_inline)) void peak_pe_add_row(float *x, const float *pe,
                                                                  size_t n)
{
    size_t j = 0;
    for (; j + 32 <= n; j += 32) {
        const __m512 v0 = _mm512_add_ps(_mm512_loadu_ps(x + j), _mm512_loadu_ps(pe + j));
        const __m512 v1 =
            _mm512_add_ps(_mm512_loadu_ps(x + j + 16), _mm512_loadu_ps(pe + j + 16));
        _mm512_storeu_ps(x + j, v0);
        _mm512_storeu_ps(x + j + 16, v1);
    }
    for (; j < n; j += 16) {
        const __mmask16 m = peak_avx512_first_lanes(n - j);
        const __m512 v =
            _mm512_add_ps(_mm512_maskz_loadu_ps(m, x + j), _mm512_maskz_loadu_ps(m, pe + j));
        _mm512_mask_storeu_ps(x + j, m, v);
    }
}

#include "embedding-body.h"
