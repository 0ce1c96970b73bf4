/*
 * exp-neon.c - peak_exp and peak_exp2 over arrays on AdvSIMD (the loop:
 * exp-body.h; the functions, their method and accuracy: exp-neon.h).
 * Same bits as the scalar and x86 tiers.  AdvSIMD has no masked loads, so
 * the last n % 4 floats go through peak_vf_load_first's stack buffer.
 */
#include "internal.h"
#include "neon/exp-neon.h"

void peak_f32_exp__neon(float *y, const float *x, size_t n) { peak_exp_map(y, x, n, false); }
void peak_f32_exp2__neon(float *y, const float *x, size_t n) { peak_exp_map(y, x, n, true); }
