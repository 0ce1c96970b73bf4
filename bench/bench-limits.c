/*
 * bench-limits.c - the machine's limits, measured in the same run as the
 * kernels so that "fraction of the limit" compares numbers taken under the
 * same load on this shared machine.
 *
 * Bandwidth, in and out of cache (bytes/s count every byte read and every
 * byte written, as the kernel benchmarks do):
 *   memcpy/bytes:<n>  glibc memcpy of n bytes between two buffers (2n bytes
 *                     moved a call)
 *   read/bytes:<n>    a sum over n bytes (AVX-512, AVX2 or scalar: the
 *                     widest the CPU has), n bytes a call
 *   write/bytes:<n>   glibc memset of n bytes, n bytes a call
 * n = 16 KiB (L1), 1 MiB (L2), 4, 16 and 64 MiB (beyond L2, within a large
 * L3, as far as a shared VM's L3 holds them) and 512 MiB (beyond any L3 this
 * project meets, this VM's 300 MiB included).  bench/report.py takes the
 * best of the three kinds at the smallest size that holds a kernel's
 * working set as that kernel's bandwidth ceiling.
 *   memcpy/bytes:<n>/threads:<t>  the same copy split into t 64-byte
 *                     aligned parts, one per worker of a peak_threadpool_create
 *                     pool of t (the pool the kernels' thread variants run
 *                     on, bench_pool): the t-thread floor of the
 *                     memory-bound families' /threads:<t> variants (t from
 *                     bench_thread_counts: 1 and 2 unless PEAK_BENCH_THREADS
 *                     says otherwise).
 *
 * Compute: fma_peak/<tier> is a register-only loop of 12 independent
 * chains (enough to cover 4-cycle latency on 2 ports), reported as
 * GFLOPs (2 FLOPs per FMA lane):
 *   scalar  x = x * m + a as a separate mulss and addss (peak's scalar tier
 *           is built without FMA and with -ffp-contract=off): 2 FLOPs a pair
 *   avx2    vfmadd on 8 lanes;  avx512  vfmadd on 16 lanes.
 * That is the single-core ceiling the roofline and the attention's
 * "fraction of peak" use, tier by tier.
 */
#include "bench.h"
#include "gbench-shim.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bandwidth --------------------------------------------------------------- */

typedef enum bw_kind { BW_MEMCPY, BW_READ, BW_WRITE } bw_kind;

static const bw_kind bw_kinds[] = {BW_MEMCPY, BW_READ, BW_WRITE};
static const char *const bw_names[] = {"memcpy", "read", "write"};
static const int64_t bw_sizes[] = {16 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20, 512 << 20};

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static float read_avx512(const float *p, size_t n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t k = 0;
    for (; k + 64 <= n; k += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + k));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + k + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + k + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + k + 48));
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

__attribute__((target("avx2"))) static float read_avx2(const float *p, size_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t k = 0;
    for (; k + 32 <= n; k += 32) {
        a0 = _mm256_add_ps(a0, _mm256_load_ps(p + k));
        a1 = _mm256_add_ps(a1, _mm256_load_ps(p + k + 8));
        a2 = _mm256_add_ps(a2, _mm256_load_ps(p + k + 16));
        a3 = _mm256_add_ps(a3, _mm256_load_ps(p + k + 24));
    }
    float t[8];
    _mm256_storeu_ps(t, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#endif

static float read_scalar(const float *p, size_t n)
{
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    for (size_t k = 0; k + 4 <= n; k += 4) {
        a0 += p[k];
        a1 += p[k + 1];
        a2 += p[k + 2];
        a3 += p[k + 3];
    }
    return a0 + a1 + a2 + a3;
}

/* pool: the memcpy's threads (NULL: the calling thread). */
static void bandwidth_body(gb_state *st, bw_kind kind, const peak_threadpool *pool)
{
    const size_t n = (size_t)gb_range(st, 0);
    void *src = bench_alloc(n), *dst = kind == BW_MEMCPY ? bench_alloc(n) : NULL;
    if (!src || (kind == BW_MEMCPY && !dst)) {
        gb_skip_with_error(st, "out of memory");
        goto out;
    }
    memset(src, 0x3c, n); /* faults the pages in */
    if (dst)
        memset(dst, 0, n);
    float (*read)(const float *, size_t) = read_scalar;
    const char *how = "scalar";
#if defined(__x86_64__)
    if (bench_cpu_avx512()) {
        read = read_avx512;
        how = "avx512";
    } else if (bench_cpu_avx2()) {
        read = read_avx2;
        how = "avx2";
    }
#endif
    float sink = 0.0f;
    while (gb_keep_running(st)) {
        switch (kind) {
        case BW_MEMCPY:
            bench_memcpy_on(dst, src, n, pool);
            gb_do_not_optimize(dst);
            break;
        case BW_READ:
            sink += read(src, n / sizeof(float));
            break;
        case BW_WRITE:
            memset(src, (int)gb_iterations(st) & 0x7f, n);
            gb_do_not_optimize(src);
            break;
        }
    }
    gb_do_not_optimize(&sink);
    if (kind == BW_READ)
        gb_set_label(st, how);
    gb_set_bytes_processed(st, gb_iterations(st) * (int64_t)n * (kind == BW_MEMCPY ? 2 : 1));
out:
    free(src);
    free(dst);
}

static void bench_bandwidth(gb_state *st, void *user)
{
    bandwidth_body(st, *(const bw_kind *)user, NULL);
}

/* memcpy/bytes:<n>/threads:<t> */
static void bench_memcpy_threads(gb_state *st, void *user)
{
    (void)user;
    const peak_threadpool *pool = bench_pool((size_t)gb_range(st, 1));
    if (!pool) {
        gb_skip_with_error(st, "no pool: peak_threadpool_create failed (built without pthreadpool?)");
        return;
    }
    bandwidth_body(st, BW_MEMCPY, pool);
}

/* ---- FP32 peak of one core ------------------------------------------------------ */

#define FMA_CHAINS 12
#define FMA_STEPS 4096

/* Separate multiply and add (no contraction: the project builds with
   -ffp-contract=off), as peak's scalar tier computes. */
static float fma_loop_scalar(float seed)
{
    float acc[FMA_CHAINS];
    const float m = 0.999999f, a = 1e-7f;
    for (int i = 0; i < FMA_CHAINS; i++)
        acc[i] = seed + (float)i;
    for (int s = 0; s < FMA_STEPS; s++)
#pragma GCC unroll 12
        for (int i = 0; i < FMA_CHAINS; i++)
            acc[i] = acc[i] * m + a;
    float sum = 0.0f;
    for (int i = 0; i < FMA_CHAINS; i++)
        sum += acc[i];
    return sum;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) static float fma_loop_avx2(float seed)
{
    __m256 acc[FMA_CHAINS];
    const __m256 vm = _mm256_set1_ps(0.999999f), va = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < FMA_CHAINS; i++)
        acc[i] = _mm256_set1_ps(seed + (float)i);
    for (int s = 0; s < FMA_STEPS; s++)
#pragma GCC unroll 12
        for (int i = 0; i < FMA_CHAINS; i++)
            acc[i] = _mm256_fmadd_ps(acc[i], vm, va);
    float out[8], sum = 0.0f;
    for (int i = 1; i < FMA_CHAINS; i++)
        acc[0] = _mm256_add_ps(acc[0], acc[i]);
    _mm256_storeu_ps(out, acc[0]);
    for (int i = 0; i < 8; i++)
        sum += out[i];
    return sum;
}

__attribute__((target("avx512f"))) static float fma_loop_avx512(float seed)
{
    __m512 acc[FMA_CHAINS];
    const __m512 vm = _mm512_set1_ps(0.999999f), va = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < FMA_CHAINS; i++)
        acc[i] = _mm512_set1_ps(seed + (float)i);
    for (int s = 0; s < FMA_STEPS; s++)
#pragma GCC unroll 12
        for (int i = 0; i < FMA_CHAINS; i++)
            acc[i] = _mm512_fmadd_ps(acc[i], vm, va);
    for (int i = 1; i < FMA_CHAINS; i++)
        acc[0] = _mm512_add_ps(acc[0], acc[i]);
    return _mm512_reduce_add_ps(acc[0]);
}
#endif

/* user: lanes (1 scalar, 8 avx2, 16 avx512) */
static void bench_fma_peak(gb_state *st, void *user)
{
    const int lanes = *(const int *)user;
    float (*loop)(float) = fma_loop_scalar;
#if defined(__x86_64__)
    if (lanes == 8)
        loop = fma_loop_avx2;
    if (lanes == 16)
        loop = fma_loop_avx512;
#endif
    if ((lanes == 16 && !bench_cpu_avx512()) || (lanes == 8 && !bench_cpu_avx2())) {
        gb_skip_with_error(st, "isa unsupported");
        return;
    }
    float sink = 0.0f;
    while (gb_keep_running(st))
        sink += loop(sink * 1e-30f);
    gb_do_not_optimize(&sink);
    gb_set_counter(st, "GFLOPs",
                   (double)gb_iterations(st) * FMA_STEPS * FMA_CHAINS * lanes * 2 * 1e-9,
                   GB_COUNTER_RATE);
}

void bench_register_limits(void)
{
    static const char *const arg_names[] = {"bytes"};
    char name[64];
    for (size_t k = 0; k < sizeof bw_kinds / sizeof bw_kinds[0]; k++)
        for (size_t s = 0; s < sizeof bw_sizes / sizeof bw_sizes[0]; s++) {
            snprintf(name, sizeof name, "%s", bw_names[k]);
            gb_bench *b = gb_register(name, bench_bandwidth, (void *)&bw_kinds[k]);
            b = gb_args(b, &bw_sizes[s], 1);
            b = gb_arg_names(b, arg_names, 1);
            if (gb_unit(gb_use_real_time(b), GB_MICROSECOND) == NULL) {
                fprintf(stderr, "bench_peak: cannot register %s\n", name);
                exit(EXIT_FAILURE);
            }
        }
    static const char *const threads_names[] = {"bytes", "threads"};
    const int64_t *threads;
    const size_t n_threads = bench_thread_counts(&threads);
    for (size_t s = 0; s < sizeof bw_sizes / sizeof bw_sizes[0]; s++)
        for (size_t t = 0; t < n_threads; t++) {
            const int64_t args[2] = {bw_sizes[s], threads[t]};
            gb_bench *b = gb_register("memcpy", bench_memcpy_threads, NULL);
            b = gb_arg_names(gb_args(b, args, 2), threads_names, 2);
            if (gb_unit(gb_use_real_time(b), GB_MICROSECOND) == NULL) {
                fprintf(stderr, "bench_peak: cannot register memcpy threads\n");
                exit(EXIT_FAILURE);
            }
        }
    static const int lanes[] = {1, 8, 16};
    static const char *const tiers[] = {"scalar", "avx2", "avx512"};
#if defined(__x86_64__)
    const size_t n_tiers = 3;
#else
    const size_t n_tiers = 1;
#endif
    for (size_t t = 0; t < n_tiers; t++) {
        snprintf(name, sizeof name, "fma_peak/%s", tiers[t]);
        if (gb_unit(gb_use_real_time(gb_register(name, bench_fma_peak, (void *)&lanes[t])),
                    GB_MICROSECOND) == NULL) {
            fprintf(stderr, "bench_peak: cannot register %s\n", name);
            exit(EXIT_FAILURE);
        }
    }
}
