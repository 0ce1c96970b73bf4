/*
 * fuzz-exp.c - peak_exp: every tier returns the scalar tier's bits (peak.h:
 * "Every tier returns the same bits"), and the scalar result is within
 * 1 ULP of e^x for normal results, within one subnormal step below
 * FLT_MIN, +inf exactly from 0x1.62e430p+6, +0 exactly from
 * -0x1.9fe36ap+6 down, never negative, NaN for NaN.  Under FTZ/DAZ the
 * subnormal results become +0 and subnormal inputs count as 0.
 *
 * Also the attention kernels' internal 2^t (the table's exp2 slot, for
 * t <= 1): within 1 ULP of the scalar tier's (see tests/test-exp.c), +0
 * below -126, never negative.
 */
#include "fuzz.h"

static void check_exp_value(float x, float y, int ftz)
{
    if (isnan(x)) {
        if (!isnan(y))
            fz_fail("scalar: exp(NaN) = %a", (double)y);
        return;
    }
    if (ftz && x != 0.0f && fabsf(x) < FLT_MIN)
        x = 0.0f; /* DAZ */
    if (!(y >= 0.0f))
        fz_fail("scalar: exp(%a) = %a is negative", (double)x, (double)y);
    if (x >= 0x1.62e430p+6f) {
        if (y != INFINITY)
            fz_fail("scalar: exp(%a) = %a, want +inf", (double)x, (double)y);
        return;
    }
    if (x <= -0x1.9fe36ap+6f) {
        if (fz_bits(y) != 0)
            fz_fail("scalar: exp(%a) = %a, want +0", (double)x, (double)y);
        return;
    }
    const double e = exp((double)x);
    if (e >= FLT_MIN) {
        const double ulp = (double)nextafterf((float)e, INFINITY) - (double)(float)e;
        if (fabs((double)y - e) > ulp)
            fz_fail("scalar: exp(%a) = %a, e^x = %.9g: more than 1 ulp", (double)x, (double)y,
                    e);
    } else if (ftz) {
        if (y != 0.0f && !(y >= FLT_MIN))
            fz_fail("scalar FTZ: exp(%a) = %a is subnormal", (double)x, (double)y);
    } else if (fabs((double)y - e) > 0x1p-149) {
        fz_fail("scalar: exp(%a) = %a, e^x = %.9g: more than one subnormal step", (double)x,
                (double)y, e);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fz_setup();
    fz_in in = {data, size};
    const size_t n = fz_len(&in, 1100);
    fz_gen g = fz_gen_read(&in, FZ_ALL);
    const int bits_mode = fz_u8(&in) % 4 == 0; /* uniform over all bit patterns */
    const int in_place = fz_bit(&in), ftz = fz_ftz_bit(&in);
    const size_t mis_x = fz_u8(&in) % 32, mis_y = fz_u8(&in) % 32;

    /* One documented invalid argument, or none.  The overlap case needs
       room for y = x + shift: x then has n + shift floats. */
    peak_status want = PEAK_OK;
    int null_y = 0, null_x = 0;
    size_t call_n = n, shift = 0;
    const uint32_t bad = fz_u8(&in);
    if (bad >= 200) {
        want = PEAK_ERR_INVALID_ARG;
        switch (bad % 5) {
        case 0: null_y = 1; break;
        case 1: null_x = 1; break;
        case 2: call_n = 0; break;
        case 3: shift = n > 1 ? 1 + fz_upto(&in, n - 2) : 0; break; /* y overlaps x */
        default:
            want = PEAK_ERR_OUT_OF_RANGE;
            call_n = (size_t)PTRDIFF_MAX / sizeof(float) + 1 + fz_upto(&in, 1000);
            break;
        }
        if (want == PEAK_ERR_INVALID_ARG && bad % 5 == 3 && !shift)
            null_x = 1; /* n == 1 cannot overlap partially */
    }
    fz_describe("exp n %zu range [%g, %g) specials %u/256 kinds 0x%x bits %d in_place %d ftz %d "
                "mis %zu %zu; call n %zu shift %zu null %d %d -> %s",
                n, (double)g.lo, (double)g.hi, g.rate, g.kinds, bits_mode, in_place, ftz, mis_x,
                mis_y, call_n, shift, null_y, null_x, fz_status(want));

    const size_t nx = n + shift;
    float *x0 = fz_alloc(nx, 0);
    for (size_t k = 0; k < nx; k++)
        x0[k] = bits_mode ? fz_from_bits((uint32_t)fz_next(&g.rng)) : fz_value(&g);
    float *x = fz_alloc(nx, mis_x);
    float *y = in_place || shift ? x + shift : fz_alloc(n, mis_y);
    float *y_before = fz_dup(y, n);
    float *ref = fz_alloc(n, 0);

    for (int t = 0; t < fz_ntiers; t++) {
        fz_force(t);
        memcpy(x, x0, nx * sizeof *x);
        if (y != x && !shift)
            memcpy(y, y_before, n * sizeof *y);
        unsigned csr = fz_ftz_set(ftz);
        peak_status s = peak_exp(null_y ? NULL : y, null_x ? NULL : x, call_n, NULL);
        fz_ftz_restore(csr);
        fz_expect_status(t, s, want);
        if (s != PEAK_OK) {
            fz_expect_unchanged(t, "x", x, x0, nx);
            if (y != x && !shift)
                fz_expect_unchanged(t, "y", y, y_before, n);
            continue;
        }
        if (!in_place)
            fz_expect_unchanged(t, "x", x, x0, nx);
        if (t == 0) {
            memcpy(ref, y, n * sizeof *y);
            for (size_t k = 0; k < n; k++)
                check_exp_value(x0[k], y[k], ftz);
            continue;
        }
        for (size_t k = 0; k < n; k++)
            if (!fz_same(y[k], ref[k]))
                fz_fail("tier %s: exp(%a) = %a (0x%08x), scalar %a (0x%08x)",
                        peak_isa_name(fz_tier[t]), (double)x0[k], (double)y[k], fz_bits(y[k]),
                        (double)ref[k], fz_bits(ref[k]));
    }

    /* Attention's 2^t, straight through each tier's table row, on
       t = min(x, 1) (its domain). */
    if (want == PEAK_OK) {
        for (int t = 0; t < fz_ntiers; t++) {
            for (size_t k = 0; k < n; k++)
                x[k] = x0[k] > 1.0f ? 1.0f : x0[k];
            unsigned csr = fz_ftz_set(ftz);
            peak_kernels_for(fz_tier[t])->exp2(y, x, n);
            fz_ftz_restore(csr);
            for (size_t k = 0; k < n; k++) {
                float tk = x0[k] > 1.0f ? 1.0f : x0[k];
                if (t == 0) {
                    ref[k] = y[k];
                    if (isnan(tk) != isnan(y[k]) || y[k] < 0.0f ||
                        (tk < -126.0f && fz_bits(y[k]) != 0))
                        fz_fail("scalar: exp2(%a) = %a", (double)tk, (double)y[k]);
                } else if (isnan(ref[k]) ? !isnan(y[k]) : fz_ulp(y[k], ref[k]) > 1) {
                    fz_fail("tier %s: exp2(%a) = %a, scalar %a", peak_isa_name(fz_tier[t]),
                            (double)tk, (double)y[k], (double)ref[k]);
                }
            }
        }
    }
    peak_isa_reset();
    free(y_before);
    fz_free(ref);
    if (y != x && !shift)
        fz_free(y);
    fz_free(x);
    fz_free(x0);
    return 0;
}
