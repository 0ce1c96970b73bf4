/*
 * tiers.c - which instruction-set tier peak runs on, why, and how to choose.
 *
 * peak picks the best tier this CPU, its OS and this build of the library
 * support, once, on the first call.  Two environment variables act on that
 * choice without recompiling:
 *   PEAK_ISA=scalar|avx2|avx512|neon   caps it (never raises it)
 *   PEAK_ISA_DEBUG=1                   prints the decision on stderr
 * and a program can switch tier itself with peak_isa_force() (benchmarks,
 * tests, or to rule a SIMD kernel out while debugging).
 *
 *   ./tiers                 report, then run peak_exp on every usable tier
 *   PEAK_ISA=scalar ./tiers the same, starting from the scalar tier
 *
 * Build: cc tiers.c $(pkg-config --cflags --libs peak)
 */
#include <peak.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !PEAK_VERSION_AT_LEAST(0, 2, 0) /* compile-time requirement on the header */
#error "this example needs peak 0.2.0 or later"
#endif

enum { N = 1000 };

int main(void)
{
    /* The header you compiled against and the library you run on should
       agree; PEAK_VERSION_AT_LEAST() tests the header at compile time. */
    printf("peak %s (header %s)\n", peak_version(), PEAK_VERSION_STRING);
    if (strcmp(peak_version(), PEAK_VERSION_STRING) != 0)
        fprintf(stderr, "warning: compiled against peak %s, running on %s\n", PEAK_VERSION_STRING,
                peak_version());
    const char *cap = getenv("PEAK_ISA");
    printf("PEAK_ISA: %s\n", cap && *cap ? cap : "(unset)");
    printf("active tier: %s\n", peak_isa_name(peak_isa_active()));
    printf("why: %s\n", peak_isa_reason());

    /* Every tier: is it in this build and usable on this machine? */
    const peak_isa all[] = {PEAK_ISA_SCALAR, PEAK_ISA_AVX2, PEAK_ISA_AVX512, PEAK_ISA_NEON};
    static float x[N], first[N], y[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)(i - N / 2) * 0.17f;
    int have_first = 0, same = 1;
    for (size_t t = 0; t < sizeof all / sizeof all[0]; t++) {
        if (!peak_isa_supported(all[t])) {
            printf("  %-7s not usable here\n", peak_isa_name(all[t]));
            continue;
        }
        /* Process-wide switch: do it before starting threads that call peak.
           Unlike PEAK_ISA it may pick any usable tier, above the cap too. */
        if (peak_isa_force(all[t]) != PEAK_OK)
            return 1;
        if (peak_exp(y, x, N, NULL) != PEAK_OK)
            return 1;
        /* peak_exp promises the same bits on every tier. */
        if (!have_first)
            memcpy(first, y, sizeof y), have_first = 1;
        else if (memcmp(first, y, sizeof y) != 0)
            same = 0;
        printf("  %-7s usable: exp(1.7) = %.9g\n", peak_isa_name(all[t]), y[N / 2 + 10]);
    }
    peak_isa_reset(); /* back to the automatic choice (PEAK_ISA still applies) */
    printf("after reset: %s; peak_exp identical on every tier: %s\n",
           peak_isa_name(peak_isa_active()), same ? "yes" : "NO");
    return same ? 0 : 1;
}
