/*
 * peak-info - what this CPU and OS offer, which tiers this build has, and
 * which one peak picks and why.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

#if defined(__x86_64__) || defined(__i386__)
static void bit(const char *name, uint64_t reg, int b)
{
    printf("  %-11s %s\n", name, (reg >> b) & 1 ? "yes" : "no");
}

static void print_x86(void)
{
    peak_x86_regs r;
    peak_x86_read(&r);
    printf("CPU features (CPUID, max leaf %u):\n", r.max_leaf);
    bit("XSAVE", r.leaf1_ecx, 26);
    bit("OSXSAVE", r.leaf1_ecx, 27);
    bit("AVX", r.leaf1_ecx, 28);
    bit("FMA", r.leaf1_ecx, 12);
    bit("AVX2", r.leaf7_ebx, 5);
    bit("AVX512F", r.leaf7_ebx, 16);
    bit("AVX512DQ", r.leaf7_ebx, 17);
    bit("AVX512BW", r.leaf7_ebx, 30);
    bit("AVX512VL", r.leaf7_ebx, 31);
    bit("F16C", r.leaf1_ecx, 29);
    bit("AVX512_BF16", r.leaf7_1_eax, 5);
    bit("AVX512_FP16", r.leaf7_edx, 23);
    if (r.leaf1_ecx & (1u << 27)) {
        printf("OS state (XCR0 = 0x%llx):\n", (unsigned long long)r.xcr0);
        bit("XMM", r.xcr0, 1);
        bit("YMM", r.xcr0, 2);
        bit("opmask", r.xcr0, 5);
        bit("ZMM_Hi256", r.xcr0, 6);
        bit("Hi16_ZMM", r.xcr0, 7);
    } else {
        printf("OS state: OSXSAVE clear, XGETBV not executed\n");
    }
    const char *why;
    printf("Best tier for this CPU/OS: %s\n", peak_isa_name(peak_x86_decide(&r, &why)));
}
#endif

int main(void)
{
    printf("peak %s\n", peak_version());
#if defined(__x86_64__) || defined(__i386__)
    print_x86();
#endif
    printf("Tiers compiled in / usable here:\n");
    for (int i = PEAK_ISA_SCALAR; i <= PEAK_ISA_NEON; i++) {
        peak_isa isa = (peak_isa)i;
        if (peak_kernels_for(isa))
            printf("  %-7s compiled, %s\n", peak_isa_name(isa),
                   peak_isa_supported(isa) ? "usable" : "NOT usable on this CPU/OS");
    }
    printf("Features usable here (peak_cpu_features):");
    const unsigned features = peak_cpu_features();
    for (unsigned f = 1; f <= PEAK_CPU_ARM_BF16; f <<= 1)
        if (features & f)
            printf(" %s", peak_cpu_feature_name((peak_cpu_feature)f));
    printf("%s\n", features ? "" : " none");
    const char *env = getenv("PEAK_ISA");
    printf("PEAK_ISA: %s\n", env && *env ? env : "(unset)");
    printf("Selected: %s\n", peak_isa_name(peak_isa_active()));
    printf("Why: %s\n", peak_isa_reason());
    return 0;
}
