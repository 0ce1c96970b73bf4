/*
 * shim.h - force-included (cc -include) into every translation unit of the
 * check-identical driver: the fuzz harnesses, the unit-test programs and
 * driver.c itself.
 *
 * It renames each of the 16 compared public functions of include/peak.h
 * (peak.map; not the thread-pool functions) to a chk_ wrapper before
 * peak.h is seen, so peak.h declares the wrappers with the very
 * prototypes of the public functions, and every public call
 * a harness or test makes goes to driver.c.  The wrapper runs the
 * candidate library and the reference library (both dlopen'ed) on
 * identical copies of the call's output bytes and compares them.
 * Internal functions (peak_kernels_for, peak_isa_parse, ...) are not
 * renamed: the tests get them from the reference's static libpeak.a and
 * they are not compared (not public API).
 */
#ifndef CHECK_IDENTICAL_SHIM_H
#define CHECK_IDENTICAL_SHIM_H

#define peak_add_layernorm chk_add_layernorm
#define peak_attention chk_attention
#define peak_attention_workspace_size chk_attention_workspace_size
#define peak_embed_pe chk_embed_pe
#define peak_exp chk_exp
#define peak_isa_active chk_isa_active
#define peak_isa_force chk_isa_force
#define peak_isa_name chk_isa_name
#define peak_isa_reason chk_isa_reason
#define peak_isa_reset chk_isa_reset
#define peak_isa_supported chk_isa_supported
#define peak_pe_add chk_pe_add
#define peak_pe_table chk_pe_table
#define peak_softmax chk_softmax
#define peak_status_string chk_status_string
#define peak_version chk_version

#endif
