/*
 * fuzz-pe-table.c - peak_pe_table: every tier returns the same bits as the
 * scalar tier (peak.h: "Every tier returns the same bits"), every entry is
 * finite and within [-1, 1], and the split layouts' odd last column is 0;
 * a bfloat16 or float16 table is the scalar float32 table converted by
 * peak_convert (the type is the input's last byte: older inputs decode as
 * before, float32).
 */
#include "fuzz-types.h"

/* Positions near the documented edges: 0, 2^20 (the accuracy promise),
   PEAK_MAX_POSITION (the limit), and anywhere below it. */
static size_t decode_pos0(fz_in *in, size_t n_pos)
{
    const size_t top = PEAK_MAX_POSITION - n_pos;
    switch (fz_u8(in) % 4) {
    case 0: return fz_upto(in, 6000);
    case 1: return ((size_t)1 << 20) - fz_upto(in, 64);
    case 2: return top - fz_upto(in, 64);
    default: return (size_t)(fz_u64(in) % (top + 1));
    }
}

static double decode_base(fz_in *in)
{
    static const double bases[] = {10000.0, 500000.0, 2.5, 1.0, 0.5, 1e-300, 5e-324, 1e300,
                                   DBL_MAX, 10.0, 1e4 + 1e-9};
    uint32_t k = fz_u8(in);
    if (k < 200)
        return bases[k % (sizeof bases / sizeof bases[0])];
    return (double)(fz_u16(in) + 1) / (double)(fz_u16(in) + 1) * 1000.0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_setup();
    fz_in in = {data, size};
    size_t n_pos = fz_len(&in, 48), d = fz_len(&in, 300);
    size_t pos0 = decode_pos0(&in, n_pos);
    peak_pe_params prm = {(peak_pe_layout)(fz_u8(&in) % 3), (peak_pe_mode)(fz_u8(&in) % 2),
                          decode_base(&in)};
    const int null_params = prm.layout == PEAK_PE_INTERLEAVED && prm.mode == PEAK_PE_EXACT &&
                            prm.base == 10000.0 && fz_bit(&in);
    const int ftz = fz_ftz_bit(&in);
    const size_t n = n_pos * d; /* the buffer: the valid problem's size */

    /* One documented invalid argument, or none. */
    size_t call_n = n_pos, call_d = d, call_pos0 = pos0;
    peak_pe_params call_prm = prm;
    int null_out = 0;
    peak_status want = PEAK_OK;
    const uint32_t bad = fz_u8(&in);
    const int corrupt = bad >= 192;
    if (corrupt) {
        want = PEAK_ERR_INVALID_ARG;
        switch (bad % 9) {
        case 0: null_out = 1; break;
        case 1: call_n = 0; break;
        case 2: call_d = 0; break;
        case 3: call_prm.layout = (peak_pe_layout)(3 + fz_u8(&in)); break;
        case 4: call_prm.mode = (peak_pe_mode)(2 + fz_u8(&in)); break;
        case 5: {
            static const double bad_base[] = {0.0, -0.0, -1.0, NAN, INFINITY, -INFINITY};
            call_prm.base = bad_base[fz_u8(&in) % 6];
            break;
        }
        case 6: /* pos0 + n_pos > PEAK_MAX_POSITION */
            want = PEAK_ERR_OUT_OF_RANGE;
            call_pos0 = PEAK_MAX_POSITION - n_pos + 1 + fz_upto(&in, 1000);
            break;
        case 7: /* n_pos beyond the limit, or its bytes beyond size_t */
            want = PEAK_ERR_OUT_OF_RANGE;
            call_n = fz_bit(&in) ? SIZE_MAX / 2 : PEAK_MAX_POSITION + 1;
            call_pos0 = 0;
            break;
        default:
            want = PEAK_ERR_OUT_OF_RANGE;
            call_pos0 = SIZE_MAX - fz_upto(&in, 1000);
            break;
        }
    }
    const size_t sel = fz_u8(&in) % 32;
    /* The table's type; 3: one outside peak_dtype (checked after the
       invalid arguments, before the ranges). */
    static const peak_dtype types[3] = {PEAK_F32, PEAK_BF16, PEAK_F16};
    const uint32_t type_sel = fz_u8(&in) % 4;
    const peak_dtype type = types[type_sel % 3];
    peak_dtype call_type = type;
    if (type_sel == 3) {
        call_type = (peak_dtype)(3 + fz_u8(&in) % 250);
        if (want != PEAK_ERR_INVALID_ARG)
            want = PEAK_ERR_UNSUPPORTED;
    }
    fz_describe("pe_table n_pos %zu d %zu pos0 %zu layout %d mode %d base %a%s ftz %d type %d; "
                "call n_pos %zu d %zu pos0 %zu layout %d mode %d base %a null_out %d type %d "
                "-> %s",
                n_pos, d, pos0, prm.layout, prm.mode, prm.base, null_params ? " (NULL)" : "",
                ftz, (int)type, call_n, call_d, call_pos0, call_prm.layout, call_prm.mode,
                call_prm.base, null_out, (int)call_type, fz_status(want));

    /* In floats (fz_alloc's unit): a 16-bit table rounds up by 2 bytes at most. */
    const size_t es = peak_dtype_size(type), nf = (n * es + 3) / 4;
    float *out = fz_alloc(nf, sel);
    float *ref = NULL;
    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        fz_canary(out, nf);
        unsigned csr = fz_ftz_set(ftz);
        peak_status s = peak_pe_table(null_out ? NULL : out, call_type, call_n, call_d, call_pos0,
                                      null_params && !corrupt ? NULL : &call_prm, NULL);
        fz_ftz_restore(csr);
        fz_expect_status(t, s, want);
        if (s != PEAK_OK) {
            for (size_t k = 0; k < nf; k++)
                if (!fz_is_canary(out[k]))
                    fz_fail("tier %s: rejected call wrote out[%zu] = %a",
                            peak_isa_name(fz_tier[t]), k, (double)out[k]);
            continue;
        }
        /* An odd 16-bit count's last 2 bytes of the buffer: untouched. */
        float canary;
        fz_canary(&canary, 1);
        if (memcmp((char *)out + n * es, (const char *)&canary + n * es % 4, nf * 4 - n * es))
            fz_fail("tier %s wrote past the table", peak_isa_name(fz_tier[t]));
        if (t == 0 && type != PEAK_F32) {
            /* the scalar float32 table, converted */
            float *f32 = malloc(n * sizeof *f32);
            uint16_t *want16 = malloc(n * sizeof *want16);
            if (!f32 || !want16)
                abort();
            unsigned csr2 = fz_ftz_set(ftz);
            const peak_status s32 = peak_pe_table(f32, PEAK_F32, n_pos, d, pos0,
                                                  null_params ? NULL : &prm, NULL);
            fz_ftz_restore(csr2);
            if (s32 != PEAK_OK || peak_convert(want16, type, f32, PEAK_F32, n, NULL) != PEAK_OK)
                fz_fail("scalar: the float32 table or its conversion failed");
            fz_expect_rounded16("entry", (const uint16_t *)(const void *)out, want16, f32, n, d,
                                type);
            free(f32);
            free(want16);
            ref = fz_dup(out, nf);
            continue;
        }
        if (t == 0) {
            ref = fz_dup(out, n);
            const int odd_zero = prm.layout != PEAK_PE_INTERLEAVED && (d & 1);
            for (size_t k = 0; k < n; k++) {
                if (!(fabsf(out[k]) <= 1.0f))
                    fz_fail("scalar: entry (%zu, %zu) = %a is not in [-1, 1]", k / d, k % d,
                            (double)out[k]);
                if (odd_zero && k % d == d - 1 && out[k] != 0.0f)
                    fz_fail("scalar: odd last column (%zu) = %a, not 0", k / d,
                            (double)out[k]);
            }
            continue;
        }
        if (type != PEAK_F32) {
            if (memcmp(out, ref, n * es) != 0)
                fz_fail("tier %s: the 16-bit table is not the scalar tier's bytes",
                        peak_isa_name(fz_tier[t]));
            continue;
        }
        for (size_t k = 0; k < n; k++)
            if (fz_bits(out[k]) != fz_bits(ref[k]))
                fz_fail("tier %s: entry (%zu, %zu) = %a (0x%08x), scalar %a (0x%08x)",
                        peak_isa_name(fz_tier[t]), k / d, k % d, (double)out[k],
                        fz_bits(out[k]), (double)ref[k], fz_bits(ref[k]));
    }
    peak_isa_reset();
    free(ref);
    fz_free(out);
    return 0;
}
