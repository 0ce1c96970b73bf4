/*
 * transpose-avx2.h - 8 x 8 float transposes (AVX) for the attention's block
 * start and finish (attention.h), which turn 64 rows of Q into Q^T
 * (rows along the lanes) and O^T back into rows: scalar, with every store a
 * different cache line, they cost as much per block as two tiles'
 * softmax.  Header-only, in simd/ rather than a tier folder because both
 * the AVX2 and the AVX-512 tiers include it: the AVX-512 tier's flags
 * contain AVX2's, and no tier may include another tier's header.
 */
#ifndef PEAK_TRANSPOSE_AVX2_H
#define PEAK_TRANSPOSE_AVX2_H

#include <immintrin.h>
#include <stddef.h>

/* v[i] <- the i-th column of the 8 x 8 matrix whose rows are v[0..7]. */
static inline void peak_avx2_t8x8(__m256 v[8])
{
    __m256 t[8], s[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]);
    }
    for (int i = 0; i < 2; i++) {
        s[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
        s[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xee);
        s[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        s[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xee);
    }
    for (int i = 0; i < 4; i++) {
        v[i] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x20);
        v[i + 4] = _mm256_permute2f128_ps(s[i], s[i + 4], 0x31);
    }
}

/* dst[i * ldd + k] = src[k][c + i], i, k < 8. */
static inline void peak_avx2_t8x8_in(float *dst, size_t ldd, const float *const *src, size_t c)
{
    __m256 v[8];
    for (int k = 0; k < 8; k++)
        v[k] = _mm256_loadu_ps(src[k] + c);
    peak_avx2_t8x8(v);
    for (int i = 0; i < 8; i++)
        _mm256_storeu_ps(dst + (size_t)i * ldd, v[i]);
}

/* dst[k][c + i] = src[i * lds + k], i, k < 8. */
static inline void peak_avx2_t8x8_out(float *const *dst, size_t c, const float *src, size_t lds)
{
    __m256 v[8];
    for (int i = 0; i < 8; i++)
        v[i] = _mm256_loadu_ps(src + (size_t)i * lds);
    peak_avx2_t8x8(v);
    for (int k = 0; k < 8; k++)
        _mm256_storeu_ps(dst[k] + c, v[k]);
}

#endif /* PEAK_TRANSPOSE_AVX2_H */
