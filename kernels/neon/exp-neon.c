/*
 * exp-neon.c - peak_exp and attention's 2^t over arrays on AdvSIMD (the
 * functions themselves, their method and accuracy: exp-neon.h).  Same bits
 * as the scalar and x86 tiers.
 *
 * AdvSIMD has no masked loads, so the last n % 4 floats go through a
 * 4-float stack buffer: nothing past x[n-1] is read or y[n-1] written, and
 * y == x works since each vector is read before it is written.
 *
 * Expected on a Neoverse V1/V2: compute-bound from L1 at ~1.3 cycle per
 * float for e^x and ~0.7 for 2^t (exp-neon.h); two vectors an iteration,
 * so that two independent Horner chains share the FMA latency.  Not
 * measured: no AArch64 hardware here, only qemu.
 */
#include "internal.h"
#include "neon/exp-neon.h"

#include <assert.h>
#include <string.h>

#define LANES 4

typedef float32x4_t (*vec_fn)(float32x4_t);

static inline __attribute__((always_inline)) void map(float *y, const float *x, size_t n,
                                                      vec_fn f)
{
    size_t j = 0;
    for (; j + 2 * LANES <= n; j += 2 * LANES) {
        const float32x4_t v0 = f(vld1q_f32(x + j));
        const float32x4_t v1 = f(vld1q_f32(x + j + LANES));
        vst1q_f32(y + j, v0);
        vst1q_f32(y + j + LANES, v1);
    }
    if (j + LANES <= n) {
        vst1q_f32(y + j, f(vld1q_f32(x + j)));
        j += LANES;
    }
    if (j < n) {
        float buf[LANES] = {0.0f, 0.0f, 0.0f, 0.0f};
        memcpy(buf, x + j, (n - j) * sizeof(float));
        vst1q_f32(buf, f(vld1q_f32(buf)));
        memcpy(y + j, buf, (n - j) * sizeof(float));
    }
}

void peak_f32_exp__neon(float *y, const float *x, size_t n)
{
    assert(y && x);
    map(y, x, n, peak_neon_exp);
}

void peak_f32_exp2__neon(float *y, const float *x, size_t n)
{
    assert(y && x);
    map(y, x, n, peak_neon_exp2_ftz);
}
