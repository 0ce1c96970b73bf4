/*
 * pe-table-driver.h - the sinusoid table's two drivers, ISA-free and
 * written once: the table (peak_pe_table_run) and the on-the-fly rows of
 * peak_embed_pe and peak_pe_add (peak_pe_rows_run).  They walk positions
 * and column chunks and keep the per-chunk tables; the arithmetic is the
 * including file's, called by name, which it defines before this include:
 *
 *   pe_sincos_chunk(x, s, c)  sin/cos of x[0 .. PEAK_PE_CHUNK), elementwise
 *                             (x and outputs 64-byte aligned);
 *   pe_emit_exact(row, sb, cb, sk, ck, i0, nc, d_model, layout, stream)
 *                             EXACT: one row's frequencies i0 .. i0+nc-1
 *                             from the block (sb, cb) and offset (sk, ck)
 *                             tables, with streaming stores if stream;
 *   pe_emit_torch(row, pf, wf, i0, nc, d_model, layout)
 *                             TORCH_F32: one row at float position pf,
 *                             frequencies wf[0 .. nc).
 *
 * pe-table-body.h defines them for the SIMD tiers, common/pe-ref.c for the
 * scalar one: the same drivers, hence the same rows, blocks and offsets.
 *
 * Both take a part of the row, the frequencies [f0, f1) (internal.h,
 * PEAK_PE_FREQ_END): column chunk outermost, a part is a run of the
 * chunks, each computed exactly as in the whole row.
 */
#ifndef PEAK_PE_TABLE_DRIVER_H
#define PEAK_PE_TABLE_DRIVER_H

#include "pe-table.h"

/* One column chunk's tables: its frequencies (and their floats, TORCH_F32),
   the angles of one sincos chunk, the block base and the offsets. */
typedef struct {
    PEAK_PE_ALIGN double w[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double lo[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double x[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double sb[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double cb[PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double sk[PEAK_PE_BLOCK][PEAK_PE_CHUNK];
    PEAK_PE_ALIGN double ck[PEAK_PE_BLOCK][PEAK_PE_CHUNK];
    PEAK_PE_ALIGN float wf[PEAK_PE_CHUNK];
} peak_pe_tables;

/* Frequencies of the chunk at i0 into tab; returns how many it has. */
static inline size_t peak_pe_chunk_freqs(peak_pe_tables *tab, size_t i0, size_t n_freq,
                                         size_t d_model, const peak_pe_params *params)
{
    const size_t nc = n_freq - i0 < PEAK_PE_CHUNK ? n_freq - i0 : PEAK_PE_CHUNK;
    peak_pe_freqs(tab->w, tab->lo, i0, nc, d_model, params);
    if (params->mode == PEAK_PE_TORCH_F32)
        for (size_t c = 0; c < PEAK_PE_CHUNK; c++)
            tab->wf[c] = (float)tab->w[c];
    return nc;
}

/* The frequencies [f0, f1) of a row of n_freq: where the chunk loop stops,
   after filling (for a part that starts past the first chunk) the first
   chunk's lo[], which every later chunk's frequencies reuse. */
static inline size_t peak_pe_part_start(peak_pe_tables *tab, size_t f0, size_t f1, size_t n_freq,
                                        size_t d_model, const peak_pe_params *params)
{
    if (f0 > 0 && f0 < n_freq)
        peak_pe_chunk_freqs(tab, 0, n_freq, d_model, params);
    return f1 < n_freq ? f1 : n_freq;
}

/* sin/cos of the chunk's angles at position (or offset) p into s, c. */
static inline __attribute__((always_inline)) void
peak_pe_sincos_at(peak_pe_tables *tab, size_t p, double *s, double *c)
{
    for (size_t j = 0; j < PEAK_PE_CHUNK; j++)
        tab->x[j] = (double)p * tab->w[j];
    pe_sincos_chunk(tab->x, s, c);
}

/* Whether a part ending at frequency f1 writes the padding column of an
   odd split d_model (internal.h: the part that reaches the row's end). */
static inline int peak_pe_has_pad(size_t f1, size_t d_model, peak_pe_layout layout)
{
    return layout != PEAK_PE_INTERLEAVED && (d_model & 1) &&
           f1 >= peak_pe_n_freq(d_model, layout);
}

/* Rows' padding column of an odd split d_model: n rows, ld apart. */
static inline void peak_pe_zero_last_col(float *out, ptrdiff_t ld, size_t n, size_t d_model,
                                         peak_pe_layout layout)
{
    if (layout != PEAK_PE_INTERLEAVED && (d_model & 1)) {
        for (size_t t = 0; t < n; t++)
            out[(ptrdiff_t)t * ld + (ptrdiff_t)(d_model - 1)] = 0.0f;
    }
}

/* ---- the table ---------------------------------------------------------- */

/* always_inline so that each tier's arithmetic is inlined into its copy. */
static inline __attribute__((always_inline)) void
peak_pe_table_run(float *out, ptrdiff_t ld_out, size_t n_pos, size_t d_model, size_t pos0,
                  const peak_pe_params *params, size_t f0, size_t f1, int stream)
{
    const peak_pe_layout layout = params->layout;
    const size_t n_freq = peak_pe_n_freq(d_model, layout);
    if (peak_pe_has_pad(f1, d_model, layout))
        peak_pe_zero_last_col(out, ld_out, n_pos, d_model, layout);

    peak_pe_tables tab;
    const size_t stop = peak_pe_part_start(&tab, f0, f1, n_freq, d_model, params);
    for (size_t i0 = f0; i0 < stop; i0 += PEAK_PE_CHUNK) {
        const size_t nc = peak_pe_chunk_freqs(&tab, i0, n_freq, d_model, params);

        if (params->mode == PEAK_PE_TORCH_F32) {
            for (size_t t = 0; t < n_pos; t++)
                pe_emit_torch(out + (ptrdiff_t)t * ld_out, (float)(pos0 + t), tab.wf, i0, nc,
                              d_model, layout);
            continue;
        }

        /* Offsets k: all of them once n_pos >= BLOCK, else only the n_pos
           (distinct) ones this call touches, so a 1-row call costs two
           sincos per frequency. */
        const size_t nk = n_pos < PEAK_PE_BLOCK ? n_pos : PEAK_PE_BLOCK;
        for (size_t t = 0; t < nk; t++) {
            const size_t k = (pos0 + t) & (PEAK_PE_BLOCK - 1);
            peak_pe_sincos_at(&tab, k, tab.sk[k], tab.ck[k]);
        }

        const size_t end = pos0 + n_pos;
        for (size_t p = pos0; p < end;) {
            const size_t p0 = p & ~(size_t)(PEAK_PE_BLOCK - 1);
            const size_t block_end = end - p0 < PEAK_PE_BLOCK ? end : p0 + PEAK_PE_BLOCK;
            peak_pe_sincos_at(&tab, p0, tab.sb, tab.cb);
            for (; p < block_end; p++) {
                const size_t k = p - p0;
                pe_emit_exact(out + (ptrdiff_t)(p - pos0) * ld_out, tab.sb, tab.cb, tab.sk[k],
                              tab.ck[k], i0, nc, d_model, layout, stream);
            }
        }
    }
}

/* ---- the rows driver: on-the-fly PE fused into its consumer -------------- */

/* peak_embed_pe and peak_pe_add without a table.  Their rows sit at
   arbitrary positions (a batch of sequences, fairseq pads, per-token
   positions), and a PE row is wanted only to be added to something at once,
   so the rows driver evaluates the table's very expressions -- the same
   frequencies, sincos chunks and emits as peak_pe_table_run, hence the same
   bits -- one column chunk of a few rows at a time into a small scratch
   block, and hands each finished block to a sink that consumes it while it
   is in L1.  Writing whole PE rows to the output first and adding
   afterwards would send every row through L2 twice.

   Order: column chunk outermost (the offset tables sk/ck of one chunk are
   16 KiB; all of a row's would not stay in L1), then blocks of rows.  A
   block base (sb, cb) is reused while consecutive rows stay in its block of
   PEAK_PE_BLOCK positions, and an offset k is evaluated the first time a row
   of the chunk needs it, so a call costs two sincos per frequency for a
   single row and ~1/6 of one per row and frequency for 256 consecutive
   positions. */
_Static_assert(PEAK_PE_BLOCK <= 64, "the rows driver keeps one bit per offset k in a uint64_t");

/* Calls sink for the columns that chunk (i0, nc) fills. */
static inline __attribute__((always_inline)) void
peak_pe_sink_chunk(peak_pe_sink_fn sink, void *ctx, size_t t0, size_t t1, size_t i0, size_t nc,
                   size_t d_model, peak_pe_layout layout)
{
    if (layout == PEAK_PE_INTERLEAVED) {
        sink(ctx, t0, t1, 2 * i0, 2 * (i0 + nc) < d_model ? 2 * (i0 + nc) : d_model);
    } else {
        sink(ctx, t0, t1, i0, i0 + nc);
        sink(ctx, t0, t1, d_model / 2 + i0, d_model / 2 + i0 + nc);
    }
}

/* scratch: scratch_rows rows of d_model floats, ld_scratch apart.  pos ==
   NULL: row t is at position pos0 + t.  The frequencies [f0, f1). */
static inline __attribute__((always_inline)) void
peak_pe_rows_run(float *scratch, size_t scratch_rows, size_t ld_scratch, size_t n_rows,
                 const int64_t *pos, size_t pos0, size_t d_model, const peak_pe_params *params,
                 size_t f0, size_t f1, peak_pe_sink_fn sink, void *ctx)
{
    const peak_pe_layout layout = params->layout;
    const size_t n_freq = peak_pe_n_freq(d_model, layout);
    const int torch = params->mode == PEAK_PE_TORCH_F32;

    if (peak_pe_has_pad(f1, d_model, layout)) {
        peak_pe_zero_last_col(scratch, (ptrdiff_t)ld_scratch, scratch_rows, d_model, layout);
        for (size_t t0 = 0; t0 < n_rows; t0 += scratch_rows)
            sink(ctx, t0, n_rows - t0 < scratch_rows ? n_rows : t0 + scratch_rows, d_model - 1,
                 d_model);
    }

    peak_pe_tables tab;
    const size_t stop = peak_pe_part_start(&tab, f0, f1, n_freq, d_model, params);
    for (size_t i0 = f0; i0 < stop; i0 += PEAK_PE_CHUNK) {
        const size_t nc = peak_pe_chunk_freqs(&tab, i0, n_freq, d_model, params);
        uint64_t have_k = 0;    /* offsets k already in sk/ck */
        size_t base = SIZE_MAX; /* the block whose sincos is in sb/cb */
        for (size_t t0 = 0; t0 < n_rows; t0 += scratch_rows) {
            const size_t t1 = n_rows - t0 < scratch_rows ? n_rows : t0 + scratch_rows;
            for (size_t t = t0; t < t1; t++) {
                if (pos && pos[t] < 0)
                    continue;
                float *row = scratch + (t - t0) * ld_scratch;
                const size_t p = pos ? (size_t)pos[t] : pos0 + t;
                if (torch) {
                    pe_emit_torch(row, (float)p, tab.wf, i0, nc, d_model, layout);
                    continue;
                }
                const size_t p0 = p & ~(size_t)(PEAK_PE_BLOCK - 1);
                const size_t k = p - p0;
                if (!(have_k >> k & 1)) {
                    peak_pe_sincos_at(&tab, k, tab.sk[k], tab.ck[k]);
                    have_k |= (uint64_t)1 << k;
                }
                if (p0 != base) {
                    peak_pe_sincos_at(&tab, p0, tab.sb, tab.cb);
                    base = p0;
                }
                pe_emit_exact(row, tab.sb, tab.cb, tab.sk[k], tab.ck[k], i0, nc, d_model, layout,
                              0);
            }
            peak_pe_sink_chunk(sink, ctx, t0, t1, i0, nc, d_model, layout);
        }
    }
}

#endif /* PEAK_PE_TABLE_DRIVER_H */
