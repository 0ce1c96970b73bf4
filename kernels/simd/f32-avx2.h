/*
 * f32-avx2.h - the AVX2 tier's row ends: lane masks for loads, and the
 * store of a partial vector.
 *
 * Stores: full vectors go through plain (or streaming) stores and a row
 * end through peak_avx2_store_first, never VMASKMOVPS.  On AMD Zen 3 a
 * VMASKMOVPS store into L1 costs 3.9-4.8 ns, a plain 32-byte store 0.4-0.6
 * and the 4 + 2 + 1 sequence below 1.3-1.8 (doc/perf-notes.md, "AVX2
 * stores"); on Intel the masked store is cheap.  The sequence writes
 * exactly p[0 .. n), in address order, the bytes a masked store would, so
 * it also suits in-place rows, where an overlapping full store would
 * re-read an already overwritten source.
 *
 * Loads keep VMASKMOVPS (peak_avx2_first_lanes): the masked load is not
 * penalised like the store, and it reads nothing past the row.
 *
 * Header-only, static inline: AVX2 files only (the AVX-512 tier's mask
 * registers make its masked stores cheap).
 */
#ifndef PEAK_F32_AVX2_H
#define PEAK_F32_AVX2_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>

/* -1 then 0: 8 lanes from peak_avx2_lane_table + 8 - n set the first n. */
static const int32_t peak_avx2_lane_table[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                 0,  0,  0,  0,  0,  0,  0,  0};

/* A VMASKMOVPS mask with lanes 0 .. n-1 set, n <= 8. */
static inline __m256i peak_avx2_first_lanes(size_t n)
{
    return _mm256_loadu_si256((const __m256i *)(peak_avx2_lane_table + 8 - n));
}

/* p[0 .. n) = lanes 0 .. n-1 of x, n < 4: a 2-lane and a 1-lane store. */
static inline void peak_sse_store_first(float *p, __m128 x, size_t n)
{
    if (n & 2) {
        _mm_storel_pi((__m64 *)p, x);
        x = _mm_movehl_ps(x, x);
        p += 2;
    }
    if (n & 1)
        _mm_store_ss(p, x);
}

/* p[0 .. n) = lanes 0 .. n-1 of v, n < 8; nothing else is written. */
static inline void peak_avx2_store_first(float *p, __m256 v, size_t n)
{
    __m128 x = _mm256_castps256_ps128(v);
    if (n & 4) {
        _mm_storeu_ps(p, x);
        x = _mm256_extractf128_ps(v, 1);
        p += 4;
    }
    peak_sse_store_first(p, x, n & 3);
}

#endif /* PEAK_F32_AVX2_H */
