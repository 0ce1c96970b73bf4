/*
 * rope-avx512.c - the rotary embedding with AVX-512: 16 floats, 8 doubles a vector: rope-body.h over
 * simd/f32-avx512.h.  Algorithm and bits: rope.h.
 */
#include "simd/f32-avx512.h"

#include "rope-body.h"
