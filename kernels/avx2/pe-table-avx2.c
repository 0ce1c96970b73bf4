/*
 * pe-table-avx2.c - the sinusoid table with AVX2 + FMA: pe-table-body.h
 * over simd/f32-avx2.h, 4 frequencies per vector of doubles.
 */
#include "simd/f32-avx2.h"

#include "pe-table-body.h"
