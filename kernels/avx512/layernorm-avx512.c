/*
 * layernorm-avx512.c - residual add + LayerNorm with AVX-512 F/DQ: 16
 * floats a vector, the code of layernorm-body.h on simd/f32-avx512.h (row
 * ends are masked loads and stores).  Algorithm, accuracy and memory
 * behaviour: layernorm.h.
 */
#include "simd/f32-avx512.h"

#include "layernorm-body.h"
