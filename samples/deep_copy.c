/*
 * deep_copy.c - a compute construct two calls below the time loop copies
 * the grid in and out at every step (VARIANT bad, the default), against a
 * data region around the loop and `present` below (VARIANT fixed). The
 * runtime allocates and frees the construct's block, grid included, at
 * every reach in the bad variant: a data region saves those calls' size
 * as well as the copies.
 *
 * run()'s time loop at
 * line 92: `for (long s = 0; s < steps; s++)`
 * calls step(), which calls relax(), whose construct at
 * line 67: `#pragma acc parallel loop copy(a[0:n])`
 * moves a (N doubles) up and down at every step. With VARIANT fixed run()
 * keeps a on the device from
 * line 88: `#pragma acc data copy(a[0:n])`
 * and calls step_present(), whose relax_present() has at
 * line 75: `#pragma acc parallel loop present(a[0:n])`
 *
 * Usage: deep_copy [N [STEPS [W [VARIANT]]]]
 *        defaults: 524288 (4 MiB of doubles) 100 8 bad; VARIANT is bad or fixed
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8 N):
 *   VARIANT bad: line 67 reached S times, S uploads and S downloads of B,
 *   one block of at least B allocated and freed per reach; accprof analyze
 *   (with the sources) proposes the data region around the loop at line 92
 *   (D6, through the two calls).
 *   VARIANT fixed: one upload and one download of B at line 88; line 75
 *   reached S times with no transfer of a.
 *
 * Output: "time: ...", "checksum: <sum of a>", then "reference: match"
 * when a equals a plain CPU computation (relative 1e-9; skipped with
 * SAMPLE_SKIP_REFERENCE=1), else "reference: MISMATCH" and exit status 1.
 * Bad args: exit 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static long arg_long(int argc, char **argv, int i, long def, long min)
{
    if (argc <= i)
        return def;
    char *end;
    errno = 0;
    long v = strtol(argv[i], &end, 10);
    if (errno || *end || end == argv[i] || v < min) {
        fprintf(stderr, "%s: argument %d must be an integer >= %ld, not '%s'\n", argv[0], i, min,
                argv[i]);
        exit(2);
    }
    return v;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Two calls below the loop: its own copy of a, every call. */
static void relax(long n, long w, double *restrict a)
{
#pragma acc parallel loop copy(a[0:n])
    for (long i = 0; i < n; i++)
        for (long k = 0; k < w; k++)
            a[i] = 0.5 * (a[i] + (double)(i % 7));
}

static void relax_present(long n, long w, double *restrict a)
{
#pragma acc parallel loop present(a[0:n])
    for (long i = 0; i < n; i++)
        for (long k = 0; k < w; k++)
            a[i] = 0.5 * (a[i] + (double)(i % 7));
}

static void step(long n, long w, double *restrict a) { relax(n, w, a); }

static void step_present(long n, long w, double *restrict a) { relax_present(n, w, a); }

static void run(int fixed, long n, long steps, long w, double *restrict a)
{
    if (fixed) {
#pragma acc data copy(a[0:n])
        for (long s = 0; s < steps; s++)
            step_present(n, w, a);
    } else {
        for (long s = 0; s < steps; s++)
            step(n, w, a);
    }
}

int main(int argc, char **argv)
{
    long n = arg_long(argc, argv, 1, 524288, 1);
    long steps = arg_long(argc, argv, 2, 100, 0);
    long w = arg_long(argc, argv, 3, 8, 1);
    const char *variant = argc > 4 ? argv[4] : "bad";
    int fixed = !strcmp(variant, "fixed");
    if (!fixed && strcmp(variant, "bad")) {
        fprintf(stderr, "deep_copy: VARIANT must be bad or fixed, not '%s'\n", variant);
        return 2;
    }
    double *a = malloc(n * sizeof *a), *ref = malloc(n * sizeof *ref);
    if (!a || !ref) {
        fprintf(stderr, "deep_copy: out of memory\n");
        return 2;
    }
    for (long i = 0; i < n; i++)
        a[i] = ref[i] = (double)(i % 1000) / 1000.0;
    double t0 = seconds();
    run(fixed, n, steps, w, a);
    double t1 = seconds();
    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    int check = !(skip && *skip == '1');
    for (long s = 0; check && s < steps; s++)
        for (long i = 0; i < n; i++)
            for (long k = 0; k < w; k++)
                ref[i] = 0.5 * (ref[i] + (double)(i % 7));
    double sum = 0.0;
    int match = 1;
    for (long i = 0; i < n; i++) {
        sum += a[i];
        if (check && fabs(a[i] - ref[i]) > 1e-9 * fmax(1.0, fabs(ref[i])))
            match = 0;
    }
    printf("time: %.6f s\n", t1 - t0);
    printf("checksum: %.12e\n", sum);
    printf("reference: %s\n", !check ? "skipped" : match ? "match" : "MISMATCH");
    free(a);
    free(ref);
    return match ? 0 : 1;
}
