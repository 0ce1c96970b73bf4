/*
 * cpu-arm.c - the AArch64 tier from the kernel's hwcaps.
 *
 * AdvSIMD (NEON) is architecturally mandatory on AArch64 Linux, but we still
 * ask the kernel (getauxval) rather than assume it: a kernel built without
 * FP/SIMD support, or an emulator, reports it honestly.
 */
#include "internal.h"

/* The NEON tier needs AdvSIMD only: AT_HWCAP bit 1, HWCAP_ASIMD in the
   Linux UAPI header <asm/hwcap.h> (bit 0, HWCAP_FP, is scalar floating
   point, which the architecture implements together with AdvSIMD, never
   one without the other).  Spelled out so that this
   file builds on any host (the tests call peak_arm_decide with made-up
   hwcaps on x86 too), and checked against the kernel's header wherever it
   exists, so a typo cannot silently disable or wrongly enable the tier.
   dispatch.c passes getauxval(AT_HWCAP) on AArch64 Linux only. */
#define PEAK_HWCAP_ASIMD (1ul << 1)
/* FP16 arithmetic, scalar (FPHP) and AdvSIMD (ASIMDHP); BF16 in AT_HWCAP2. */
#define PEAK_HWCAP_FPHP (1ul << 9)
#define PEAK_HWCAP_ASIMDHP (1ul << 10)
#define PEAK_HWCAP2_BF16 (1ul << 14)
#if defined(__aarch64__) && defined(__linux__)
#include <asm/hwcap.h>
_Static_assert(PEAK_HWCAP_ASIMD == HWCAP_ASIMD, "AT_HWCAP bit of AdvSIMD");
_Static_assert(PEAK_HWCAP_FPHP == HWCAP_FPHP && PEAK_HWCAP_ASIMDHP == HWCAP_ASIMDHP,
               "AT_HWCAP bits of FP16");
_Static_assert(PEAK_HWCAP2_BF16 == HWCAP2_BF16, "AT_HWCAP2 bit of BF16");
#endif

unsigned peak_arm_features(unsigned long hwcap, unsigned long hwcap2)
{
    unsigned f = 0;
    if (!(hwcap & PEAK_HWCAP_ASIMD))
        return 0;
    if ((hwcap & (PEAK_HWCAP_FPHP | PEAK_HWCAP_ASIMDHP)) == (PEAK_HWCAP_FPHP | PEAK_HWCAP_ASIMDHP))
        f |= PEAK_CPU_ARM_FP16;
    if (hwcap2 & PEAK_HWCAP2_BF16)
        f |= PEAK_CPU_ARM_BF16;
    return f;
}

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
