/*
 * cpu-arm.c - the AArch64 tier from the kernel's hwcaps.
 *
 * AdvSIMD (NEON) is architecturally mandatory on AArch64 Linux, but we still
 * ask the kernel (getauxval) rather than assume it: a kernel built without
 * FP/SIMD support, or an emulator, reports it honestly.
 */
#include "internal.h"

/* HWCAP_ASIMD from <asm/hwcap.h>; spelled out so this file builds on any
   host (it is only called on AArch64). */
#define PEAK_HWCAP_ASIMD (1ul << 1)

peak_isa peak_arm_decide(unsigned long hwcap, const char **why)
{
    if (hwcap & PEAK_HWCAP_ASIMD) {
        if (why)
            *why = "neon: AT_HWCAP reports ASIMD";
        return PEAK_ISA_NEON;
    }
    if (why)
        *why = "scalar: AT_HWCAP does not report ASIMD";
    return PEAK_ISA_SCALAR;
}
