/*
 * exp-neon.h - the AArch64 AdvSIMD tier's exponentials: exp-body.h over the
 * NEON vocabulary, for the NEON softmax, attention and peak_exp.
 * Header-only and static inline: an out-of-line call per vector would cost
 * as much as the exponential.  Each step is one correctly rounded
 * FMLA/FMUL where the scalar tier has one fmaf/`*`, and FRINTM is floor(),
 * so the results are the scalar and AVX2 tiers' bits.  FMIN/FMAX return
 * NaN if either operand is NaN, so a NaN input reaches the polynomial and
 * comes out NaN.
 *
 * Expected on a Neoverse V1/V2 (4 x 128-bit FP/ASIMD pipes, FMA latency
 * 4): peak_vf_exp is 21 FP/ASIMD instructions per 4 floats,
 * peak_vf_exp_sm 13 and peak_vf_exp2_ftz 11, plus a register MOV per
 * Horner step (FMLA overwrites its addend, here a constant), which the
 * renamer may absorb.  With 2 vectors in flight (PEAK_EXP_UNROLL), so
 * that the Horner chains (7 and 5 dependent FMAs) overlap, that is ~1.3
 * and ~0.7 cycle per float: e^x about 1.3x an AVX2 core's cycles per
 * float, 2^t about the same.  Not measured: no AArch64 hardware here,
 * only qemu.
 */
#ifndef PEAK_EXP_NEON_H
#define PEAK_EXP_NEON_H

#include "simd/f32-neon.h"

#define PEAK_EXP_UNROLL 2

#include "exp-body.h"

#endif /* PEAK_EXP_NEON_H */
