/*
 * tester.h - the sweeps every kernel family's test runs, written once.
 *
 * A family's test describes one problem (peak_tester_family): how to set up
 * its buffers for a case, how to call its kernel, and its oracle row by
 * row.  The harness owns the buffers and does the rest:
 *   - allocation at an exact size (AddressSanitizer sees any over-read),
 *     misaligned as the case says, every float outside the rows' extents
 *     (row gaps) holding the canary, a NaN, so that a kernel that reads a
 *     gap poisons its row;
 *   - the call on the tier under test, which must return PEAK_OK;
 *   - every output row against the oracle (bit-exact, relative, ULP or
 *     absolute bound per buffer, bit-exact or only non-finite for the
 *     entries the oracle marks so), the family's own checks of a whole row
 *     (check_row), every gap of every output still the canary, every input
 *     not aliased by an output unchanged;
 *   - for a family whose tiers promise the scalar tier's bits, the same
 *     problem on the scalar tier, compared byte for byte (and, for any
 *     other pair of tiers, peak_tester_same_bits);
 *   - the standard sweeps as Check loop tests (peak_tester_add_sweeps):
 *     sizes 1..70 (every tail of 4-, 8- and 16-lane vectors) and powers of
 *     two +-1 (of n, and of n2 where the family has a second length), each
 *     at misalignment n % 16 (2-D families: with and without row gaps;
 *     every variant where the family asks); each variant of the family's
 *     optional operands; row gaps (2-D families); misalignment by 1..15
 *     floats; each in-place aliasing at every size 1..70;
 *   - rejected calls: every buffer byte-identical before and after.
 * The family test keeps its special cases (value ranges, edge inputs) and
 * runs them through peak_tester_check() with a case of its own.
 */
#ifndef PEAK_TESTER_H
#define PEAK_TESTER_H

#include "test-util.h"

/* One case: the shape parameters the sweeps vary.  A family reads what
   applies to it and may give `variant` and `data` meanings of its own. */
typedef struct peak_tester_case {
    size_t n;         /* the swept length: d_model, row length, elements */
    size_t n2;        /* a second length swept on its own (sweeps_n2), e.g. keys */
    size_t rows;      /* rows of each 2-D operand (1 for a vector) */
    size_t gap;       /* floats of gap after each row (ld = n + gap) */
    size_t misalign;  /* floats off a 64-byte boundary (0..15) */
    int alias;        /* 0: outputs separate; 1..n_aliases: in place, as the family numbers them */
    unsigned variant; /* the family's optional operands or modes, 0..n_variants-1 */
    int data;         /* 0: the family's usual inputs; other values: its special inputs */
    float param;      /* a family parameter (eps, scale) */
    uint64_t seed;    /* the fixed seed of the case's inputs */
    const void *opts; /* the family's own parameters beyond these (NULL: its defaults) */
} peak_tester_case;

/* How an output buffer is compared with the oracle. */
enum peak_tester_cmp {
    PEAK_TESTER_EXACT, /* the bits of (float)ref; NaN matches NaN */
    PEAK_TESTER_REL,   /* |got - ref| <= tol * max(1, |ref|); NaN matches NaN */
    PEAK_TESTER_ULP,   /* within tol ULP of (float)ref; NaN matches NaN */
    /* PEAK_TESTER_ULP where |ref| >= FLT_MIN; below it, within FLT_MIN
       absolutely: for results a kernel may flush to zero when subnormal. */
    PEAK_TESTER_ULP_NORMAL,
    /* |got - ref| <= tol * the family's abs_scale of the problem (1 without
       one): for outputs whose error is bounded by an input's magnitude (an
       attention output by the largest |V|), not by their own. */
    PEAK_TESTER_ABS,
    /* |got - ref| <= tol * (1 + |ref|): absolute near 0, relative beyond;
       an infinite ref must be matched exactly. */
    PEAK_TESTER_ABS_REL
};

/* What oracle_row may set in p->exact[j] (0: the buffer's comparison). */
enum peak_tester_entry {
    PEAK_TESTER_ENTRY_EXACT = 1,    /* the bits of (float)ref */
    PEAK_TESTER_ENTRY_NONFINITE = 2 /* any infinity or NaN (ref is not finite) */
};

enum { PEAK_TESTER_MAX_BUFS = 8 };

typedef struct peak_tester_buf {
    const char *name;
    float *p;      /* the buffer (an alias shares another's) */
    float *before; /* its contents right before the call */
    size_t rows, cols, n;
    ptrdiff_t ld;
    int output;
    int alias_of; /* index of the buffer it is, or -1 */
    enum peak_tester_cmp cmp;
    double tol;
    double bound; /* PEAK_TESTER_ABS: tol * abs_scale, set by peak_tester_run */
} peak_tester_buf;

typedef struct peak_tester_problem {
    peak_tester_case c;
    uint64_t rng;
    size_t nbufs;
    peak_tester_buf buf[PEAK_TESTER_MAX_BUFS];
    void *user; /* the family's own state, if any */
    /* For oracle_row: entries it sets to PEAK_TESTER_ENTRY_EXACT (1) here
       (cleared before each row) must be the bits of (float)ref whatever the
       buffer's comparison (a softmax row's masked keys are exactly +0, its
       probabilities within a ULP bound); entries it sets to
       PEAK_TESTER_ENTRY_NONFINITE need only be an infinity or a NaN. */
    unsigned char *exact;
    /* What setup may add to failure messages (peak_tester_describe): the
       family's options beyond the case, e.g. softmax's logit options. */
    char note[160];
} peak_tester_problem;

typedef struct peak_tester_family {
    const char *name;
    /* Allocates the case's buffers (peak_tester_input/output/alias) and fills
       the inputs; returns 0 if the case does not apply (then nothing runs). */
    int (*setup)(peak_tester_problem *p);
    /* Calls the kernel through the public API; the harness has forced the
       tier.  Returns the status. */
    peak_status (*call)(peak_tester_problem *p);
    /* ref[0 .. cols) for row `row` of output buffer `buf`, from the inputs
       as they were before the call (peak_tester_before). */
    void (*oracle_row)(const peak_tester_problem *p, size_t buf, size_t row, double *ref);
    /* Optional: what the family promises of a whole output row beyond its
       entries (a softmax row sums to 1), given the oracle's row and the
       kernel's; called after the entries of the row passed. */
    void (*check_row)(const peak_tester_problem *p, size_t buf, size_t row, const double *ref,
                      const float *got);
    /* Frees p->user (the buffers are the harness's); may be NULL. */
    void (*teardown)(peak_tester_problem *p);
    /* Optional: the scale of output buffer `buf`'s PEAK_TESTER_ABS bound,
       from the inputs as they were right before the call (so a test may
       change them after setup). */
    double (*abs_scale)(const peak_tester_problem *p, size_t buf);
    int same_bits;         /* every tier gives the scalar tier's bits (peak.h) */
    unsigned n_variants;   /* variants swept (all of them at two sizes) */
    int sizes_every_variant; /* the size sweep runs every variant at every size */
    int n_aliases;         /* in-place aliasings swept (1..n_aliases) */
    /* Every output row is checked, however many: without it, calls of more
       than 2048 rows compare a sample (the long double oracles are slow
       where long double is emulated). */
    int every_row;
    peak_tester_case base; /* the case every sweep starts from */
    /* The size sweep runs once more over case.n2 (1..70 and the powers of
       two +-1), from base_n2, where the family has a second length whose
       tails its kernels handle apart from n's (attention's keys). */
    int sweeps_n2;
    peak_tester_case base_n2;
} peak_tester_family;

/* ---- for setup ------------------------------------------------------------ */

/* A rows x cols buffer with row stride ld (>= cols).  `skew` is added to the case's misalignment, so that the operands of one
   call do not share an alignment.  Filled with the canary; returns it. */
float *peak_tester_input(peak_tester_problem *p, const char *name, size_t rows, size_t cols,
                         ptrdiff_t ld, size_t skew);
float *peak_tester_output(peak_tester_problem *p, const char *name, size_t rows, size_t cols,
                          ptrdiff_t ld, size_t skew, enum peak_tester_cmp cmp, double tol);
/* An output that is input `of` (in place): same rows, cols and ld. */
float *peak_tester_alias(peak_tester_problem *p, const char *name, const float *of,
                         enum peak_tester_cmp cmp, double tol);
/* Uniform values in [lo, hi) in the rows' extents of a buffer (gaps keep
   the canary). */
void peak_tester_fill(peak_tester_problem *p, float *buf, float lo, float hi);

/* ---- for the oracle ----------------------------------------------------------- */

/* The contents of a buffer right before the call (same layout). */
const float *peak_tester_before(const peak_tester_problem *p, const float *buf);
/* The index of a buffer, for oracle_row's `buf`. */
size_t peak_tester_index(const peak_tester_problem *p, const float *buf);

/* ---- running ---------------------------------------------------------------- */

/* Sets up, calls and checks one case on the tier under test (and on the
   scalar tier, for same_bits families); then frees it. */
void peak_tester_check(const peak_tester_family *f, const peak_tester_case *c);
/* The same in steps, for tests that change the inputs after setup or check
   more afterwards: setup (returns 0 if the case does not apply), run +
   check, free. */
int peak_tester_setup(const peak_tester_family *f, const peak_tester_case *c,
                      peak_tester_problem *p);
void peak_tester_run(const peak_tester_family *f, peak_tester_problem *p);
void peak_tester_free(const peak_tester_family *f, peak_tester_problem *p);

/* After peak_tester_run: the same call on tier `isa` from the same inputs
   gives the same outputs byte for byte, gaps included (the tier under test
   is forced again afterwards). */
void peak_tester_same_bits(const peak_tester_family *f, peak_tester_problem *p, peak_isa isa);

/* Rejected calls: snapshot every buffer, make the call, then expect status
   `want` and every buffer byte for byte as before. */
void peak_tester_snapshot(peak_tester_problem *p);
void peak_tester_expect_rejected(const peak_tester_problem *p, const char *what, peak_status got,
                                 peak_status want);

/* Adds the standard sweeps of family f to tc (f must outlive the suite);
   up to PEAK_TESTER_MAX_FAMILIES families per program. */
enum { PEAK_TESTER_MAX_FAMILIES = 4 };
void peak_tester_add_sweeps(TCase *tc, const peak_tester_family *f);

/* "<tier> <family> n.. n2.. rows.. gap.. misalign.. alias.. variant.. data..", then
   p->note if set: the case, for failure messages (a static buffer). */
const char *peak_tester_describe(const peak_tester_problem *p);

#endif
