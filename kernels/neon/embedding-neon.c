/*
 * embedding-neon.c - x += PE and out = E[id] * scale + PE on AArch64
 * AdvSIMD: 4 floats a vector.  The code is embedding-body.h's; a row end
 * goes through simd/f32-neon.h's 4-float buffer, and a streamed row
 * through plain stores (Neoverse cores switch a stream of full-line writes
 * to no-allocate by themselves, which is what the x86 tiers' streaming
 * stores buy).
 *
 * Expected on a Neoverse V1/V2: memory-bound like the x86 tiers.  Per 16
 * floats the table path issues 8 loads, 4 FMUL, 4 FADD and 4 stores, which
 * the 3 load and 2 store pipes retire in ~3 cycles (~64 bytes a cycle from
 * L1), far above what L2 or DRAM feed one core, so the random E rows
 * (prefetched a few tokens ahead, as on x86) set the pace.  Not measured: no AArch64 hardware
 * here, only qemu.
 */
#include "simd/f32-neon.h"

#include "embedding-body.h"
