/*
 * exp-avx2.c - peak_exp and peak_exp2 over arrays, 8 at a time (the loop:
 * exp-body.h; the functions, their method and accuracy: exp-body.h and
 * exp.h).  The tail is a VMASKMOVPS load and plain stores
 * (simd/f32-avx2.h: VMASKMOVPS stores are slow on Zen 3).
 */
#include "internal.h"
#include "avx2/exp-avx2.h"

void peak_f32_exp__avx2(float *y, const float *x, size_t n) { peak_exp_map(y, x, n, false); }
void peak_f32_exp2__avx2(float *y, const float *x, size_t n) { peak_exp_map(y, x, n, true); }
