#include "tester.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- buffers ------------------------------------------------------------------ */

static peak_tester_buf *new_buf(peak_tester_problem *p, const char *name)
{
    CHECK(p->nbufs < PEAK_TESTER_MAX_BUFS, "%s: more than %d buffers", name,
          PEAK_TESTER_MAX_BUFS);
    peak_tester_buf *b = &p->buf[p->nbufs++];
    memset(b, 0, sizeof *b);
    b->name = name;
    b->alias_of = -1;
    return b;
}

static float *alloc_buf(peak_tester_problem *p, const char *name, size_t rows, size_t cols,
                        ptrdiff_t ld, size_t skew, int output)
{
    peak_tester_buf *b = new_buf(p, name);
    b->rows = rows;
    b->cols = cols;
    b->ld = ld;
    b->n = (rows - 1) * (size_t)ld + cols;
    b->output = output;
    b->p = peak_test_alloc(b->n, (p->c.misalign + skew) % 16);
    return b->p;
}

float *peak_tester_input(peak_tester_problem *p, const char *name, size_t rows, size_t cols,
                         ptrdiff_t ld, size_t skew)
{
    return alloc_buf(p, name, rows, cols, ld, skew, 0);
}

float *peak_tester_output(peak_tester_problem *p, const char *name, size_t rows, size_t cols,
                          ptrdiff_t ld, size_t skew, enum peak_tester_cmp cmp, double tol)
{
    float *out = alloc_buf(p, name, rows, cols, ld, skew, 1);
    p->buf[p->nbufs - 1].cmp = cmp;
    p->buf[p->nbufs - 1].tol = tol;
    return out;
}

size_t peak_tester_index(const peak_tester_problem *p, const float *buf)
{
    for (size_t k = 0; k < p->nbufs; k++)
        if (p->buf[k].p == buf && p->buf[k].alias_of < 0)
            return k;
    ck_abort_msg("peak_tester_index: not a buffer of this problem");
    return 0;
}

float *peak_tester_alias(peak_tester_problem *p, const char *name, const float *of,
                         enum peak_tester_cmp cmp, double tol)
{
    const size_t k = peak_tester_index(p, of);
    peak_tester_buf *b = new_buf(p, name);
    const peak_tester_buf *o = &p->buf[k];
    b->p = o->p;
    b->rows = o->rows;
    b->cols = o->cols;
    b->ld = o->ld;
    b->n = o->n;
    b->output = 1;
    b->alias_of = (int)k;
    b->cmp = cmp;
    b->tol = tol;
    return b->p;
}

void peak_tester_fill(peak_tester_problem *p, float *buf, float lo, float hi)
{
    const peak_tester_buf *b = &p->buf[peak_tester_index(p, buf)];
    for (size_t t = 0; t < b->rows; t++)
        peak_test_fill_uniform(b->p + t * (size_t)b->ld, b->cols, &p->rng, lo, hi);
}

const float *peak_tester_before(const peak_tester_problem *p, const float *buf)
{
    return p->buf[peak_tester_index(p, buf)].before;
}

/* ---- running -------------------------------------------------------------------- */

const char *peak_tester_describe(const peak_tester_problem *p)
{
    static char text[160 + sizeof p->note];
    const peak_tester_case *c = &p->c;
    snprintf(
        text, sizeof text,
        "%s: n %zu n2 %zu rows %zu gap %zu misalign %zu alias %d variant %u data %d param %g%s%s",
        peak_isa_name(peak_test_isa), c->n, c->n2, c->rows, c->gap, c->misalign, c->alias,
        c->variant, c->data, (double)c->param, p->note[0] ? " " : "", p->note);
    return text;
}

int peak_tester_setup(const peak_tester_family *f, const peak_tester_case *c,
                      peak_tester_problem *p)
{
    memset(p, 0, sizeof *p);
    p->c = *c;
    p->rng = c->seed;
    if (f->setup(p))
        return 1;
    peak_tester_free(f, p);
    return 0;
}

void peak_tester_free(const peak_tester_family *f, peak_tester_problem *p)
{
    if (f->teardown)
        f->teardown(p);
    for (size_t k = 0; k < p->nbufs; k++) {
        if (p->buf[k].alias_of >= 0)
            continue;
        peak_test_free(p->buf[k].p);
        free(p->buf[k].before);
    }
    p->nbufs = 0;
}

void peak_tester_snapshot(peak_tester_problem *p)
{
    for (size_t k = 0; k < p->nbufs; k++) {
        peak_tester_buf *b = &p->buf[k];
        if (b->alias_of >= 0)
            continue;
        if (!b->before && !(b->before = malloc(b->n * sizeof(float))))
            abort();
        memcpy(b->before, b->p, b->n * sizeof(float));
    }
    for (size_t k = 0; k < p->nbufs; k++)
        if (p->buf[k].alias_of >= 0)
            p->buf[k].before = p->buf[p->buf[k].alias_of].before;
}

static void restore(peak_tester_problem *p)
{
    for (size_t k = 0; k < p->nbufs; k++)
        if (p->buf[k].alias_of < 0)
            memcpy(p->buf[k].p, p->buf[k].before, p->buf[k].n * sizeof(float));
}

void peak_tester_expect_rejected(const peak_tester_problem *p, const char *what, peak_status got,
                                 peak_status want)
{
    CHECK(got == want, "%s: %s: status %d, want %d", peak_isa_name(peak_test_isa), what, (int)got,
          (int)want);
    for (size_t k = 0; k < p->nbufs; k++)
        CHECK(peak_test_bytes_equal(p->buf[k].p, p->buf[k].before, p->buf[k].n * sizeof(float)),
              "%s: %s: %s changed", peak_isa_name(peak_test_isa), what, p->buf[k].name);
}

static int entry_ok(const peak_tester_buf *b, int how, double ref, float got)
{
    if (how == PEAK_TESTER_ENTRY_NONFINITE)
        return !isfinite(got);
    if (isnan(ref) || isnan(got))
        return isnan(ref) && isnan(got);
    const float want = (float)ref;
    switch (how == PEAK_TESTER_ENTRY_EXACT ? PEAK_TESTER_EXACT : b->cmp) {
    case PEAK_TESTER_EXACT:
        return peak_test_bytes_equal(&want, &got, sizeof got);
    case PEAK_TESTER_REL:
        if (isinf(ref))
            return (double)got == ref;
        return fabs((double)got - ref) <= b->tol * fmax(1.0, fabs(ref));
    case PEAK_TESTER_ULP:
        return (double)peak_test_ulp_diff(got, want) <= b->tol;
    case PEAK_TESTER_ULP_NORMAL:
        if (fabs(ref) < (double)FLT_MIN)
            return fabs((double)got - ref) <= (double)FLT_MIN;
        return (double)peak_test_ulp_diff(got, want) <= b->tol;
    case PEAK_TESTER_ABS:
        return fabs((double)got - ref) <= b->bound;
    case PEAK_TESTER_ABS_REL:
        if (isinf(ref))
            return (double)got == ref;
        return fabs((double)got - ref) <= b->tol * (1.0 + fabs(ref));
    }
    return 0;
}

/* The long double oracles are emulated in software on AArch64 (binary128),
   so calls of more than 2048 rows compare a sample: the first and last 256
   rows (a pipeline's start and end) and every 7th (every residue of a
   row's alignment modulo 16). */
static int checked_row(const peak_tester_family *f, size_t rows, size_t t)
{
    return f->every_row || rows <= 2048 || t < 256 || t + 256 >= rows || t % 7 == 0;
}

static const char *how_text(int how)
{
    return how == PEAK_TESTER_ENTRY_EXACT ? " exactly" : how ? " or any non-finite value" : "";
}

static void check_output(const peak_tester_family *f, const peak_tester_problem *p, size_t k,
                         double *ref)
{
    const peak_tester_buf *b = &p->buf[k];
    for (size_t t = 0; t < b->rows; t++) {
        if (!checked_row(f, b->rows, t))
            continue;
        memset(p->exact, 0, b->cols);
        f->oracle_row(p, k, t, ref);
        const float *row = b->p + t * (size_t)b->ld;
        for (size_t j = 0; j < b->cols; j++)
            CHECK(entry_ok(b, p->exact[j], ref[j], row[j]),
                  "%s: %s[%zu,%zu] = %.9g (%a), want %.9g%s (bound %.3g)", peak_tester_describe(p),
                  b->name, t, j, (double)row[j], (double)row[j], ref[j], how_text(p->exact[j]),
                  b->cmp == PEAK_TESTER_ABS ? b->bound : b->tol);
        if (f->check_row)
            f->check_row(p, k, t, ref, row);
    }
    /* An output's gaps keep the canary; an input it aliases had it there. */
    for (size_t t = 0; t + 1 < b->rows; t++)
        for (size_t g = b->cols; g < (size_t)b->ld; g++)
            CHECK(peak_test_is_canary(b->p[t * (size_t)b->ld + g]), "%s: gap of %s row %zu written",
                  peak_tester_describe(p), b->name, t);
}

static int aliased(const peak_tester_problem *p, size_t k)
{
    for (size_t o = 0; o < p->nbufs; o++)
        if (p->buf[o].alias_of == (int)k)
            return 1;
    return 0;
}

void peak_tester_same_bits(const peak_tester_family *f, peak_tester_problem *p, peak_isa isa)
{
    float *got[PEAK_TESTER_MAX_BUFS] = {0};
    for (size_t k = 0; k < p->nbufs; k++) {
        const peak_tester_buf *b = &p->buf[k];
        if (!b->output)
            continue;
        if (!(got[k] = malloc(b->n * sizeof(float))))
            abort();
        memcpy(got[k], b->p, b->n * sizeof(float));
    }
    restore(p);
    ck_assert_int_eq(peak_isa_force(isa), PEAK_OK);
    const peak_status s = f->call(p);
    ck_assert_int_eq(peak_isa_force(peak_test_isa), PEAK_OK);
    ck_assert_int_eq(s, PEAK_OK);
    for (size_t k = 0; k < p->nbufs; k++) {
        const peak_tester_buf *b = &p->buf[k];
        for (size_t e = 0; got[k] && e < b->n; e++)
            CHECK(peak_test_bytes_equal(&got[k][e], &b->p[e], sizeof(float)),
                  "%s: %s float %zu: %a, the %s tier's %a", peak_tester_describe(p), b->name, e,
                  (double)got[k][e], peak_isa_name(isa), (double)b->p[e]);
    }
    for (size_t k = 0; k < PEAK_TESTER_MAX_BUFS; k++)
        free(got[k]);
}

/* The PEAK_TESTER_ABS bounds, from the inputs as the call reads them. */
static void set_bounds(const peak_tester_family *f, peak_tester_problem *p)
{
    for (size_t k = 0; k < p->nbufs; k++)
        p->buf[k].bound = p->buf[k].tol * (f->abs_scale ? f->abs_scale(p, k) : 1.0);
}

void peak_tester_run(const peak_tester_family *f, peak_tester_problem *p)
{
    peak_tester_snapshot(p);
    set_bounds(f, p);
    const peak_status s = f->call(p);
    CHECK(s == PEAK_OK, "%s: status %d", peak_tester_describe(p), (int)s);
    size_t widest = 1;
    for (size_t k = 0; k < p->nbufs; k++)
        if (p->buf[k].cols > widest)
            widest = p->buf[k].cols;
    double *ref = malloc(widest * sizeof *ref);
    p->exact = malloc(widest);
    if (!ref || !p->exact)
        abort();
    for (size_t k = 0; k < p->nbufs; k++) {
        if (p->buf[k].output)
            check_output(f, p, k, ref);
        else if (!aliased(p, k))
            CHECK(peak_test_bytes_equal(p->buf[k].p, p->buf[k].before,
                                        p->buf[k].n * sizeof(float)),
                  "%s: input %s modified", peak_tester_describe(p), p->buf[k].name);
    }
    free(ref);
    free(p->exact);
    p->exact = NULL;
    if (f->same_bits && peak_test_isa != PEAK_ISA_SCALAR)
        peak_tester_same_bits(f, p, PEAK_ISA_SCALAR);
}

void peak_tester_check(const peak_tester_family *f, const peak_tester_case *c)
{
    peak_tester_problem p;
    if (!peak_tester_setup(f, c, &p))
        return;
    peak_tester_run(f, &p);
    peak_tester_free(f, &p);
}

/* ---- the standard sweeps ---------------------------------------------------------- */

/* The families of this process's suite (Check forks each test from it).
   A sweep's loop index is family * SWEEP_STRIDE + the sweep's own index. */
static const peak_tester_family *fams[PEAK_TESTER_MAX_FAMILIES];
static int n_fams;
#define SWEEP_STRIDE 1000
#define FAMILY(i) (fams[(i) / SWEEP_STRIDE])
#define INDEX(i) ((i) % SWEEP_STRIDE)

static void check_seeded(const peak_tester_family *f, peak_tester_case c, uint64_t seed)
{
    c.seed = seed;
    peak_tester_check(f, &c);
}

static void check_at(const peak_tester_family *f, peak_tester_case c, size_t n, uint64_t seed)
{
    c.n = n;
    check_seeded(f, c, seed);
}

/* Which length a size sweep varies: case.n from base, or case.n2 from
   base_n2. */
enum { DIM_N, DIM_N2, N_DIMS };

static peak_tester_case dim_base(const peak_tester_family *f, int dim)
{
    return dim == DIM_N2 ? f->base_n2 : f->base;
}

/* Size n of length `dim` at misalignment n % 16: every misalignment, and 0
   at the multiples of 16, without a run of its own.  Every variant, where
   the family asks. */
static void check_size(const peak_tester_family *f, peak_tester_case c, int dim, size_t n,
                       uint64_t seed)
{
    c.misalign = (c.misalign + n) % 16;
    if (dim == DIM_N2)
        c.n2 = n;
    else
        c.n = n;
    if (!f->sizes_every_variant) {
        check_seeded(f, c, seed);
        return;
    }
    for (unsigned v = 0; v < f->n_variants; v++) {
        c.variant = v;
        check_seeded(f, c, seed + 1000 * v);
    }
}

/* Sizes 1..70 run as 7 Check tests of 10 sizes each (a fork per size costs
   more than the size itself under AddressSanitizer); the 8th holds the
   powers of two +-1 from 128 to 1024, where unrolled loops end.  Each size
   at misalignment n % 16, and for 2-D families again with row gaps. */
#define SIZE_GROUP 10
#define SIZE_GROUPS 7
static const size_t pow2_sizes[] = {127, 128, 129, 255, 256, 257, 511, 512, 513, 1023, 1024, 1025};

/* 2-D families: each size once more with a row gap of 1..3 floats, at
   another misalignment. */
static void check_size_gaps(const peak_tester_family *f, int dim, size_t n, uint64_t seed)
{
    peak_tester_case c = dim_base(f, dim);
    check_size(f, c, dim, n, seed);
    if (c.rows < 2)
        return;
    c.gap = 1 + n % 3;
    c.misalign += 5;
    check_size(f, c, dim, n, seed + 50);
}

/* Loop indices 0..SIZE_GROUPS sweep n; the next SIZE_GROUPS + 1, n2. */
START_TEST(sweep_sizes)
{
    const peak_tester_family *f = FAMILY(_i);
    const int dim = (int)(INDEX(_i) / (SIZE_GROUPS + 1));
    const size_t i = (size_t)INDEX(_i) % (SIZE_GROUPS + 1);
    if (i < SIZE_GROUPS) {
        for (size_t n = 1 + i * SIZE_GROUP; n <= (i + 1) * SIZE_GROUP; n++)
            check_size_gaps(f, dim, n, 100 + n);
        return;
    }
    for (size_t k = 0; k < sizeof pow2_sizes / sizeof pow2_sizes[0]; k++)
        check_size_gaps(f, dim, pow2_sizes[k], 150 + k);
}
END_TEST

/* Each variant (optional operands, modes) at a size with a tail on every
   vector width (37 = 2 * 16 + 5) and at one without (64). */
START_TEST(sweep_variants)
{
    const peak_tester_family *f = FAMILY(_i);
    peak_tester_case c = f->base;
    c.variant = (unsigned)INDEX(_i);
    check_at(f, c, 37, 300 + c.variant);
    check_at(f, c, 64, 340 + c.variant);
}
END_TEST

/* Row gaps of 1, 3, 16 and 37 floats, each at another misalignment, at
   four lengths from 5 to 56. */
START_TEST(sweep_gaps)
{
    static const size_t gaps[] = {1, 3, 16, 37};
    const peak_tester_family *f = FAMILY(_i);
    for (size_t k = 0; k < 4; k++) {
        peak_tester_case c = f->base;
        c.gap = gaps[k];
        c.misalign = 1 + k * 4;
        c.variant = f->sizes_every_variant ? (unsigned)k % f->n_variants : c.variant;
        check_at(f, c, 5 + (size_t)INDEX(_i) * 17, 400 + k);
    }
}
END_TEST

/* Every misalignment 1..15 floats (a 4-byte step: vector loads and stores
   must be unaligned), with and without a gap, at a length with tails. */
START_TEST(sweep_misalign)
{
    const peak_tester_family *f = FAMILY(_i);
    for (size_t mis = 1; mis < 16; mis++) {
        peak_tester_case c = f->base;
        c.misalign = mis;
        c.gap = (size_t)INDEX(_i) * 5;
        check_at(f, c, 13 + (size_t)INDEX(_i) * 24, 450 + mis);
    }
}
END_TEST

/* Each in-place aliasing the family allows at every size 1..70, at
   misalignment n % 16 and, for 2-D operands, with gaps. */
START_TEST(sweep_in_place)
{
    const peak_tester_family *f = FAMILY(_i);
    for (size_t n = 1; n <= 70; n++) {
        peak_tester_case c = f->base;
        c.alias = INDEX(_i);
        c.gap = 2;
        check_size(f, c, DIM_N, n, 500 + n);
    }
}
END_TEST

void peak_tester_add_sweeps(TCase *tc, const peak_tester_family *f)
{
    CHECK(n_fams < PEAK_TESTER_MAX_FAMILIES, "more than %d families", PEAK_TESTER_MAX_FAMILIES);
    const int at = n_fams * SWEEP_STRIDE;
    fams[n_fams++] = f;
    tcase_add_loop_test(tc, sweep_sizes, at,
                        at + (SIZE_GROUPS + 1) * (f->sweeps_n2 ? N_DIMS : 1));
    if (f->n_variants && !f->sizes_every_variant)
        tcase_add_loop_test(tc, sweep_variants, at, at + (int)f->n_variants);
    if (f->base.rows > 1)
        tcase_add_loop_test(tc, sweep_gaps, at, at + 4);
    tcase_add_loop_test(tc, sweep_misalign, at, at + 2);
    if (f->n_aliases)
        tcase_add_loop_test(tc, sweep_in_place, at + 1, at + f->n_aliases + 1);
}
