/*
 * layernorm-avx2.c - residual add + LayerNorm with AVX2 + FMA: 8 floats a
 * vector, the code of layernorm-body.h on simd/f32-avx2.h (row ends load
 * with VMASKMOVPS and store with plain stores).  Algorithm, accuracy and
 * memory behaviour: layernorm.h.
 */
#include "simd/f32-avx2.h"

#include "layernorm-body.h"
