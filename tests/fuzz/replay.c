/*
 * replay.c - main() for the fuzz harnesses where libFuzzer is not linked
 * (gcc builds, and every CI configuration but the fuzzing step): runs each
 * file given, or each file in each directory given, once through
 * LLVMFuzzerTestOneInput, in name order.  A failed check aborts with the
 * case printed (fuzz.h); otherwise prints how many inputs ran on which
 * tiers.  meson test --suite fuzz replays the committed corpora, crash
 * regressions included, so every configuration (native, ASan+UBSan,
 * valgrind, qemu-x86_64) runs them.
 */
#include "fuzz.h"

#include <dirent.h>
#include <sys/stat.h>

static size_t replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        exit(2);
    }
    size_t cap = 4096, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap)
            buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    if (!buf)
        abort();
    /* An exact-size copy, so a harness reading past the input is seen. */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact)
        abort();
    memcpy(exact, buf, n);
    free(buf);
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "replay: %s\n", path);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
    size_t runs = 0;
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) {
            fprintf(stderr, "replay: %s: no such file or directory\n", argv[a]);
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            runs += replay_file(argv[a]);
            continue;
        }
        struct dirent **names;
        int n = scandir(argv[a], &names, NULL, by_name);
        if (n < 0)
            return 2;
        for (int k = 0; k < n; k++) {
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[a], names[k]->d_name);
            if (names[k]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode))
                runs += replay_file(path);
            free(names[k]);
        }
        free(names);
    }
    fz_setup();
    printf("%s: %zu inputs replayed on tiers", argv[0], runs);
    for (int t = 0; t < fz_ntiers; t++)
        printf(" %s", peak_isa_name(fz_tier[t]));
    printf(": every check held");
    if (fz_rows || fz_skipped)
        printf(" (%zu rows compared, %zu outside the bounded domain)", fz_rows, fz_skipped);
    printf("\n");
    return runs ? 0 : 99;
}
