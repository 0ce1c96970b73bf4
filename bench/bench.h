/*
 * bench.h - what bench-main.c needs from each kernel family's benchmark file.
 *
 * One registrar per family keeps bench_peak a single binary (one JSON file,
 * one --benchmark_filter namespace) while each family's file stays
 * self-contained.
 */
#ifndef PEAK_BENCH_H
#define PEAK_BENCH_H

#include "peak.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Registers pe_table/<variant>/seq_len:<n>/d_model:<d> for every variant
   and shape (bench-pe-table.c). */
void bench_register_pe_table(void);

/* Registers softmax/<variant>/heads:<H>/L:<n>/causal:<0|1> for every
   variant and shape (bench-softmax.c). */
void bench_register_softmax(void);

/* Registers embedding/<variant>/batch:<B>/seq_len:<S>/... (bench-embedding.c) and
   layernorm/<variant>/rows:<R>/d_model:<D> (bench-layernorm.c). */
void bench_register_embedding(void);
void bench_register_layernorm(void);

/* Registers attention/<variant>/H:<h>/Lq:<n>/Lk:<n>/causal:<0|1>/cold:<0|1> and
   fma_peak/<isa> (bench-attention.c). */
void bench_register_attention(void);

/* Registers exp/<variant>/n:<n> (bench-exp.c) and
   pe_add/<variant>/batch:<B>/seq_len:<S>/d_model:<D>/fly:<0|1>
   (bench-pe-add.c). */
void bench_register_exp(void);
/* Registers convert/<variant>/<from>_<to>/n:<n> (bench-convert.c). */
void bench_register_convert(void);
void bench_register_pe_add(void);
/* Registers rope_apply/<variant>/batch:<B>/seq_len:<L>/heads:<H>/head_dim:128/
   cache:<0|1>/inplace:<0|1>/positions:<0|1> with its memcpy floor, and
   rope_cache/<variant>/n_pos:<n>/rotary_dim:128/mode:<0|1> (bench-rope.c). */
void bench_register_rope(void);

/* Registers the machine's limits measured in the same run (bench-limits.c):
   memcpy/bytes:<n>, read/bytes:<n>, write/bytes:<n> (bandwidth in and out
   of cache), memcpy/bytes:<n>/threads:<t> (the copy split over t threads)
   and fma_peak/<tier> (one core's FP32 FMA rate). */

/* Every family also registers thread variants: its dispatch variant (and
   memcpy, where the family has one) on a pool of t workers, the same name
   and arguments with /threads:<t> appended (bench_thread_counts). */
void bench_register_limits(void);

/* ---- shared helpers (bench-util.c) --------------------------------------- */

/* Whether kernels.inc gives `family` (its spelling there: "pe_table",
   "softmax", ...) a kernel of its own on `isa`.  A tier variant is
   registered only where it does: elsewhere the tier's slot is the scalar
   kernel, which the scalar variant already times. */
bool bench_tier_has_kernel(const char *family, peak_isa isa);

/* NULL if this build, CPU and OS can run peak's `isa` kernels, else why
   not (a message starting "isa unsupported"). */
const char *bench_tier_unavailable(peak_isa isa);
/* 1 if the CPU and OS run AVX-512 F/DQ/BW/VL (resp. AVX2 + FMA) code, asked
   of libgcc rather than of the dispatcher under test: for the baselines. */
int bench_cpu_avx512(void);
int bench_cpu_avx2(void);
/* ---- thread variants ------------------------------------------------------ */

/* The thread counts the thread variants are registered at (names ending
   /threads:<n>): 1 and 2, or the comma-separated list in the environment
   variable PEAK_BENCH_THREADS (e.g. "1,2,4,8" on a larger machine).
   Returns how many; *counts points at them. */
size_t bench_thread_counts(const int64_t **counts);
/* The pool of `threads` workers the thread variants run on, made once by
   peak_threadpool_create() and kept for the process; NULL if it cannot be
   made (a library built without pthreadpool). */
const peak_threadpool *bench_pool(size_t threads);
/* memcpy split into one 64-byte aligned part per worker of pool, each
   part a task of pool->run (NULL, or one worker: a plain memcpy). */
void bench_memcpy_on(void *dst, const void *src, size_t bytes, const peak_threadpool *pool);

/* 64-byte aligned, like a framework's tensor allocator; free() it. */
void *bench_alloc(size_t bytes);
/* n scores as attention would give them: roughly normal (a sum of four
   uniforms), spread ~3, the same sequence every call. */
void bench_fill_scores(float *x, size_t n);
/* n floats uniform in [lo, hi), from a fixed-seed LCG. */
void bench_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi);

#endif /* PEAK_BENCH_H */
