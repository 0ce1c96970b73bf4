/*
 * exp-avx2.c - peak_exp and attention's 2^t over arrays, 8 at a time
 * (the functions themselves, their method and accuracy: exp-avx2.h).
 * The tail is a VMASKMOVPS load and store: nothing past x[n-1] is read,
 * and y == x works since each vector is read before it is written.
 */
#include "internal.h"
#include "avx2/exp-avx2.h"

#include <assert.h>
#include <immintrin.h>

/* Lane masks for the first n lanes, n = 0..8: 8 - n entries into this. */
static const int32_t tail_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                       0,  0,  0,  0,  0,  0,  0,  0};

static inline __m256i first_lanes(size_t n)
{
    return _mm256_loadu_si256((const __m256i *)(tail_table + 8 - n));
}

void peak_f32_exp__avx2(float *y, const float *x, size_t n)
{
    assert(y && x);
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(y + j, peak_avx2_exp(_mm256_loadu_ps(x + j)));
    if (j < n) {
        const __m256i k = first_lanes(n - j);
        _mm256_maskstore_ps(y + j, k, peak_avx2_exp(_mm256_maskload_ps(x + j, k)));
    }
}

void peak_f32_exp2__avx2(float *y, const float *x, size_t n)
{
    assert(y && x);
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        _mm256_storeu_ps(y + j, peak_avx2_exp2_ftz(_mm256_loadu_ps(x + j)));
    if (j < n) {
        const __m256i k = first_lanes(n - j);
        _mm256_maskstore_ps(y + j, k, peak_avx2_exp2_ftz(_mm256_maskload_ps(x + j, k)));
    }
}
