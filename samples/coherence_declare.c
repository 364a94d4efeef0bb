/*
 * coherence_declare.c - a global array made with `declare create` (its
 * device copy is a global of the offloaded code, no data construct at
 * all), filled with `update device`; VARIANT bad brings it back with
 * `update self` every step although the host reads it only every EVERY
 * steps (downloads nobody reads: a waste, not a wrong result).
 *
 * The arrays, at line 39: `#pragma acc declare create(g, gn)`.
 * They are filled at line 86: `#pragma acc update device(g[0:n], gn[0:n])`.
 * Each step runs two compute constructs (lines 88 and 91, `present(g,
 * gn)`), then line 95: `#pragma acc update self(g[0:n])`, which VARIANT
 * fixed guards with `if(s % every == 0)` (line 97). The host reads g every
 * EVERY steps at line 102: `sum += w(k) * g[k];`.
 *
 * Usage: coherence_declare [N [STEPS [EVERY [VARIANT]]]]
 *        defaults: 1048576 100 10 bad; N <= 1048576; VARIANT bad or fixed
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, E = EVERY, B = 8*N
 * bytes): no device allocation for g or gn (globals of the loaded code:
 * the whole arrays), 2 uploads of B (line 86), 2*S launches; VARIANT
 * bad: S downloads of B at line 95, VARIANT fixed: floor(S/E). With
 * `accprof run --check coherence` on a GPU, VARIANT bad: S - floor(S/E)
 * downloads of g at line 95 that the host never read, one C3 proposing
 * the reader's guard as the update's `if`; VARIANT fixed: none.
 *
 * Output: "step <s> checksum <v>" every EVERY steps, "checksum: <their
 * sum>", then "reference: match" when every checksum equals a plain CPU computation (relative
 * 1e-9), else "reference: MISMATCH" and exit status 1. Bad args: exit 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMAX 1048576L

static double g[NMAX], gn[NMAX];
#pragma acc declare create(g, gn)

static long arg_long(int argc, char **argv, int i, long def, long min, long max)
{
    if (argc <= i)
        return def;
    char *end;
    errno = 0;
    long v = strtol(argv[i], &end, 10);
    if (errno || *end || end == argv[i] || v < min || v > max) {
        fprintf(stderr, "%s: argument %d must be an integer in %ld..%ld, got '%s'\n", argv[0], i,
                min, max, argv[i]);
        exit(2);
    }
    return v;
}

static void init(double *a, long len)
{
    for (long k = 0; k < len; k++)
        a[k] = (k % 97 == 0) ? 1.0 : 0.0;
}

static double w(long k) { return (double)(k % 5 + 1); }

int main(int argc, char **argv)
{
    if (argc > 5) {
        fprintf(stderr, "usage: %s [N [STEPS [EVERY [VARIANT]]]]\n", argv[0]);
        return 2;
    }
    long n = arg_long(argc, argv, 1, NMAX, 3, NMAX);
    long steps = arg_long(argc, argv, 2, 100, 1, 1000000);
    long every = arg_long(argc, argv, 3, 10, 1, 1000000);
    const char *variant = argc > 4 ? argv[4] : "bad";
    if (strcmp(variant, "bad") != 0 && strcmp(variant, "fixed") != 0) {
        fprintf(stderr, "%s: VARIANT must be bad or fixed, got '%s'\n", argv[0], variant);
        return 2;
    }
    const int fixed = strcmp(variant, "fixed") == 0;
    double *sums = malloc((steps / every + 1) * sizeof *sums);
    if (!sums) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    init(g, n);
    init(gn, n);
#pragma acc update device(g[0:n], gn[0:n])
    for (long s = 1; s <= steps; s++) {
#pragma acc parallel loop present(g, gn)
        for (long k = 1; k < n - 1; k++)
            gn[k] = g[k] + 0.25 * (g[k - 1] - 2.0 * g[k] + g[k + 1]);
#pragma acc parallel loop present(g, gn)
        for (long k = 1; k < n - 1; k++)
            g[k] = gn[k];
        if (!fixed) {
#pragma acc update self(g[0:n])
        } else {
#pragma acc update self(g[0:n]) if(s % every == 0)
        }
        if (s % every == 0) {
            double sum = 0.0;
            for (long k = 0; k < n; k++)
                sum += w(k) * g[k];
            sums[s / every - 1] = sum;
            printf("step %ld checksum %.12g\n", s, sum);
        }
    }
    double total = 0.0;
    for (long i = 0; i < steps / every; i++)
        total += sums[i];
    printf("checksum: %.12g\n", total);
    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    if (skip && *skip == '1')
        return 0;
    double *r = malloc(n * sizeof *r), *rn = malloc(n * sizeof *rn);
    if (!r || !rn) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    init(r, n);
    init(rn, n);
    int match = 1;
    for (long s = 1; s <= steps; s++) {
        for (long k = 1; k < n - 1; k++)
            rn[k] = r[k] + 0.25 * (r[k - 1] - 2.0 * r[k] + r[k + 1]);
        for (long k = 1; k < n - 1; k++)
            r[k] = rn[k];
        if (s % every == 0) {
            double want = 0.0;
            for (long k = 0; k < n; k++)
                want += w(k) * r[k];
            if (fabs(sums[s / every - 1] - want) > 1e-9 * fmax(1.0, fabs(want)))
                match = 0;
        }
    }
    printf("reference: %s\n", match ? "match" : "MISMATCH");
    free(r);
    free(rn);
    free(sums);
    return match ? 0 : 1;
}
