/*
 * rope-avx2.c - the rotary embedding with AVX2 + FMA: 8 floats, 4 doubles a vector: rope-body.h over
 * simd/f32-avx2.h.  Algorithm and bits: rope.h.
 */
#include "simd/f32-avx2.h"

#include "rope-body.h"
