/*
 * logits.c - the ALiBi slopes (peak_alibi_slopes in peak.h), ISA-free and
 * compiled once.
 */
#include "../logits.h"

#include <assert.h>
#include <math.h>

/* Press et al. 2022: n heads, n a power of two, take 2^(-8 (h + 1) / n).
   Other n (BLOOM's build_alibi_tensor): p = the largest power of two
   below n gives the first p slopes; the remaining n - p heads take every
   other slope of 2p heads, 2^(-8 h' / 2p) = 2^(-4 h' / p) for h' = 1, 3,
   5, ...  The exponent is exact in double (n <= 2^20), exp2 is within an
   ulp of double, and the float rounding is the only one that matters. */
float peak_alibi_slope(size_t h, size_t heads)
{
    assert(heads > 0 && heads <= PEAK_ALIBI_MAX_HEADS && h < heads);
    size_t p = 1;
    while (p * 2 <= heads)
        p *= 2;
    if (h < p)
        return (float)exp2(-8.0 * (double)(h + 1) / (double)p);
    const size_t odd = 2 * (h - p) + 1;
    return (float)exp2(-4.0 * (double)odd / (double)p);
}
