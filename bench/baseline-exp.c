/*
 * baseline-exp.c - the scalar exp baselines (baseline-exp.h), built with
 * the project's default flags: no -m flags, no -ffast-math.
 */
#include "baseline-exp.h"

#include <math.h>
#include <sleef.h>

void bench_exp_libm(float *y, const float *x, size_t n)
{
    for (size_t k = 0; k < n; k++)
        y[k] = expf(x[k]);
}

void bench_exp_sleef_scalar(float *y, const float *x, size_t n)
{
    for (size_t k = 0; k < n; k++)
        y[k] = Sleef_expf_u10(x[k]);
}
