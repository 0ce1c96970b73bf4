/*
 * fuzz-embedding.c - peak_pe_add and peak_embed_pe (the first byte picks which):
 * every tier returns the scalar tier's bits (peak.h: "every tier gives the
 * same bits"), row gaps of the output keep their canaries, inputs are not
 * written, and pad tokens (fairseq numbering) get E[id] * scale alone.
 * peak_embed_pe's table and out may each be bfloat16 or float16 (the types
 * are read last, fuzz-types.h: older inputs stay float32): the scalar
 * tier's out is then, byte for byte, its float32 out from the widened
 * table rounded by peak_convert (peak.h: E widened exactly, out rounded
 * once), and the other tiers return its bytes; a type outside peak_dtype
 * is refused, and d_model above 8192 with a 16-bit table or out (its own
 * call, embed_limit), with PEAK_ERR_UNSUPPORTED and nothing written.
 */
#include "fuzz-types.h"

static size_t decode_pos0(fz_in *in, size_t n, int table)
{
    if (table)
        return fz_upto(in, 300);
    switch (fz_u8(in) % 3) {
    case 0: return fz_upto(in, 6000);
    case 1: return PEAK_MAX_POSITION - n - fz_upto(in, 64);
    default: return (size_t)(fz_u64(in) % (PEAK_MAX_POSITION - n + 1));
    }
}

static peak_pe_params decode_params(fz_in *in)
{
    static const double bases[] = {10000.0, 500000.0, 2.5, 1e-300, 1e300};
    peak_pe_params p = {(peak_pe_layout)(fz_u8(in) % 3), (peak_pe_mode)(fz_u8(in) % 2),
                        bases[fz_u8(in) % 5]};
    return p;
}

static void corrupt_params(fz_in *in, peak_pe_params *p)
{
    switch (fz_u8(in) % 3) {
    case 0: p->layout = (peak_pe_layout)3; break;
    case 1: p->mode = (peak_pe_mode)2; break;
    default: p->base = fz_bit(in) ? NAN : -1.0; break;
    }
}

/* ---- peak_pe_add ---------------------------------------------------------- */

static void fuzz_pe_add(fz_in *in)
{
    const size_t batch = 1 + fz_upto(in, 3), seq = fz_len(in, 40), d = fz_len(in, 200);
    const size_t pad = fz_upto(in, 5);
    const int seq_major = fz_bit(in); /* x as [S, B, D] instead of [B, S, D] */
    const size_t row = d + pad;
    ptrdiff_t ld = (ptrdiff_t)(seq_major ? batch * row : row);
    ptrdiff_t bs = (ptrdiff_t)(seq_major ? row : seq * row + fz_upto(in, 3));
    const int table = fz_bit(in);
    const size_t pos0 = decode_pos0(in, seq, table);
    const size_t pe_rows = table ? pos0 + seq + fz_upto(in, 4) : 0;
    peak_pe_params prm = decode_params(in);
    const int null_params = !table && fz_bit(in);
    if (null_params)
        prm = (peak_pe_params)PEAK_PE_PARAMS_DEFAULT;
    fz_gen gx = fz_gen_read(in, FZ_ALL), gp = fz_gen_read(in, FZ_ALL);
    const int ftz = fz_ftz_bit(in);
    const size_t nx = (batch - 1) * (size_t)bs + (seq - 1) * (size_t)ld + d;
    const size_t npe = pe_rows * d;

    /* One documented invalid argument, or none. */
    peak_status want = PEAK_OK;
    size_t c_batch = batch, c_seq = seq, c_d = d, c_pos0 = pos0, c_rows = pe_rows;
    ptrdiff_t c_bs = bs, c_ld = ld;
    peak_pe_params c_prm = prm;
    int null_x = 0, x_is_pe = 0;
    const uint32_t bad = fz_u8(in);
    if (bad >= 192) {
        want = PEAK_ERR_INVALID_ARG;
        switch (bad % 12) {
        case 0: null_x = 1; break;
        case 1: c_batch = 0; break;
        case 2: c_seq = 0; break;
        case 3: c_d = 0; break;
        case 4: c_ld = (ptrdiff_t)d - 1; c_seq = seq > 1 ? seq : 2; break;
        case 5: c_ld = -1 - (ptrdiff_t)fz_upto(in, 100); break;
        case 6: c_bs = -1 - (ptrdiff_t)fz_upto(in, 100); break;
        case 7: /* rows of different batches coincide */
            c_bs = 0, c_batch = batch > 1 ? batch : 2;
            break;
        case 8: x_is_pe = 1; break;
        case 9:
            if (table) { /* positions past the table */
                want = PEAK_ERR_OUT_OF_RANGE;
                c_rows = pos0 + seq - 1 - fz_upto(in, pos0 + seq - 1);
            } else {
                corrupt_params(in, &c_prm);
            }
            break;
        case 10:
            want = PEAK_ERR_OUT_OF_RANGE;
            c_pos0 = table ? pe_rows + fz_upto(in, 5) : PEAK_MAX_POSITION - seq + 1;
            break;
        default: /* an extent whose byte offset overflows */
            want = PEAK_ERR_OUT_OF_RANGE;
            c_bs = PTRDIFF_MAX / 2, c_batch = batch > 1 ? batch : 2;
            break;
        }
    }
    fz_describe("pe_add B %zu S %zu d %zu ld %td bs %td %s pos0 %zu pe_rows %zu params %d %d "
                "%a%s x [%g, %g) specials %u kinds 0x%x ftz %d; call B %zu S %zu d %zu ld %td "
                "bs %td pos0 %zu rows %zu null_x %d x_is_pe %d -> %s",
                batch, seq, d, ld, bs, table ? "table" : "on the fly", pos0, pe_rows, prm.layout,
                prm.mode, prm.base, null_params ? " (NULL)" : "", (double)gx.lo, (double)gx.hi,
                gx.rate, gx.kinds, ftz, c_batch, c_seq, c_d, c_ld, c_bs, c_pos0, c_rows, null_x,
                x_is_pe, fz_status(want));

    /* x: rows filled, gaps canary; the table: arbitrary floats. */
    float *x = fz_alloc(nx, fz_u8(in) % 32);
    fz_gen *g = &gx;
    for (size_t b = 0; b < batch; b++)
        for (size_t s = 0; s < seq; s++)
            fz_fill(x + b * (size_t)bs + s * (size_t)ld, d, g);
    float *x0 = fz_dup(x, nx);
    float *pe = table ? fz_alloc(npe, fz_u8(in) % 32) : NULL;
    if (pe)
        fz_fill(pe, npe, &gp);
    float *pe0 = pe ? fz_dup(pe, npe) : NULL;
    float *ref = fz_dup(x, nx);

    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        memcpy(x, x0, nx * sizeof *x);
        unsigned csr = fz_ftz_set(ftz);
        peak_status s = peak_pe_add(null_x ? NULL : x, c_bs, c_ld, c_batch, c_seq, c_d, c_pos0,
                                    x_is_pe ? x : pe, c_rows,
                                    null_params && !(bad >= 192) ? NULL : &c_prm, NULL);
        fz_ftz_restore(csr);
        fz_expect_status(t, s, want);
        if (pe)
            fz_expect_unchanged(t, "pe", pe, pe0, npe);
        if (s != PEAK_OK) {
            fz_expect_unchanged(t, "x", x, x0, nx);
            continue;
        }
        if (t == 0) {
            memcpy(ref, x, nx * sizeof *x);
            /* gaps untouched: compare against x0 outside the rows */
            for (size_t k = 0; k < nx; k++) {
                int in_row = 0;
                for (size_t b = 0; b < batch && !in_row; b++) {
                    size_t off = k - b * (size_t)bs;
                    if (k >= b * (size_t)bs && off % (size_t)ld < d && off / (size_t)ld < seq)
                        in_row = 1;
                }
                if (!in_row && fz_bits(x[k]) != fz_bits(x0[k]))
                    fz_fail("scalar: gap x[%zu] written", k);
            }
            continue;
        }
        for (size_t k = 0; k < nx; k++)
            if (!fz_same(x[k], ref[k]))
                fz_fail("tier %s: x[%zu] = %a (0x%08x), scalar %a (0x%08x)",
                        peak_isa_name(fz_tier[t]), k, (double)x[k], fz_bits(x[k]),
                        (double)ref[k], fz_bits(ref[k]));
    }
    free(ref);
    free(pe0);
    fz_free(pe);
    free(x0);
    fz_free(x);
}

/* ---- peak_embed_pe ----------------------------------------------------------- */

/* The scalar tier's out of a call with a 16-bit table or out (type ot, row
   stride ld_out) is its float32 out of the same call on the widened table
   (`wide`), rounded by peak_convert, byte for byte (NaN payloads aside). */
static void check_typed(const peak_embed_desc *c, const float *wide, const void *out, peak_dtype ot,
                        ptrdiff_t ld_out, const int32_t *ids, size_t n_tok, int ftz)
{
    peak_embed_desc f = *c;
    f.table = wide, f.table_type = PEAK_F32, f.out_type = PEAK_F32;
    const size_t d = c->d_model, n = (n_tok - 1) * (size_t)ld_out + d;
    float *o32 = fz_alloc(n, 0);
    unsigned csr = fz_ftz_set(ftz);
    const peak_status s = peak_embed_pe(o32, ld_out, ids, n_tok, &f, NULL);
    fz_ftz_restore(csr);
    if (s != PEAK_OK)
        fz_fail("scalar: the float32 call on the widened table returned %s", fz_status(s));
    for (size_t t = 0; t < n_tok; t++)
        for (size_t col = 0; col < d; col++) {
            const size_t k = t * (size_t)ld_out + col;
            const float want = fz_round16(o32[k], ot), got = fz_get(out, ot, k);
            if (!fz_same(got, want))
                fz_fail("scalar: out (token %zu col %zu) = %a (%s 0x%x), the float32 call's %a "
                        "rounded %a", t, col, (double)got, fz_type_name(ot), fz_code(out, ot, k),
                        (double)o32[k], (double)want);
        }
    fz_free(o32);
}

/* d_model just past 8192, or 8192 itself, with table and out of types tt
   and ot (3 tokens of a 2-row table, PE on the fly): with a 16-bit one
   every tier refuses it (PEAK_ERR_UNSUPPORTED: the stack rows) and writes
   nothing; all float32, or d_model 8192, every tier takes it, writes every
   element, and returns the scalar tier's bytes. */
static void embed_limit(peak_dtype tt, peak_dtype ot, uint32_t w, size_t sel)
{
    const size_t d = w % 4 ? 8193 + (w >> 2) % 64 : 8192;
    const int refused = d > 8192 && (tt != PEAK_F32 || ot != PEAK_F32);
    static const int32_t ids[3] = {1, 0, 1};
    float *wide = malloc(2 * d * sizeof *wide);
    if (!wide)
        abort();
    for (size_t k = 0; k < 2 * d; k++)
        wide[k] = (float)(k % 13) * 0.25f - 1.0f;
    uint16_t *tab16 = fz_narrow(wide, 2 * d, tt, sel + 1);
    const void *tab = tab16 ? (const void *)tab16 : wide;
    void *out = fz_alloc_t(3 * d, sel, ot), *ref = fz_dup_t(out, 3 * d, ot);
    void *tab0 = fz_dup_t(tab, 2 * d, tt), *out0 = fz_dup_t(out, 3 * d, ot);
    peak_embed_desc c = PEAK_EMBED_DESC_DEFAULT;
    c.table = tab, c.vocab = 2, c.ld_table = (ptrdiff_t)d, c.d_model = d;
    c.table_type = tt, c.out_type = ot;
    fz_describe("embed_pe d_model limit: d %zu types %s %s -> %s", d, fz_type_name(tt),
                fz_type_name(ot), refused ? "UNSUPPORTED" : "OK");
    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        memcpy(out, out0, 3 * d * peak_dtype_size(ot));
        const peak_status s = peak_embed_pe(out, (ptrdiff_t)d, ids, 3, &c, NULL);
        fz_expect_status(t, s, refused ? PEAK_ERR_UNSUPPORTED : PEAK_OK);
        fz_expect_unchanged_t(t, "table", tab, tab0, 2 * d, tt);
        if (refused) {
            fz_expect_unchanged_t(t, "out", out, out0, 3 * d, ot);
            continue;
        }
        for (size_t k = 0; k < 3 * d; k++) {
            if (fz_is_canary_at(out, ot, k))
                fz_fail("tier %s: out[%zu] not written", peak_isa_name(fz_tier[t]), k);
            if (t > 0 && !fz_same_at(out, ref, ot, k))
                fz_fail("tier %s: out[%zu] = 0x%x, scalar 0x%x", peak_isa_name(fz_tier[t]), k,
                        fz_code(out, ot, k), fz_code(ref, ot, k));
        }
        if (t == 0)
            memcpy(ref, out, 3 * d * peak_dtype_size(ot));
    }
    free(out0);
    free(tab0);
    free(ref);
    fz_free_t(out, ot);
    fz_free16(tab16);
    free(wide);
}

static void fuzz_embed_pe(fz_in *in)
{
    const size_t vocab = 1 + fz_upto(in, 49), d = fz_len(in, 160);
    const size_t n_tok = fz_len(in, 60);
    const ptrdiff_t ld_table = (ptrdiff_t)(d + fz_upto(in, 4));
    const ptrdiff_t ld_out = (ptrdiff_t)(d + fz_upto(in, 4));
    static const float scales[] = {1.0f, 22.627417f, 0.0f, -2.5f, 1e30f, 1e-40f, -0.0f, 8.0f};
    const float scale = scales[fz_u8(in) % 8];
    const int table = fz_bit(in);
    const int pos_mode = (int)(fz_u8(in) % 3); /* 0 pos0 + t % seq_len, 1 positions, 2 padding */
    const size_t seq_len = fz_bit(in) ? 0 : 1 + fz_upto(in, n_tok);
    const int32_t pad = pos_mode == 2 ? (int32_t)fz_upto(in, vocab - 1) : -1;
    size_t pos0 = decode_pos0(in, n_tok + (size_t)(pad + 1), table);
    peak_pe_params prm = decode_params(in);
    fz_gen ge = fz_gen_read(in, FZ_ALL), gp = fz_gen_read(in, FZ_ALL);
    const int ftz = fz_ftz_bit(in);
    uint64_t rng = fz_u64(in);

    int32_t *ids = malloc(n_tok * sizeof *ids);
    int64_t *positions = pos_mode == 1 ? malloc(n_tok * sizeof *positions) : NULL;
    if (!ids || (pos_mode == 1 && !positions))
        abort();
    for (size_t t = 0; t < n_tok; t++)
        ids[t] = (int32_t)(fz_next(&rng) % vocab);
    if (pad >= 0) /* about a third pad tokens */
        for (size_t t = 0; t < n_tok; t++)
            if (fz_next(&rng) % 3 == 0)
                ids[t] = pad;
    /* The largest position used decides the table's rows: peak.h's
       numbering written out (pad tokens use none: if every token is a pad,
       no position is checked against pe_rows, only pos0 against
       PEAK_MAX_POSITION). */
    size_t max_pos = 0;
    int uses_pos = 0;
    if (pos_mode == 1) {
        const uint64_t lim = table ? 400 : PEAK_MAX_POSITION;
        for (size_t t = 0; t < n_tok; t++) {
            positions[t] = (int64_t)(fz_next(&rng) % lim);
            if ((size_t)positions[t] > max_pos)
                max_pos = (size_t)positions[t];
        }
    } else {
        size_t in_seq = 0, non_pad = 0;
        for (size_t t = 0; t < n_tok; t++) {
            if (seq_len && in_seq == seq_len)
                in_seq = non_pad = 0;
            size_t p = pad < 0 ? pos0 + in_seq : ids[t] == pad ? 0 : pos0 + (size_t)pad + 1 + non_pad++;
            uses_pos |= pad < 0 || ids[t] != pad;
            in_seq++;
            if (p > max_pos)
                max_pos = p;
        }
    }
    const size_t pe_rows = table ? max_pos + 1 + fz_upto(in, 3) : 0;

    peak_embed_desc dsc = PEAK_EMBED_DESC_DEFAULT;
    dsc.vocab = vocab, dsc.ld_table = ld_table, dsc.d_model = d, dsc.scale = scale;
    dsc.pe_rows = pe_rows, dsc.pe_params = prm, dsc.positions = positions, dsc.pos0 = pos0;
    dsc.seq_len = seq_len, dsc.padding_idx = pad;

    /* One documented invalid argument, or none. */
    peak_status want = PEAK_OK;
    peak_embed_desc c = dsc;
    size_t c_n = n_tok;
    ptrdiff_t c_ld_out = ld_out;
    int null_out = 0, null_ids = 0, null_desc = 0, null_table = 0, out_alias = 0;
    size_t bad_t = SIZE_MAX;
    const uint32_t bad = fz_u8(in);
    if (bad >= 176) {
        want = PEAK_ERR_INVALID_ARG;
        switch (bad % 16) {
        case 0: null_out = 1; break;
        case 1: null_ids = 1; break;
        case 2: null_desc = 1; break;
        case 3: null_table = 1; break;
        case 4: c_n = 0; break;
        case 5: c.vocab = 0; break;
        case 6: c.d_model = 0; break;
        case 7: c_ld_out = fz_bit(in) ? (ptrdiff_t)d - 1 : -1; break;
        case 8: c.ld_table = fz_bit(in) ? (ptrdiff_t)d - 1 : -4; break;
        case 9: c.scale = fz_bit(in) ? NAN : -INFINITY; break;
        case 10:
            if (positions) /* padding_idx combined with positions */
                c.padding_idx = (int32_t)fz_upto(in, vocab - 1);
            else
                c.padding_idx = fz_bit(in) ? -2 : (int32_t)vocab;
            break;
        case 11: out_alias = table ? 1 + fz_bit(in) : 1; break; /* out == table or pe */
        case 12:
            if (table)
                c.pe_params.layout = (peak_pe_layout)5, want = PEAK_OK; /* ignored: table */
            else
                corrupt_params(in, &c.pe_params);
            break;
        case 13: { /* an id outside [0, vocab) */
            static const int32_t bad_ids[] = {-1, INT32_MIN, INT32_MAX, 0};
            want = PEAK_ERR_OUT_OF_RANGE;
            bad_t = fz_upto(in, n_tok - 1);
            int32_t v = bad_ids[fz_u8(in) % 4];
            ids[bad_t] = v ? v : (int32_t)vocab; /* never a pad id: those are < vocab */
            break;
        }
        case 14: /* a position outside the table or the limit */
            want = PEAK_ERR_OUT_OF_RANGE;
            if (positions) {
                bad_t = fz_upto(in, n_tok - 1);
                positions[bad_t] = fz_bit(in) ? -1 - (int64_t)fz_upto(in, 3)
                                              : (table ? (int64_t)pe_rows
                                                       : (int64_t)PEAK_MAX_POSITION);
            } else {
                c.pos0 = table && uses_pos ? pe_rows : PEAK_MAX_POSITION + fz_upto(in, 100);
            }
            break;
        default: /* pe_rows too small for the positions used */
            if (table && (positions || uses_pos)) {
                want = PEAK_ERR_OUT_OF_RANGE;
                c.pe_rows = max_pos - fz_upto(in, max_pos);
            } else if (positions) { /* positions ignore pos0 */
                want = PEAK_ERR_OUT_OF_RANGE;
                bad_t = fz_upto(in, n_tok - 1);
                positions[bad_t] = INT64_MAX - (int64_t)fz_upto(in, 3);
            } else {
                want = PEAK_ERR_OUT_OF_RANGE;
                c.pos0 = SIZE_MAX - fz_upto(in, 3);
            }
            break;
        }
    }
    /* A position of -1 is fairseq's "no PE" only with padding_idx. */
    if (bad_t != SIZE_MAX && positions && positions[bad_t] == -1 && c.padding_idx >= 0)
        want = PEAK_OK;

    const size_t ntab = (vocab - 1) * (size_t)ld_table + d;
    const size_t sel_tab = fz_u8(in) % 32;
    float *tab = fz_alloc(ntab, sel_tab);
    for (size_t v = 0; v < vocab; v++)
        fz_fill(tab + v * (size_t)ld_table, d, &ge);
    const size_t npe = pe_rows * d;
    float *pe = table ? fz_alloc(npe, fz_u8(in) % 32) : NULL;
    if (pe)
        fz_fill(pe, npe, &gp);
    float *pe0 = pe ? fz_dup(pe, npe) : NULL;
    c.pe = pe;
    const size_t nout = (n_tok - 1) * (size_t)ld_out + d;
    const size_t sel_out = fz_u8(in) % 32;
    float *out = fz_alloc(nout, sel_out);

    /* The types of E and out, last; one invalid type case when nothing
       else is invalid. */
    peak_dtype ty[2];
    uint32_t tw;
    const int bad_type = fz_types_read(in, ty, 2, &tw) && want == PEAK_OK;
    const peak_dtype tt = ty[0], ot = ty[1];
    c.table_type = tt, c.out_type = ot;
    if (bad_type && tw % 3 < 2) {
        want = PEAK_ERR_UNSUPPORTED;
        if (tw % 3)
            c.out_type = fz_bad_dtype(tw >> 2);
        else
            c.table_type = fz_bad_dtype(tw >> 2);
    }
    /* TAB and OUT are the call's buffers: tab (its values then the 16-bit
       ones widened) or its 16-bit copy, out or a 16-bit one. */
    uint16_t *tab16 = fz_narrow(tab, ntab, tt, sel_tab);
    void *TAB = tab16 ? (void *)tab16 : tab, *tab0 = fz_dup_t(TAB, ntab, tt);
    c.table = null_table ? NULL : TAB;
    uint16_t *out16 = ot != PEAK_F32 ? fz_alloc16(nout, sel_out, ot) : NULL;
    void *OUT = out16 ? (void *)out16 : out;
    void *out0 = fz_dup_t(OUT, nout, ot), *ref = fz_dup_t(OUT, nout, ot);
    void *dst = out_alias == 1 ? TAB : out_alias == 2 ? (void *)pe : OUT;
    fz_describe("embed_pe vocab %zu d %zu tokens %zu ld_table %td ld_out %td scale %a %s "
                "pos_mode %d seq_len %zu pad %d pos0 %zu pe_rows %zu params %d %d %a E [%g, %g) "
                "specials %u kinds 0x%x ftz %d types %s %s (call %u %u)%s; bad %u (token %zu) "
                "-> %s",
                vocab, d, n_tok, ld_table, ld_out, (double)scale, table ? "table" : "on the fly",
                pos_mode, seq_len, pad, pos0, pe_rows, prm.layout, prm.mode, prm.base,
                (double)ge.lo, (double)ge.hi, ge.rate, ge.kinds, ftz, fz_type_name(tt),
                fz_type_name(ot), (unsigned)c.table_type, (unsigned)c.out_type,
                bad_type && tw % 3 == 2 ? " + d_model limit" : "", bad >= 176 ? bad % 16 : 99,
                bad_t, fz_status(want));

    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        memcpy(OUT, out0, nout * peak_dtype_size(ot));
        unsigned csr = fz_ftz_set(ftz);
        peak_status s = peak_embed_pe(null_out ? NULL : dst, c_ld_out, null_ids ? NULL : ids,
                                      c_n, null_desc ? NULL : &c, NULL);
        fz_ftz_restore(csr);
        fz_expect_status(t, s, want);
        fz_expect_unchanged_t(t, "table", TAB, tab0, ntab, tt);
        if (pe)
            fz_expect_unchanged(t, "pe", pe, pe0, npe);
        if (s != PEAK_OK) {
            fz_expect_unchanged_t(t, "out", OUT, out0, nout, ot);
            continue;
        }
        if (t == 0) {
            memcpy(ref, OUT, nout * peak_dtype_size(ot));
            for (size_t k = 0; k < nout; k++) {
                const size_t tok = k / (size_t)ld_out, col = k % (size_t)ld_out;
                const int canary = fz_is_canary_at(OUT, ot, k);
                const float v = fz_get(OUT, ot, k);
                if (col >= d) {
                    if (!canary)
                        fz_fail("scalar: gap out[%zu] written", k);
                    continue;
                }
                if (!canary && ids[tok] == pad && pad >= 0) {
                    /* a pad token: E[pad] * scale, no PE (rounded to out's type) */
                    float e;
                    unsigned cs = fz_ftz_set(ftz);
                    e = tab[(size_t)pad * (size_t)ld_table + col] * scale;
                    fz_ftz_restore(cs);
                    e = fz_round16(e, ot);
                    if (!fz_same(v, e))
                        fz_fail("scalar: pad token %zu col %zu = %a, want E*scale %a", tok, col,
                                (double)v, (double)e);
                } else if (canary) {
                    fz_fail("scalar: out[%zu] (token %zu col %zu) not written", k, tok, col);
                }
            }
            if (tt != PEAK_F32 || ot != PEAK_F32)
                check_typed(&c, tab, OUT, ot, c_ld_out, ids, n_tok, ftz);
            continue;
        }
        for (size_t k = 0; k < nout; k++)
            if (!fz_same_at(OUT, ref, ot, k))
                fz_fail("tier %s: out[%zu] (token %zu col %zu) = %a (%s 0x%x), scalar %a "
                        "(0x%x)",
                        peak_isa_name(fz_tier[t]), k, k / (size_t)ld_out, k % (size_t)ld_out,
                        (double)fz_get(OUT, ot, k), fz_type_name(ot), fz_code(OUT, ot, k),
                        (double)fz_get(ref, ot, k), fz_code(ref, ot, k));
    }
    if (bad_type && tw % 3 == 2)
        embed_limit(tt, ot, tw >> 2, sel_out);
    free(ref);
    free(out0);
    fz_free16(out16);
    fz_free(out);
    free(pe0);
    fz_free(pe);
    free(tab0);
    fz_free16(tab16);
    fz_free(tab);
    free(positions);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_setup();
    fz_in in = {data, size};
    if (fz_bit(&in))
        fuzz_embed_pe(&in);
    else
        fuzz_pe_add(&in);
    peak_isa_reset();
    return 0;
}
