/*
 * bench-util.c - the checks every family's benchmark file shares (bench.h).
 */
#include "bench.h"

#include "internal.h"
#include "peak.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* kernels.inc as data: per operation, its family and which tiers have a
   kernel of their own (columns in peak_isa order). */
static const struct {
    const char *family;
    unsigned char own[4];
} bench_kernel_list[] = {
#define PEAK_KERNEL(family, op, type, k_scalar, k_avx2, k_avx512, k_neon) \
    {#family, {k_scalar, k_avx2, k_avx512, k_neon}},
#include "kernels.inc"
#undef PEAK_KERNEL
};

bool bench_tier_has_kernel(const char *family, peak_isa isa)
{
    for (size_t i = 0; i < sizeof bench_kernel_list / sizeof bench_kernel_list[0]; i++)
        if (strcmp(bench_kernel_list[i].family, family) == 0 && bench_kernel_list[i].own[isa])
            return true;
    return false;
}

const char *bench_tier_unavailable(peak_isa isa)
{
    if (peak_kernels_for(isa) == NULL)
        return "isa unsupported: not compiled into this build";
    if (!peak_isa_supported(isa))
        return "isa unsupported: not available on this CPU/OS";
    return NULL;
}

/* The baselines ask the compiler runtime rather than peak: a bug in the
   detection under test must not decide whether its yardstick runs.  libgcc
   also checks XCR0, so a kernel without ZMM state support is not reported
   as AVX-512 capable. */
int bench_cpu_avx512(void)
{
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
#else
    return 0;
#endif
}

int bench_cpu_avx2(void)
{
#if defined(__x86_64__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

size_t bench_thread_counts(const int64_t **counts)
{
    static int64_t list[16] = {1, 2};
    static size_t n;
    if (!n) {
        n = 2;
        const char *env = getenv("PEAK_BENCH_THREADS");
        if (env && *env) {
            size_t k = 0;
            char *end;
            for (const char *p = env; *p && k < sizeof list / sizeof list[0]; p = end) {
                const long t = strtol(p, &end, 10);
                if (end == p || t < 1 || t > 4096)
                    break;
                list[k++] = t;
                if (*end == ',')
                    end++;
            }
            n = k ? k : 2;
            if (!k)
                list[0] = 1, list[1] = 2;
        }
    }
    *counts = list;
    return n;
}

const peak_threadpool *bench_pool(size_t threads)
{
    /* One pool per thread count, kept (and its threads parked) until exit. */
    static struct {
        size_t threads;
        peak_threadpool *pool;
    } made[16];
    for (size_t k = 0; k < sizeof made / sizeof made[0]; k++) {
        if (made[k].pool && made[k].threads == threads)
            return made[k].pool;
        if (!made[k].pool) {
            if (peak_threadpool_create(threads, &made[k].pool) != PEAK_OK)
                return NULL;
            made[k].threads = threads;
            return made[k].pool;
        }
    }
    return NULL;
}

typedef struct bench_copy {
    char *dst;
    const char *src;
    size_t bytes, step;
} bench_copy;

static void bench_copy_part(void *arg, size_t t)
{
    const bench_copy *c = arg;
    const size_t lo = t * c->step < c->bytes ? t * c->step : c->bytes;
    const size_t hi = lo + c->step < c->bytes ? lo + c->step : c->bytes;
    memcpy(c->dst + lo, c->src + lo, hi - lo);
}

void bench_memcpy_on(void *dst, const void *src, size_t bytes, const peak_threadpool *pool)
{
    const size_t parts = peak_threadpool_workers(pool);
    if (parts <= 1 || !pool->run) {
        memcpy(dst, src, bytes);
        return;
    }
    bench_copy c = {dst, src, bytes, ((bytes + parts - 1) / parts + 63) & ~(size_t)63};
    pool->run(pool->ctx, bench_copy_part, &c, parts);
}

void *bench_alloc(size_t bytes)
{
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

void bench_fill_scores(float *x, size_t n)
{
    uint64_t s = 0x5eed;
    for (size_t k = 0; k < n; k++) {
        double u = 0.0;
        for (int t = 0; t < 4; t++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            u += (double)(s >> 11) * 0x1p-53;
        }
        x[k] = (float)((u - 2.0) * 5.0);
    }
}

void bench_fill_uniform(float *x, size_t n, uint64_t seed, float lo, float hi)
{
    for (size_t k = 0; k < n; k++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[k] = lo + (hi - lo) * (float)((double)(seed >> 40) * 0x1p-24);
    }
}
