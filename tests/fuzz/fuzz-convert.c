/*
 * fuzz-convert.c - peak_convert: every tier returns the scalar tier's bits
 * (peak.h), and the scalar result is what peak.h's rules give, checked
 * here on the values: widening is exact (the decoded 16-bit value); a
 * narrowed finite value is the nearest of the type (no neighbour of its
 * code is nearer; a tie has the even code; past the largest finite, inf
 * by the same rule); NaN stays NaN, quiet, with its sign.  Under FTZ/DAZ
 * nothing changes.  One documented invalid argument, or none.
 */
#include "fuzz.h"

/* A 16-bit code of type t as a double (NaN as NaN). */
static double fz_half_value(peak_dtype t, uint16_t h)
{
    const int mbits = t == PEAK_BF16 ? 7 : 10, ebits = t == PEAK_BF16 ? 8 : 5;
    const int bias = (1 << (ebits - 1)) - 1, e = (h >> mbits) & ((1 << ebits) - 1);
    const int m = h & ((1 << mbits) - 1);
    const double s = (h & 0x8000) ? -1.0 : 1.0;
    if (e == (1 << ebits) - 1)
        return m ? NAN : s * INFINITY;
    return s * ldexp((double)(e ? m | (1 << mbits) : m), (e ? e : 1) - bias - mbits);
}

/* The magnitude of code c (sign dropped) with inf read as the next power
   of two, so that overflow follows the rounding rule. */
static double fz_mag(peak_dtype t, uint16_t c)
{
    const uint16_t inf = t == PEAK_BF16 ? 0x7f80 : 0x7c00;
    c &= 0x7fff;
    return c == inf ? ldexp(1.0, t == PEAK_BF16 ? 128 : 16) : fz_half_value(t, c);
}

static void check_narrow(peak_dtype t, float x, uint16_t y)
{
    const uint16_t inf = t == PEAK_BF16 ? 0x7f80 : 0x7c00, quiet = t == PEAK_BF16 ? 0x40 : 0x200;
    if (isnan(x)) {
        if ((y & 0x7fff) <= inf || !(y & quiet) || (y >> 15) != (fz_bits(x) >> 31))
            fz_fail("scalar: NaN 0x%08x -> 0x%04x", fz_bits(x), (unsigned)y);
        return;
    }
    if ((y >> 15) != (fz_bits(x) >> 31) || (y & 0x7fff) > inf)
        fz_fail("scalar: %a -> 0x%04x: sign or NaN", (double)x, (unsigned)y);
    const double a = fabs((double)x), d = fabs(a - fz_mag(t, y)), c = y & 0x7fff;
    for (int k = -1; k <= 1; k += 2) {
        const double n = c + k;
        if (n < 0 || n > inf)
            continue;
        const double dn = fabs(a - fz_mag(t, (uint16_t)n));
        if (dn < d || (dn == d && (y & 1)))
            fz_fail("scalar: %a -> 0x%04x, but 0x%04x is nearer or the even tie", (double)x,
                    (unsigned)y, (unsigned)n);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_setup();
    fz_in in = {data, size};
    const size_t n = fz_len(&in, 1100);
    fz_gen g = fz_gen_read(&in, FZ_ALL);
    static const peak_dtype types[3] = {PEAK_F32, PEAK_BF16, PEAK_F16};
    const peak_dtype xt = types[fz_u8(&in) % 3], yt = types[fz_u8(&in) % 3];
    const int bits_mode = fz_bit(&in), ftz = fz_ftz_bit(&in);
    const size_t mis_x = fz_u8(&in) % 32, mis_y = fz_u8(&in) % 32;
    const size_t xs = peak_dtype_size(xt), ys = peak_dtype_size(yt);

    peak_status want = PEAK_OK;
    int null_y = 0, null_x = 0;
    size_t call_n = n;
    peak_dtype call_xt = xt, call_yt = yt;
    const uint32_t bad = fz_u8(&in);
    if (bad >= 200) {
        want = PEAK_ERR_INVALID_ARG;
        switch (bad % 5) {
        case 0: null_y = 1; break;
        case 1: null_x = 1; break;
        case 2: call_n = 0; break;
        case 3:
            want = PEAK_ERR_UNSUPPORTED;
            call_yt = (peak_dtype)(3 + fz_u8(&in) % 250);
            break;
        default:
            want = PEAK_ERR_OUT_OF_RANGE;
            call_n = (size_t)PTRDIFF_MAX / sizeof(float) + 1 + fz_upto(&in, 1000);
            break;
        }
    }
    fz_describe("convert n %zu %zu-byte -> %zu-byte (types %d -> %d) bits %d ftz %d mis %zu %zu; "
                "call n %zu types %d -> %d null %d %d -> %s",
                n, xs, ys, (int)xt, (int)yt, bits_mode, ftz, mis_x, mis_y, call_n, (int)call_xt,
                (int)call_yt, null_y, null_x, fz_status(want));

    /* Buffers in floats (fz_alloc's unit): 16-bit arrays round up by 2 bytes at most. */
    const size_t xf = (n * xs + 3) / 4, yf = (n * ys + 3) / 4;
    float *x = fz_alloc(xf, mis_x), *y = fz_alloc(yf, mis_y);
    if (bits_mode) {
        for (size_t k = 0; k < xf; k++)
            x[k] = fz_from_bits((uint32_t)fz_next(&g.rng));
    } else {
        for (size_t k = 0; k < n; k++) {
            const float f = fz_value(&g);
            if (xt == PEAK_F32)
                x[k] = f;
            else
                peak_kernels_for(PEAK_ISA_SCALAR)->convert((uint16_t *)(void *)x + k, xt, &f,
                                                           PEAK_F32, 1, false);
        }
    }
    float *x0 = fz_dup(x, xf), *y0 = fz_dup(y, yf), *ref = fz_dup(y, yf);

    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        memcpy(y, y0, yf * sizeof *y);
        unsigned csr = fz_ftz_set(ftz);
        const peak_status s = peak_convert(null_y ? NULL : y, call_yt, null_x ? NULL : x, call_xt,
                                           call_n, NULL);
        fz_ftz_restore(csr);
        fz_expect_status(t, s, want);
        fz_expect_unchanged(t, "x", x, x0, xf);
        if (s != PEAK_OK) {
            fz_expect_unchanged(t, "y", y, y0, yf);
            continue;
        }
        /* Past y's n elements (an odd 16-bit count's last 2 bytes): untouched. */
        if (memcmp((char *)y + n * ys, (char *)y0 + n * ys, yf * 4 - n * ys) != 0)
            fz_fail("tier %s wrote past y", peak_isa_name(fz_tier[t]));
        if (t > 0) {
            if (memcmp(y, ref, n * ys) != 0)
                fz_fail("tier %s: not the scalar tier's bytes", peak_isa_name(fz_tier[t]));
            continue;
        }
        memcpy(ref, y, yf * sizeof *y);
        for (size_t k = 0; k < n; k++) {
            const uint16_t *x16 = (const uint16_t *)(const void *)x, *y16 = (const uint16_t *)(const void *)y;
            const double xv = xt == PEAK_F32 ? (double)x[k] : fz_half_value(xt, x16[k]);
            if (xt == yt) {
                if (memcmp((char *)y + k * ys, (char *)x + k * xs, ys) != 0)
                    fz_fail("scalar: a copy changed element %zu", k);
            } else if (yt == PEAK_F32) {
                if (isnan(xv) ? !isnan(y[k]) || !(fz_bits(y[k]) & 0x400000u)
                              : (double)y[k] != xv || !signbit(y[k]) != !signbit(xv))
                    fz_fail("scalar: widening 0x%04x gave %a", (unsigned)x16[k], (double)y[k]);
            } else {
                /* A 16-bit NaN's sign survives the double (a double NaN
                   does not carry it through every cast). */
                const float xf = xt == PEAK_F32 ? x[k]
                                 : isnan(xv)    ? copysignf(NAN, (x16[k] & 0x8000) ? -1.0f : 1.0f)
                                                : (float)xv;
                check_narrow(yt, xf, y16[k]);
            }
        }
    }
    peak_isa_reset();
    free(x0);
    free(y0);
    free(ref);
    fz_free(y);
    fz_free(x);
    return 0;
}
