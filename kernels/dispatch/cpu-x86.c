/*
 * cpu-x86.c - which x86 tier the CPU *and the OS* allow.
 *
 * A CPUID feature bit only says the core implements an instruction; the
 * registers it uses are usable only if the OS saves them on a context switch,
 * which XCR0 reports (Intel SDM vol. 1, 13.3).  Hypervisors routinely expose
 * AVX-512 in CPUID with ZMM state disabled, so both must agree.
 */
#include "internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* CPUID.1:ECX */
#define ECX1_FMA (1u << 12)
#define ECX1_XSAVE (1u << 26)
#define ECX1_OSXSAVE (1u << 27) /* OS enabled XSAVE: XGETBV may be executed */
#define ECX1_AVX (1u << 28)
#define ECX1_F16C (1u << 29)
/* CPUID.(EAX=7,ECX=0):EBX */
#define EBX7_AVX2 (1u << 5)
#define EBX7_AVX512F (1u << 16)
#define EBX7_AVX512DQ (1u << 17)
#define EBX7_AVX512BW (1u << 30)
#define EBX7_AVX512VL (1u << 31)
/* CPUID.(EAX=7,ECX=0):EDX and CPUID.(EAX=7,ECX=1):EAX */
#define EDX7_AVX512_FP16 (1u << 23)
#define EAX7_1_AVX512_BF16 (1u << 5)
/* XCR0 state components */
#define XCR0_SSE (1u << 1)       /* XMM registers                            */
#define XCR0_AVX (1u << 2)       /* upper halves of YMM                      */
#define XCR0_OPMASK (1u << 5)    /* k0-k7                                    */
#define XCR0_ZMM_HI256 (1u << 6) /* upper halves of ZMM0-15                  */
#define XCR0_HI16_ZMM (1u << 7)  /* ZMM16-31                                 */

#define XCR0_YMM_STATE (XCR0_SSE | XCR0_AVX)
#define XCR0_ZMM_STATE (XCR0_YMM_STATE | XCR0_OPMASK | XCR0_ZMM_HI256 | XCR0_HI16_ZMM)
#define ECX1_AVX2_TIER (ECX1_XSAVE | ECX1_OSXSAVE | ECX1_AVX | ECX1_FMA)
#define EBX7_AVX512_TIER (EBX7_AVX512F | EBX7_AVX512DQ | EBX7_AVX512BW | EBX7_AVX512VL)

static int has_all(uint64_t value, uint64_t bits)
{
    return (value & bits) == bits;
}

peak_isa peak_x86_decide(const peak_x86_regs *r, const char **why)
{
    const char *w;
    peak_isa isa = PEAK_ISA_SCALAR;
    uint32_t ebx7 = r->max_leaf >= 7 ? r->leaf7_ebx : 0;

    if (!has_all(r->leaf1_ecx, ECX1_XSAVE | ECX1_OSXSAVE))
        w = "scalar: OS has not enabled XSAVE (CPUID.1:ECX.OSXSAVE clear), no AVX state";
    else if (!has_all(r->xcr0, XCR0_YMM_STATE))
        w = "scalar: OS does not save YMM state (XCR0 bits 1-2 clear)";
    else if (!has_all(r->leaf1_ecx, ECX1_AVX2_TIER))
        w = "scalar: CPU lacks AVX or FMA (CPUID.1:ECX)";
    else if (!has_all(ebx7, EBX7_AVX2))
        w = "scalar: CPU lacks AVX2 (CPUID.7:EBX bit 5)";
    else {
        isa = PEAK_ISA_AVX2;
        if (!has_all(ebx7, EBX7_AVX512_TIER))
            w = "avx2: CPU lacks one of AVX-512 F/DQ/BW/VL (CPUID.7:EBX)";
        else if (!has_all(r->xcr0, XCR0_ZMM_STATE))
            w = "avx2: CPU has AVX-512 but the OS does not save opmask/ZMM state "
                "(XCR0 bits 5-7)";
        else {
            isa = PEAK_ISA_AVX512;
            w = "avx512: CPU has AVX-512 F/DQ/BW/VL and the OS saves opmask/ZMM state";
        }
    }
#if PEAK_AVX512_EMULATED
    /* The test suite's copy of the library (tests/avx512-emulated): its
       avx512 kernels are the AVX-512 sources built against SIMDe for AVX2 +
       FMA, so the AVX2 tier's requirements are theirs. */
    if (isa == PEAK_ISA_AVX2)
        w = "avx512 (emulated: AVX-512 kernels built on SIMDe for AVX2 + FMA, a test build); "
            "the CPU lacks native AVX-512";
    else if (isa == PEAK_ISA_AVX512)
        w = "avx512 (emulated: AVX-512 kernels built on SIMDe for AVX2 + FMA, a test build); "
            "the CPU has native AVX-512 too";
    if (isa != PEAK_ISA_SCALAR)
        isa = PEAK_ISA_AVX512;
#endif
    if (why)
        *why = w;
    return isa;
}

unsigned peak_x86_features(const peak_x86_regs *r)
{
    unsigned f = 0;
    const uint32_t ebx7 = r->max_leaf >= 7 ? r->leaf7_ebx : 0;
    const uint32_t edx7 = r->max_leaf >= 7 ? r->leaf7_edx : 0;
    const uint32_t eax71 = r->max_leaf >= 7 ? r->leaf7_1_eax : 0;
    if (!has_all(r->leaf1_ecx, ECX1_XSAVE | ECX1_OSXSAVE | ECX1_AVX) ||
        !has_all(r->xcr0, XCR0_YMM_STATE))
        return 0;
    if (has_all(r->leaf1_ecx, ECX1_F16C))
        f |= PEAK_CPU_F16C;
    if (has_all(ebx7, EBX7_AVX512F) && has_all(r->xcr0, XCR0_ZMM_STATE)) {
        if (has_all(eax71, EAX7_1_AVX512_BF16))
            f |= PEAK_CPU_AVX512_BF16;
        if (has_all(edx7, EDX7_AVX512_FP16))
            f |= PEAK_CPU_AVX512_FP16;
    }
    return f;
}

void peak_x86_read(peak_x86_regs *r)
{
    *r = (peak_x86_regs){0, 0, 0, 0, 0, 0};
#if defined(__x86_64__) || defined(__i386__)
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d))
        return;
    r->max_leaf = a;
    __get_cpuid(1, &a, &b, &c, &d);
    r->leaf1_ecx = c;
    if (r->max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        r->leaf7_ebx = b;
        r->leaf7_edx = d;
        if (a >= 1) { /* subleaves of leaf 7 */
            __cpuid_count(7, 1, a, b, c, d);
            r->leaf7_1_eax = a;
        }
    }
    /* XGETBV is #UD unless the OS set CR4.OSXSAVE: guard it. */
    if (r->leaf1_ecx & ECX1_OSXSAVE) {
        uint32_t lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        r->xcr0 = ((uint64_t)hi << 32) | lo;
    }
#endif
}
