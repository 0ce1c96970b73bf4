/*
 * baseline-exp.h - what peak_exp is measured against: y[k] = e^x[k] for
 * k < n, float32, out of place.
 *
 * No SIMD types here: the SLEEF and libmvec variants live in their own
 * translation units, built with -m flags, and are called only after the
 * caller has checked the CPU.
 */
#ifndef PEAK_BENCH_BASELINE_EXP_H
#define PEAK_BENCH_BASELINE_EXP_H

#include <stddef.h>

/* glibc expf per element, default flags (not vectorised without
   -ffast-math): the plain C loop. */
void bench_exp_libm(float *y, const float *x, size_t n);

/* SLEEF's scalar Sleef_expf_u10 per element (SLEEF's own dispatcher picks
   its best scalar code). */
void bench_exp_sleef_scalar(float *y, const float *x, size_t n);

#if PEAK_BENCH_SLEEF_AVX512
/* Sleef_expf16_u10avx512f, 16 at a time, masked tail. */
void bench_exp_sleef_avx512(float *y, const float *x, size_t n);
#endif
#if PEAK_BENCH_SLEEF_AVX2
/* Sleef_expf8_u10avx2, 8 at a time, tail through a stack buffer. */
void bench_exp_sleef_avx2(float *y, const float *x, size_t n);
#endif

#if PEAK_BENCH_LIBMVEC_AVX512
/* glibc libmvec through an auto-vectorised loop (baseline-libmvec.c). */
void bench_exp_libmvec_avx512(float *restrict y, const float *restrict x, size_t n);
#endif
#if PEAK_BENCH_LIBMVEC_AVX2
void bench_exp_libmvec_avx2(float *restrict y, const float *restrict x, size_t n);
#endif

#endif /* PEAK_BENCH_BASELINE_EXP_H */
