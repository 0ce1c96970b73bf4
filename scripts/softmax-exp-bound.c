/*
 * softmax-exp-bound.c - the relative error of the softmax's exponential
 * (kernels/exp.h, "2^-k e^a for the softmax") for every float a in a
 * range, against expl.  The kernels' operations one at a time with fmaf,
 * the C library's correctly rounded FMA, as the vector FMAs are: the same
 * bits (2^(M - k) is exact, so k does not change the relative error and
 * is left out).  The figure of exp.h and softmax.h:
 *
 *   cc -O2 -Ikernels scripts/softmax-exp-bound.c -o /tmp/seb -lm
 *   /tmp/seb -345 -1; /tmp/seb -1 1; /tmp/seb 1 256
 *
 * (about 4 minutes for the three on one core of a Zen 3).  Arguments below
 * 2^-40 in magnitude are skipped: there M = 0, r = a, and p(r) = 1 + a.
 */
#include "exp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s LO HI   (every float a in [LO, HI])\n", argv[0]);
        return 2;
    }
    const float lo = strtof(argv[1], NULL), hi = strtof(argv[2], NULL);
    const long double ln2 = 0.693147180559945309417232121458176568L;
    double worst = 0.0, worst_a = 0.0, sum2 = 0.0;
    long count = 0;
    for (float a = lo; a <= hi; a = nextafterf(a, INFINITY)) {
        if (fabsf(a) < 0x1p-40f && a != 0.0f)
            continue;
        const float v = fmaf(a, PEAK_EXP_LOG2E, PEAK_EXP_ROUND_MAGIC);
        const float m = v - PEAK_EXP_ROUND_MAGIC;
        float r = fmaf(m, PEAK_EXP_MINUS_LN2_HI, a);
        r = fmaf(m, PEAK_EXP_MINUS_LN2_LO, r);
        float p = PEAK_EXP_C6;
        p = fmaf(p, r, PEAK_EXP_C5);
        p = fmaf(p, r, PEAK_EXP_C4);
        p = fmaf(p, r, PEAK_EXP_C3);
        p = fmaf(p, r, PEAK_EXP_C2);
        p = fmaf(p, r, 1.0f);
        p = fmaf(p, r, 1.0f);
        /* p approximates e^a / 2^M */
        const long double want = expl((long double)a - (long double)m * ln2);
        const double rel = fabs((double)(((long double)p - want) / want)) * 0x1p24;
        if (rel > worst) {
            worst = rel;
            worst_a = a;
        }
        sum2 += rel * rel;
        count++;
        if (a == hi)
            break;
    }
    printf("a in [%g, %g]: %ld floats, max |computed / exact - 1| = %.4f * 2^-24 at a = %a; "
           "rms %.4f * 2^-24\n",
           (double)lo, (double)hi, count, worst, worst_a, sqrt(sum2 / (double)count));
    return 0;
}
