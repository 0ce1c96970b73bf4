/*
 * baseline-pe-table.h - the tables peak_pe_table is measured against.
 *
 * All of them compute the float32 formula of the PyTorch
 * PositionalEncoding module (bench/torch-bench.py's
 * positional_encoding_table), so they build the same angles and differ
 * only in how sin/cos are evaluated:
 *   div[i]   = expf((float)(2i) * c),  c = (float)(-ln(10000) / d_model)
 *   angle    = (float)pos * div[i]                     (rounded to float)
 *   out[pos, 2i] = sin(angle),  out[pos, 2i+1] = cos(angle)
 * (odd d_model: the last column is the sine), positions 0 .. n_pos-1,
 * rows contiguous.  `div` is caller-owned scratch of at least
 * BENCH_PE_DIV_LEN(d_model) floats, so no baseline pays for an allocation
 * the library kernels do not make; filling it is part of the timed work, as
 * it is in the PyTorch module's constructor.
 *
 * This header carries no SIMD types: the SLEEF variants live in their own
 * translation units, the only ones built with -m flags, and are reached
 * through plain float pointers once the caller has checked the CPU.
 */
#ifndef PEAK_BENCH_BASELINE_PE_TABLE_H
#define PEAK_BENCH_BASELINE_PE_TABLE_H

#include <stddef.h>

#define BENCH_PE_DIV_LEN(d_model) ((((d_model) + 1) / 2 + 15) / 16 * 16)

/* div[i] for i < ceil(d_model / 2); built with default flags (glibc expf). */
void bench_pe_div_term(float *div, size_t d_model);

/* glibc sinf/cosf, one element at a time, default flags: what a plain C
   port of the PyTorch module gives. */
void bench_pe_table_libm(float *out, size_t n_pos, size_t d_model, float *div);

/* SLEEF's scalar Sleef_sincosf_u10 called once per angle (its generic
   entry point, which picks SLEEF's best scalar code for the CPU): what
   "link SLEEF instead of libm" gives a plain loop.  Default flags. */
void bench_pe_table_sleef_scalar(float *out, size_t n_pos, size_t d_model, float *div);

#if PEAK_BENCH_SLEEF_AVX512
/* Sleef_sincosf16_u10avx512f on 16 angles at a time.  Needs AVX-512 F/DQ/BW/VL. */
void bench_pe_table_sleef_avx512(float *out, size_t n_pos, size_t d_model, float *div);
/* The same with Sleef_sincosf16_u35avx512f (<= 3.5 ULP, faster). */
void bench_pe_table_sleef_u35_avx512(float *out, size_t n_pos, size_t d_model, float *div);
#endif

#if PEAK_BENCH_SLEEF_AVX2
/* Sleef_sincosf8_u10avx2 on 8 angles at a time.  Needs AVX2 and FMA. */
void bench_pe_table_sleef_avx2(float *out, size_t n_pos, size_t d_model, float *div);
#endif

#if PEAK_BENCH_LIBMVEC_AVX512
/* glibc's vector math (libmvec, _ZGVeN16v_sinf / _cosf) reached the way a
   user reaches it: a plain loop that GCC auto-vectorises under
   -O3 -ffast-math (baseline-libmvec.c).  Needs AVX-512 F/DQ/BW/VL. */
void bench_pe_table_libmvec_avx512(float *out, size_t n_pos, size_t d_model, float *div);
#endif

#if PEAK_BENCH_LIBMVEC_AVX2
/* The same loop built for AVX2 + FMA (_ZGVdN8v_sinf / _cosf). */
void bench_pe_table_libmvec_avx2(float *out, size_t n_pos, size_t d_model, float *div);
#endif

#endif /* PEAK_BENCH_BASELINE_PE_TABLE_H */
