/*
 * convert-avx512.c - peak_convert on the avx512 tier: convert-body.h's loops over
 * simd/f32-avx512.h's 16-bit loads and stores.
 */
#include "simd/f32-avx512.h"
#include "convert-body.h"
