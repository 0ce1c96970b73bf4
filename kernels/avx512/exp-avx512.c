/*
 * exp-avx512.c - peak_exp and attention's 2^t over arrays, 16 at a time
 * (the functions themselves, their method and accuracy: exp-avx512.h).
 * The tail is a masked load and store: nothing past x[n-1] is read, and
 * y == x works since each vector is read before it is written.
 */
#include "internal.h"
#include "avx512/exp-avx512.h"

#include <assert.h>
#include "avx512/intrin-avx512.h"

void peak_f32_exp__avx512(float *y, const float *x, size_t n)
{
    assert(y && x);
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(y + j, peak_avx512_exp(_mm512_loadu_ps(x + j)));
    if (j < n) {
        const __mmask16 k = (__mmask16)((1u << (n - j)) - 1u);
        _mm512_mask_storeu_ps(y + j, k, peak_avx512_exp(_mm512_maskz_loadu_ps(k, x + j)));
    }
}

void peak_f32_exp2__avx512(float *y, const float *x, size_t n)
{
    assert(y && x);
    size_t j = 0;
    for (; j + 16 <= n; j += 16)
        _mm512_storeu_ps(y + j, peak_avx512_exp2(_mm512_loadu_ps(x + j)));
    if (j < n) {
        const __mmask16 k = (__mmask16)((1u << (n - j)) - 1u);
        _mm512_mask_storeu_ps(y + j, k, peak_avx512_exp2_maskz(k, _mm512_maskz_loadu_ps(k, x + j)));
    }
}
