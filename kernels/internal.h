/*
 * internal.h - what the kernels, the dispatcher and the tests share.
 *
 * Public functions live in kernels/dispatch/api.c: they validate every
 * argument, then hand the call to its family's scheduler
 * (schedule/schedule.h), which cuts it into work items and runs the slots
 * of the active peak_kernels row on them.  Kernels may therefore assume
 * valid, non-overlapping arguments and only assert(); a kernel computes the
 * part of a call it is given (rows, positions, elements), and what depends
 * on the whole call (streaming stores, for one) arrives as an argument.
 *
 * Kernel symbols are peak_f32_<family>__<isa> ("what__how", as XNNPACK): the
 * family says what is computed, the suffix which instruction set computes it.
 */
#ifndef PEAK_INTERNAL_H
#define PEAK_INTERNAL_H

#include "peak.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PEAK_INTERNAL __attribute__((visibility("hidden")))

/* v is +0 or -0, decided on the bits: under MXCSR.DAZ (callers built with
   -ffast-math run with it) a subnormal compares equal to 0.0f, which must
   not make a tiny scale "the default" (found by tests/fuzz). */
static inline bool peak_f32_is_zero(float v)
{
    union {
        float f;
        uint32_t u;
    } b = {v};
    return (b.u & 0x7fffffffu) == 0;
}

/* One prefetch per cache line of the bytes [p, p + bytes): for reading
   into L1, into L2 only, or for writing.  A hint, nothing more: p need not
   be readable. */
enum peak_pf { PEAK_PF_L1, PEAK_PF_L2, PEAK_PF_WRITE };

static inline void peak_prefetch_bytes(const void *p, size_t bytes, enum peak_pf how)
{
    const uintptr_t end = (uintptr_t)p + bytes;
    for (uintptr_t a = (uintptr_t)p & ~(uintptr_t)63; a < end; a += 64) {
        if (how == PEAK_PF_WRITE)
            __builtin_prefetch((const void *)a, 1, 3);
        else if (how == PEAK_PF_L2)
            __builtin_prefetch((const void *)a, 0, 2);
        else
            __builtin_prefetch((const void *)a, 0, 3);
    }
}

/* The same for the floats p[0 .. n). */
static inline void peak_prefetch(const float *p, size_t n, enum peak_pf how)
{
    peak_prefetch_bytes(p, n * sizeof(float), how);
}

/* Keeps the stores before and after it in program order.  GCC schedules
   an unrolled loop's first store after the others (offsets 32, 64, 96,
   then 0).  Where two stores share a cache line that matters: the store
   buffer merges consecutive stores to one line before they commit, and a
   store that goes back to an earlier line breaks the run.  On the Sapphire
   Rapids-class cores we measure on, the AVX2 embedding row (32-byte stores)
   into L2-resident memory took 1.5-2x as long in GCC's order as in address
   order; 64-byte AVX-512 stores, one per line, measured the same in either
   order.  A compiler barrier costs no instruction. */
static inline void peak_store_in_order(void)
{
    __asm__ volatile("" ::: "memory");
}

/* ---- kernel signatures (arguments already validated) -------------------- */

/* The sinusoid kernels take a part of the row: the columns of frequencies
   f0 .. f1-1 (f0 a multiple of PEAK_PE_CHUNK, pe-table.h; f1 beyond the
   row's last frequency, such as PEAK_PE_FREQ_END, means to its end), so
   that the scheduler can cut a call by columns as well as by positions
   (schedule/schedule-pe.c: a part of the rows would redo the per-call
   sincos tables).  The padding column of an odd split d_model belongs to
   the part that reaches the row's end.  A kernel does not loop beyond the
   positions and frequencies it is given. */
#define PEAK_PE_FREQ_END SIZE_MAX

/* Rows pos0 .. pos0+n_pos-1 of the table into out (row stride ld_out), the
   columns of frequencies [f0, f1).  params is never NULL.  stream: the
   whole public call's table is large (peak_pe_streams in pe-table.h):
   write it with non-temporal stores where aligned vectors allow, fenced
   before the kernel returns. */
typedef void (*peak_pe_table_fn)(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model,
                                 size_t pos0, const peak_pe_params *params, size_t f0, size_t f1,
                                 bool stream);

/* The rows driver's consumer (pe-table-driver.h): rows t0 .. t1-1 of the
   call have their PE columns [c0, c1) in scratch[(t - t0) * ld_scratch +
   c0 .. + c1) (rows with a negative position: nothing, skip them). */
typedef void (*peak_pe_sink_fn)(void *ctx, size_t t0, size_t t1, size_t c0, size_t c1);

/* The table's rows a scratch block at a time, each block handed to sink
   while it is in L1 (pe-table-driver.h's peak_pe_rows_run: the table's
   bits, and its sincos tables kept across the blocks): scratch holds
   scratch_rows rows of d_model floats, ld_scratch apart; row t at
   position pos[t] (pos != NULL) or pos0 + t; the columns of frequencies
   [f0, f1).  For the consumers of PE rows that have no float32 table to
   write them to (a 16-bit table, PE on the fly). */
typedef void (*peak_pe_rows_fn)(float *scratch, size_t scratch_rows, size_t ld_scratch,
                                size_t n_rows, const int64_t *pos, size_t pos0, size_t d_model,
                                const peak_pe_params *params, size_t f0, size_t f1,
                                peak_pe_sink_fn sink, void *ctx);

/* x[b,s,:] += PE(pos0+s,:) in the columns of frequencies [f0, f1) (see
   above); pe == NULL: on the fly.  params is never NULL (with a table, only
   its layout is read, to find a part's columns). */
typedef void (*peak_pe_add_fn)(float *x, ptrdiff_t batch_stride, ptrdiff_t ld_x, size_t batch,
                               size_t seq_len, size_t d_model, size_t pos0, const float *pe,
                               const peak_pe_params *params, size_t f0, size_t f1);

/* Positions are resolved by the caller (schedule/schedule-embedding.c)
   into pos[t] (int64, >= 0, or -1 for "no PE", the fairseq pad token).  A call covers batch sequences of
   n_tokens tokens that share those positions: token t of sequence b is
   ids[b * seq_stride + t] and goes to out row b * seq_stride + t (batch 1:
   a plain run of tokens, seq_stride unused).  Sharing lets a tier read a PE
   row once for the whole batch.  stream: the whole public call's output is
   large (peak_embedding_streams in embedding.h), so write it with non-temporal
   stores where aligned vectors allow, fenced before the kernel returns; the
   scheduler decides because it cuts one large call into many work items.
   The table and out are of desc's table_type and out_type, a pair the tier
   takes (peak_embedding_kernel_takes in embedding.h); ld_out in elements. */
typedef void (*peak_embed_pe_fn)(void *out, ptrdiff_t ld_out, const int32_t *ids,
                                 const int64_t *pos, size_t n_tokens, size_t batch,
                                 size_t seq_stride, const peak_embed_desc *desc, bool stream);

/* Rows row0 .. row0+rows-1 of desc, the rows numbered in memory order of
   [b, h, i] (row (b*heads + h)*q_len + i); x and y point at row row0, and
   the strides place the others relative to it (peak_softmax_row_offset), so
   the scheduler can hand a kernel rows it staged in a buffer of their own;
   float32 whatever desc's types.  desc->scale is resolved (never 0).
   stream: the whole public call is large (peak_softmax_streams in
   softmax.h): non-temporal stores, fenced before the kernel returns. */
typedef void (*peak_softmax_fn)(float *y, const float *x, const peak_softmax_desc *desc,
                                size_t row0, size_t rows, bool stream);

/* Elements from row 0 to row `row` of a [b, h, i] tensor with strides s. */
static inline ptrdiff_t peak_softmax_row_offset(const peak_softmax_desc *d, const ptrdiff_t *s,
                                                size_t row)
{
    const size_t i = row % d->q_len, bh = row / d->q_len;
    return (ptrdiff_t)(bh / d->heads) * s[0] + (ptrdiff_t)(bh % d->heads) * s[1] +
           (ptrdiff_t)i * s[2];
}

/* y[j] = e^x[j] (peak_exp), or 2^x[j] for x[j] <= 1 as the attention kernels
   compute it (exp2: for the tests and benchmarks); y may equal x. */
typedef void (*peak_exp_fn)(float *y, const float *x, size_t n);

/* y[j] = x[j] converted from x_type to y_type for j < n (peak_convert:
   every pair of peak_dtype, equal types a copy; y != x unless the types
   are equal).  The scalar tier's bits are convert.h's; every tier's
   equal them.  stream: a large float32 y (peak_convert_streams in
   convert.h, decided for the whole call): non-temporal stores, fenced
   before the kernel returns; the same bits. */
typedef void (*peak_convert_fn)(void *y, peak_dtype y_type, const void *x, peak_dtype x_type,
                                size_t n, bool stream);

/* Attention (peak_attention): the scheduler (schedule/schedule-attention.c)
   cuts a call into parts and runs a tier's block or rows kernel on each,
   with the scratch of the worker that runs it.  desc has kv_heads,
   v_head_dim and scale resolved (no zeros).  The rows of kv head kvh are
   numbered position-major: row R < heads / kv_heads * q_len is query head
   kvh * group + R % group at position R / group (group = heads /
   kv_heads), so that a block of rows holds the heads of a GQA group. */

/* One part: rows first .. first + rows - 1 of each of kv heads kvh ..
   kvh + nkvh - 1 of batch b, against keys [key_lo, key_hi) only (inside
   it, each row's mask still applies).  Its O rows and lse go where desc
   says (o_stride, lse, lse_stride): the call's own outputs, or a split-KV
   partial's, which the scheduler merges through the lse.  next_* name the
   part that follows in the call's order (next_b == SIZE_MAX: none), whose
   Q rows and first keys a kernel may prefetch; only a hint. */
typedef struct peak_attention_part {
    size_t b, kvh, nkvh, first, rows;
    size_t key_lo, key_hi;
    size_t next_b, next_kvh, next_first, next_key_lo;
} peak_attention_part;

/* What a tier tells the scheduler for a call. */
typedef struct peak_attention_geometry {
    size_t block_rows;    /* rows of a block kernel's part, at most */
    size_t row_path_rows; /* parts of fewer rows per kv head take the rows
                             kernel (0: never) */
    size_t row_states;    /* nkvh * rows of a rows kernel's part, at most */
    size_t key_tile;      /* keys per tile: split-KV chunks are multiples */
    bool split_keys;      /* parts over chunks of the keys may be merged
                             (false: the tier rounds once, the scalar one) */
    /* The cost model, in ns per element of (Dh + Dv): a query row against
       a key on the tile path (tile_ns) and on the row path (row_ns), and
       a K and V row the row path reads (kv_ns, once per kv head). */
    double tile_ns, row_ns, kv_ns;
    size_t slot_bytes;    /* scratch per worker (64-byte multiple, at least
                             PEAK_ATTENTION_SLOT_HEAD); SIZE_MAX & ~63 when
                             it does not fit in a size_t */
} peak_attention_geometry;

/* The first bytes of every worker's scratch slot: which (batch, kv head)
   the packed K/V tiles kept there belong to (valid 0: none).  The
   scheduler zeroes it before a call's parts run, so that nothing of an
   earlier call is taken; within a call a hit only skips a copy, so which
   worker ran what before never changes a bit. */
typedef struct peak_attention_slot {
    size_t valid, b, kvh;
} peak_attention_slot;
#define PEAK_ATTENTION_SLOT_HEAD 64

typedef void (*peak_attention_geometry_fn)(const peak_attention_desc *desc,
                                           peak_attention_geometry *geometry);
/* The tile path: one kv head (nkvh 1), row_path_rows <= rows <=
   block_rows.  slot: slot_bytes, 64-byte aligned, its head as above.
   Q and O are float32 (the scheduler stages 16-bit ones through the
   workspace: q_type and o_type are PEAK_F32 here); K and V are of
   desc->k_type and desc->v_type, read where they are. */
typedef void (*peak_attention_block_fn)(float *o, const float *q, const void *k, const void *v,
                                        const peak_attention_desc *desc,
                                        const peak_attention_part *part, void *slot);
/* The row path: nkvh * rows <= row_states, rows < row_path_rows. */
typedef peak_attention_block_fn peak_attention_rows_fn;

/* The rows at y, sum, x and r (a scheduler's item: its first row there).
   rows_after: rows of the call that follow them at the same strides, whose
   x and r the kernel may prefetch (a hint, as within its own rows).
   stream: the whole public call is large (peak_layernorm_streams in
   layernorm.h): non-temporal stores where a row is aligned, fenced before
   the kernel returns. */
typedef void (*peak_add_layernorm_fn)(void *y, ptrdiff_t ld_y, void *sum, ptrdiff_t ld_sum,
                                      const void *x, ptrdiff_t ld_x, const void *r,
                                      ptrdiff_t ld_r, const float *gamma, const float *beta,
                                      size_t rows, size_t d_model, float eps, peak_dtype type,
                                      size_t rows_after, bool stream);


/* RoPE (rope.h): the call's frequencies are computed once (struct
   peak_rope_freqs, read-only for every worker).  rope_cache: rows t <
   n_rows of cos/sin into out + t * ld_out, row t at position pos[t]
   (pos != NULL, each >= 0) or pos0 + t. */
struct peak_rope_freqs;
typedef void (*peak_rope_cache_fn)(float *out, ptrdiff_t ld_out, size_t n_rows, size_t pos0,
                                   const int64_t *pos, const struct peak_rope_freqs *f);
/* rope_apply: tokens l0 .. l1-1 of sequence b, all heads, cos/sin from
   desc->cache or (cache NULL) computed by the same tier's rope_cache from
   f; with a cache only f->n (rotary_dim / 2) is set.  stream: the rotated
   halves of y's heads that start on a vector boundary may be written with
   non-temporal stores (the scheduler decides for the whole call,
   peak_rope_streams); the same bits either way. */
typedef void (*peak_rope_apply_fn)(float *y, const float *x, const peak_rope_desc *desc,
                                   const struct peak_rope_freqs *f, size_t b, size_t l0,
                                   size_t l1, bool stream);

/* ---- the kernels, per tier: kernels.inc --------------------------------- */

/* The signatures of the operations that have no typedef of their own. */
typedef peak_exp_fn peak_exp2_fn;

/* peak_<type>_<op>__<tier> for each tier with a 1 in kernels.inc.  A
   pointer typedef gives the function type through __typeof__. */
#define PEAK_DECLARE_0(type, op, tier)
#define PEAK_DECLARE_1(type, op, tier) \
    PEAK_INTERNAL __typeof__(*(peak_##op##_fn)0) peak_##type##_##op##__##tier;
#define PEAK_KERNEL(family, op, type, k_scalar, k_avx2, k_avx512, k_neon) \
    PEAK_DECLARE_##k_scalar(type, op, scalar) PEAK_DECLARE_##k_avx2(type, op, avx2) \
    PEAK_DECLARE_##k_avx512(type, op, avx512) PEAK_DECLARE_##k_neon(type, op, neon)
#include "kernels.inc"
#undef PEAK_KERNEL

/* ---- the dispatch table: one complete row per tier ---------------------- */
/* One slot per operation of kernels.inc.  A tier without its own kernel
   for an operation points at the scalar kernel (BLIS's "reference first,
   then override"), so no slot is ever NULL. */
typedef struct peak_kernels {
    peak_isa isa;
#define PEAK_KERNEL(family, op, type, k_scalar, k_avx2, k_avx512, k_neon) peak_##op##_fn op;
#include "kernels.inc"
#undef PEAK_KERNEL
} peak_kernels;

PEAK_INTERNAL extern const peak_kernels peak_kernels_scalar;
#if PEAK_HAVE_AVX2
PEAK_INTERNAL extern const peak_kernels peak_kernels_avx2;
#endif
#if PEAK_HAVE_AVX512
PEAK_INTERNAL extern const peak_kernels peak_kernels_avx512;
#endif
#if PEAK_HAVE_NEON
PEAK_INTERNAL extern const peak_kernels peak_kernels_neon;
#endif

/* The active row (initialises dispatch on first use). */
PEAK_INTERNAL const peak_kernels *peak_active_kernels(void);
/* The row of a given tier if compiled in, else NULL (tests call kernels of
   every tier directly through this). */
PEAK_INTERNAL const peak_kernels *peak_kernels_for(peak_isa isa);

/* ---- x86 detection as a pure function (tests feed mocked registers) ----- */
typedef struct peak_x86_regs {
    uint32_t max_leaf;   /* CPUID.0:EAX                                     */
    uint32_t leaf1_ecx;  /* CPUID.1:ECX                                     */
    uint32_t leaf7_ebx;  /* CPUID.(7,0):EBX (0 when max_leaf < 7)           */
    uint64_t xcr0;       /* XGETBV(0); only meaningful when OSXSAVE is set  */
    uint32_t leaf7_edx;  /* CPUID.(7,0):EDX (0 when max_leaf < 7)           */
    uint32_t leaf7_1_eax; /* CPUID.(7,1):EAX (0 when CPUID.(7,0):EAX < 1)   */
} peak_x86_regs;

/* The best x86 tier these registers allow; *why gets a static explanation. */
PEAK_INTERNAL peak_isa peak_x86_decide(const peak_x86_regs *r, const char **why);
/* Reads the real registers (never runs XGETBV when OSXSAVE is clear). */
PEAK_INTERNAL void peak_x86_read(peak_x86_regs *r);

/* The peak_cpu_feature flags these registers allow. */
PEAK_INTERNAL unsigned peak_x86_features(const peak_x86_regs *r);

/* AArch64: the tier allowed by getauxval(AT_HWCAP). */
PEAK_INTERNAL peak_isa peak_arm_decide(unsigned long hwcap, const char **why);
/* The peak_cpu_feature flags of getauxval(AT_HWCAP) and (AT_HWCAP2). */
PEAK_INTERNAL unsigned peak_arm_features(unsigned long hwcap, unsigned long hwcap2);

/* Parses a PEAK_ISA value: returns 1 and sets *isa for a known name
   (case-insensitive), 0 otherwise. */
PEAK_INTERNAL int peak_isa_parse(const char *s, peak_isa *isa);
/* The tier to use given the detected best tier and an optional request:
   the lower of the two, then down to a tier compiled in. */
PEAK_INTERNAL peak_isa peak_isa_cap(peak_isa detected, const char *env, const char **note);

#endif /* PEAK_INTERNAL_H */
