#include "demo-ref.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo-gen.h"

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        char *grown = realloc(buf, cap * 2);
        if (!grown) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = grown;
        cap *= 2;
    }
    if (buf)
        buf[len] = '\0';
    fclose(f);
    return buf;
}

/* Splits one line (already NUL-terminated) into words, in place. */
static void split_words(demo_ref_line *line, char *s)
{
    line->n_words = 0;
    while (*s && line->n_words < DEMO_REF_MAX_WORDS) {
        while (isspace((unsigned char)*s))
            s++;
        if (!*s)
            break;
        line->words[line->n_words++] = s;
        while (*s && !isspace((unsigned char)*s))
            s++;
        if (*s)
            *s++ = '\0';
    }
}

static void split_lines(demo_ref *r)
{
    char *s = r->text;
    r->n_lines = 0;
    while (*s && r->n_lines < DEMO_REF_MAX_LINES) {
        char *end = strchr(s, '\n');
        char *next = end ? end + 1 : s + strlen(s);
        if (end)
            *end = '\0';
        if (*s != '#') {
            split_words(&r->lines[r->n_lines], s);
            if (r->lines[r->n_lines].n_words > 0)
                r->n_lines++;
        }
        s = next;
    }
}

int demo_ref_open(demo_ref *r, const char *dir)
{
    memset(r, 0, sizeof *r);
    if (strlen(dir) + 32 > sizeof r->dir) {
        fprintf(stderr, "peak-demo: data directory name too long\n");
        return -1;
    }
    strcpy(r->dir, dir);
    char path[sizeof r->dir + 32];
    snprintf(path, sizeof path, "%s/demo-manifest.txt", dir);
    r->text = read_text(path);
    if (!r->text) {
        fprintf(stderr, "peak-demo: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    split_lines(r);
    return 0;
}

void demo_ref_close(demo_ref *r)
{
    free(r->text);
    r->text = NULL;
}

const demo_ref_line *demo_ref_find(const demo_ref *r, const char *key)
{
    for (int i = 0; i < r->n_lines; i++) {
        if (strcmp(r->lines[i].words[0], key) == 0)
            return &r->lines[i];
    }
    return NULL;
}

/* ---- model check ------------------------------------------------------ */

static int expect_values(const demo_ref *r, const char *key, const long long *want, int n)
{
    const demo_ref_line *l = demo_ref_find(r, key);
    int ok = l && l->n_words == n + 1;
    for (int i = 0; ok && i < n; i++)
        ok = strtoll(l->words[i + 1], NULL, 0) == want[i];
    if (!ok)
        fprintf(stderr, "peak-demo: manifest: '%s' is not %lld%s as in peak-demo\n", key, want[0],
                n > 1 ? " ..." : "");
    return ok ? 0 : -1;
}

static int expect_value(const demo_ref *r, const char *key, long long want)
{
    return expect_values(r, key, &want, 1);
}

static int check_constants(const demo_ref *r)
{
    const long long lengths[DEMO_BATCH] = {demo_src_lengths[0], demo_src_lengths[1]};
    int bad = 0;
    bad |= expect_value(r, "format", 1);
    bad |= expect_value(r, "d_model", DEMO_D_MODEL);
    bad |= expect_value(r, "heads", DEMO_HEADS);
    bad |= expect_value(r, "d_ff", DEMO_D_FF);
    bad |= expect_value(r, "max_len", DEMO_MAX_LEN);
    bad |= expect_value(r, "batch", DEMO_BATCH);
    bad |= expect_value(r, "src_len", DEMO_SRC_LEN);
    bad |= expect_value(r, "tgt_len", DEMO_TGT_LEN);
    bad |= expect_values(r, "src_lengths", lengths, DEMO_BATCH);
    bad |= expect_value(r, "vocab", DEMO_VOCAB);
    bad |= expect_value(r, "pad_id", DEMO_PAD_ID);
    bad |= expect_value(r, "tokens_src_id", DEMO_TOKENS_SRC_ID);
    bad |= expect_value(r, "tokens_tgt_id", DEMO_TOKENS_TGT_ID);
    const demo_ref_line *seed = demo_ref_find(r, "seed");
    if (!seed || seed->n_words != 2 || strtoull(seed->words[1], NULL, 0) != DEMO_SEED) {
        fprintf(stderr, "peak-demo: manifest: 'seed' differs from peak-demo's\n");
        bad = -1;
    }
    return bad;
}

static uint32_t float_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static int param_matches(const demo_ref_line *l, const demo_param *p)
{
    return l->n_words == 6 && strcmp(l->words[1], p->name) == 0 &&
           strtoul(l->words[2], NULL, 0) == p->tensor_id &&
           strtoull(l->words[3], NULL, 0) == p->count &&
           strtoul(l->words[4], NULL, 0) == float_bits(demo_param_amplitude(p)) &&
           l->words[5][0] == (char)p->kind && l->words[5][1] == '\0';
}

static int check_params(const demo_ref *r)
{
    size_t next = 0;
    int bad = 0;
    for (int i = 0; i < r->n_lines; i++) {
        const demo_ref_line *l = &r->lines[i];
        if (strcmp(l->words[0], "param") != 0)
            continue;
        const demo_param *p = demo_param_at(next++);
        if (!p || !param_matches(l, p)) {
            fprintf(stderr, "peak-demo: manifest: param line %zu (%s) differs from demo-gen.c\n",
                    next, l->n_words > 1 ? l->words[1] : "?");
            bad = -1;
        }
    }
    if (next != demo_param_count()) {
        fprintf(stderr, "peak-demo: manifest: %zu params, demo-gen.c has %zu\n", next,
                demo_param_count());
        bad = -1;
    }
    return bad;
}

int demo_ref_check_model(const demo_ref *r)
{
    int bad = check_constants(r);
    bad |= check_params(r);
    if (bad)
        fprintf(stderr, "peak-demo: the reference data in %s was made for another model; "
                        "rerun scripts/make-demo-ref.py\n", r->dir);
    return bad;
}

/* ---- tensors ---------------------------------------------------------- */

static int host_is_little_endian(void)
{
    const uint32_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

static void from_little_endian(float *p, size_t n)
{
    if (host_is_little_endian())
        return;
    for (size_t i = 0; i < n; i++) {
        unsigned char b[4], s[4];
        memcpy(b, &p[i], 4);
        s[0] = b[3], s[1] = b[2], s[2] = b[1], s[3] = b[0];
        memcpy(&p[i], s, 4);
    }
}

static size_t tensor_count(const demo_ref_line *l)
{
    size_t count = 1;
    for (int i = 3; i < l->n_words; i++)
        count *= (size_t)strtoull(l->words[i], NULL, 10);
    return count;
}

static const demo_ref_line *find_tensor(const demo_ref *r, const char *name)
{
    for (int i = 0; i < r->n_lines; i++) {
        const demo_ref_line *l = &r->lines[i];
        if (strcmp(l->words[0], "tensor") == 0 && l->n_words >= 4 && strcmp(l->words[1], name) == 0)
            return l;
    }
    return NULL;
}

static int read_exact(const char *path, float *out, size_t count)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "peak-demo: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t got = fread(out, sizeof(float), count, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != count || extra) {
        fprintf(stderr, "peak-demo: %s: expected exactly %zu floats\n", path, count);
        return -1;
    }
    from_little_endian(out, count);
    return 0;
}

float *demo_ref_load(const demo_ref *r, const char *name, size_t count)
{
    const demo_ref_line *l = find_tensor(r, name);
    if (!l) {
        fprintf(stderr, "peak-demo: manifest has no tensor '%s'\n", name);
        return NULL;
    }
    if (tensor_count(l) != count) {
        fprintf(stderr, "peak-demo: tensor '%s' has %zu elements, expected %zu\n", name,
                tensor_count(l), count);
        return NULL;
    }
    char path[sizeof r->dir + 256];
    snprintf(path, sizeof path, "%s/%s", r->dir, l->words[2]);
    float *data = malloc(count * sizeof(float));
    if (!data) {
        fprintf(stderr, "peak-demo: out of memory loading %s\n", path);
        return NULL;
    }
    if (read_exact(path, data, count) != 0) {
        free(data);
        return NULL;
    }
    return data;
}

demo_diff demo_max_abs_diff(const float *a, const float *b, size_t n)
{
    demo_diff d = {0.0, 0};
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - (double)b[i]);
        if (isnan(e)) /* a NaN, or infinities: never within a tolerance */
            e = INFINITY;
        if (e > d.max_abs) {
            d.max_abs = e;
            d.where = i;
        }
    }
    return d;
}
