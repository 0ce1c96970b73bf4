/*
 * intrin-avx512.h - where the AVX-512 kernels get their intrinsics.
 *
 * The library itself: <immintrin.h>, nothing else.  The test suite's
 * emulated AVX-512 tier (tests/meson.build, "avx512-emulated") compiles
 * these same sources a second time with -DPEAK_SIMDE_AVX512=1 and AVX2 +
 * FMA flags only; it then gets SIMDe's AVX-512 (AVX2 underneath) plus
 * tests/avx512-emulated/peak-simde-avx512.h, which supplies what SIMDe
 * 0.7.4 lacks and replaces what it gets wrong for these kernels.  That
 * header is found only through the emulated build's include path: it is
 * never installed nor part of libpeak.
 */
#ifndef PEAK_INTRIN_AVX512_H
#define PEAK_INTRIN_AVX512_H

#if defined(PEAK_SIMDE_AVX512)
#include "peak-simde-avx512.h"
#else
#include <immintrin.h>
#endif

#endif /* PEAK_INTRIN_AVX512_H */
