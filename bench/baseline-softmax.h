/*
 * baseline-softmax.h - what peak_softmax is measured against, shared by the
 * benchmark (bench-softmax.c) and the accuracy report (accuracy.c).
 * x and y are [rows, L] row-major, out of place.  causal: row r sees keys
 * 0 .. r % L (the top-left causal mask of rows*L/L heads stacked), zeros
 * after.
 */
#ifndef PEAK_BENCH_BASELINE_SOFTMAX_H
#define PEAK_BENCH_BASELINE_SOFTMAX_H

#include <stddef.h>

/* max, sum of expf(x - max), scale: the loop a user writes; causal rows
   stop at the diagonal too.  Default flags. */
void bench_softmax_expf_loop(float *y, const float *x, size_t rows, size_t L, int causal);

#if PEAK_BENCH_ONEDNN
/* One call of oneDNN's softmax primitive (forward inference, axis 1 of a
   [rows, L] f32 tensor), created and destroyed inside: for accuracy, not
   for timing (bench-softmax.c keeps its primitive across iterations).  No
   mask: the caller writes -inf where keys are masked.  Returns 0 on
   success; impl receives the implementation's name. */
int bench_softmax_onednn_once(float *y, const float *x, size_t rows, size_t L, const char **impl);
#endif

#endif /* PEAK_BENCH_BASELINE_SOFTMAX_H */
