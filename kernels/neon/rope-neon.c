/*
 * rope-neon.c - the rotary embedding with NEON (AArch64 AdvSIMD): 4 floats, 2 doubles a vector: rope-body.h over
 * simd/f32-neon.h.  Algorithm and bits: rope.h.
 */
#include "simd/f32-neon.h"

#include "rope-body.h"
