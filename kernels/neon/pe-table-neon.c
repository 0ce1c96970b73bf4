/*
 * pe-table-neon.c - the sinusoid table on AArch64 AdvSIMD: pe-table-body.h
 * over simd/f32-neon.h, 2 frequencies per vector of doubles.
 *
 * SLEEF is not used: its advsimd sincos (Sleef_sincosd2_u10advsimd in
 * Debian's 3.5.1) is a different algorithm, so its bits would differ from
 * the scalar reference's; bit identity is the contract of this family.
 */
#include "simd/f32-neon.h"

/* Four vectors a sincos step: each polynomial is a chain of 8 dependent
   FMAs, and four in flight (eight with sin and cos) cover the FMA latency
   on every FP pipe of a 4-pipe Neoverse core. */
#define PEAK_PE_SINCOS_UNROLL 4

#include "pe-table-body.h"
