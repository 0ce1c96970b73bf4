/*
 * convert-neon.c - peak_convert on the neon tier: convert-body.h's loops over
 * simd/f32-neon.h's 16-bit loads and stores.
 */
#include "simd/f32-neon.h"
#include "convert-body.h"
