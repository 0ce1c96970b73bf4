/*
 * exp-avx512.c - peak_exp and peak_exp2 over arrays, 16 at a time (the
 * loop: exp-body.h; the functions, their method and accuracy:
 * exp-avx512.h).  The tail is a masked load and store.
 */
#include "internal.h"
#include "avx512/exp-avx512.h"

void peak_f32_exp__avx512(float *y, const float *x, size_t n) { peak_exp_map(y, x, n, false); }
void peak_f32_exp2__avx512(float *y, const float *x, size_t n) { peak_exp_map(y, x, n, true); }
