/*
 * exp-avx2.h - the AVX2 tier's exponentials: exp-body.h over the AVX2
 * vocabulary, for the AVX2 softmax, peak_exp and attention.  Header-only
 * and static inline: an out-of-line call per vector would cost as much as
 * the exponential.  Bit for bit the AVX-512 results, except for 2^t
 * (exp-avx512.h says where).
 */
#ifndef PEAK_EXP_AVX2_H
#define PEAK_EXP_AVX2_H

#include "simd/f32-avx2.h"

#include "exp-body.h"

#endif /* PEAK_EXP_AVX2_H */
