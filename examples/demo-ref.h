/*
 * demo-ref.h - the PyTorch reference data (tests/data/demo-*) and the
 * comparisons peak-demo makes against it.
 *
 * demo-manifest.txt is line-based text: "key value..." lines, '#' comments.
 * Its "param" lines must match demo-gen.c's table and its model constants
 * peak-demo's, or the data was made for another model and nothing is
 * compared.  "tensor name file dims..." lines name raw little-endian float32
 * files, row-major.
 */
#ifndef PEAK_DEMO_REF_H
#define PEAK_DEMO_REF_H

#include <stddef.h>
#include <stdint.h>

enum { DEMO_REF_MAX_LINES = 128, DEMO_REF_MAX_WORDS = 40 };

typedef struct demo_ref_line {
    int n_words;
    char *words[DEMO_REF_MAX_WORDS];
} demo_ref_line;

typedef struct demo_ref {
    char dir[4096];
    char *text; /* the manifest, split in place into the words below */
    int n_lines;
    demo_ref_line lines[DEMO_REF_MAX_LINES];
} demo_ref;

/* Reads DIR/demo-manifest.txt.  0 on success; -1 with a message on stderr. */
int demo_ref_open(demo_ref *r, const char *dir);
void demo_ref_close(demo_ref *r);

/* The first line whose first word is key, or NULL. */
const demo_ref_line *demo_ref_find(const demo_ref *r, const char *key);

/* Checks the model constants and the parameter recipe against demo-gen.h.
   0 if they all match; -1 after printing every mismatch. */
int demo_ref_check_model(const demo_ref *r);

/* Loads tensor `name`, which must have exactly `count` elements.  Returns a
   malloc'd array, or NULL with a message on stderr. */
float *demo_ref_load(const demo_ref *r, const char *name, size_t count);

/* The largest |a[i] - b[i]| (+inf if either is NaN) and its index. */
typedef struct demo_diff {
    double max_abs;
    size_t where;
} demo_diff;

demo_diff demo_max_abs_diff(const float *a, const float *b, size_t n);

#endif /* PEAK_DEMO_REF_H */
