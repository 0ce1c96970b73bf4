/*
 * convert-avx2.c - peak_convert on the avx2 tier: convert-body.h's loops over
 * simd/f32-avx2.h's 16-bit loads and stores.
 */
#include "simd/f32-avx2.h"
#include "convert-body.h"
