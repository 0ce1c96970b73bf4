/*
 * pe-table-avx512.c - the sinusoid table with AVX-512 F/DQ/VL:
 * pe-table-body.h over simd/f32-avx512.h, 8 frequencies per vector of
 * doubles.
 */
#include "simd/f32-avx512.h"

#include "pe-table-body.h"
