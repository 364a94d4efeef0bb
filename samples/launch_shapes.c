/*
 * launch_shapes.c - launch shapes a compiler or a runtime overrides or wastes.
 *
 * Two small loops inside one data region, each run STEPS times:
 *
 * - a `parallel loop vector_length(48)` over all N values. 48 is not a
 *   multiple of the warp size (32); GCC warns "using vector_length (32),
 *   ignoring 48" at compile time and launches blocks of 32 threads: the
 *   launched block differs from the clause in the source.
 * - a `parallel loop gang vector_length(128)` over ROWS rows whose inner
 *   `loop vector` has only 16 iterations (the columns): 128 vector lanes are
 *   launched per gang and 112 of them have no work.
 *
 * Usage: launch_shapes [ROWS [STEPS]]    defaults: 65536 100
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, N = 16*ROWS values,
 * B = 8*N bytes):
 *   line 79: `#pragma acc data copy(x[0:n]) copyin(c[0:n])`
 *     reached once: uploads of x and c, one download of x (B bytes each).
 *   line 82: `#pragma acc parallel loop vector_length(48) present(x[0:n], c[0:n])`
 *     reached S times, S launches with blocks of 32 threads (not 48).
 *   line 86: `#pragma acc parallel loop gang vector_length(128) present(x[0:n], c[0:n])`
 *     reached S times, S launches with blocks of 128 threads;
 *     line 88: `#pragma acc loop vector` has a trip count of 16.
 *   2*S launches in all, no transfers besides the three of the data region.
 *   Findings to expect: L1 (48 is not a multiple of 32) and L4 (launched 32,
 *   asked 48) at line 82; L2 (vector of 128 over 16 iterations) at line 86.
 *
 * Output: "checksum: <sum of x>", then "reference: match" when x equals a
 * plain CPU computation (relative 1e-9), else "reference: MISMATCH" and
 * exit status 1.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long arg_long(int argc, char **argv, int i, long def, long min)
{
    if (argc <= i)
        return def;
    char *end;
    errno = 0;
    long v = strtol(argv[i], &end, 10);
    if (errno || *end || end == argv[i] || v < min) {
        fprintf(stderr, "%s: argument %d must be an integer >= %ld, got '%s'\n",
                argv[0], i, min, argv[i]);
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

int main(int argc, char **argv)
{
    int rows = (int)arg_long(argc, argv, 1, 65536, 1);
    int steps = (int)arg_long(argc, argv, 2, 100, 0);
    int n = 16 * rows;
    double *x = malloc((size_t)n * sizeof *x), *c = malloc((size_t)n * sizeof *c);
    double *ref = malloc((size_t)n * sizeof *ref);
    if (!x || !c || !ref) {
        fprintf(stderr, "launch_shapes: out of memory\n");
        return 2;
    }
    printf("launch_shapes: %d rows x 16 columns, %d steps\n", rows, steps);
    for (int i = 0; i < n; i++) {
        x[i] = ref[i] = 1.0 + 1e-3 * (i % 7);
        c[i] = 1e-3 * (i % 17);
    }

    double t0 = seconds();
#pragma acc data copy(x[0:n]) copyin(c[0:n])
    for (int step = 0; step < steps; step++) {
        /* All N values, blocks of 48 asked for. */
#pragma acc parallel loop vector_length(48) present(x[0:n], c[0:n])
        for (int i = 0; i < n; i++)
            x[i] = 0.999 * x[i] + c[i];
        /* One row per gang, 16 columns over 128 lanes. */
#pragma acc parallel loop gang vector_length(128) present(x[0:n], c[0:n])
        for (int r = 0; r < rows; r++) {
#pragma acc loop vector
            for (int j = 0; j < 16; j++)
                x[16 * r + j] = 0.5 * x[16 * r + j] + c[16 * r + (15 - j)];
        }
    }
    printf("time: %.3f s\n", seconds() - t0);

    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    printf("checksum: %.12e\n", sum);

    /* Plain CPU reference: the same S steps of both loops. */
    for (int step = 0; step < steps; step++) {
        for (int i = 0; i < n; i++)
            ref[i] = 0.999 * ref[i] + c[i];
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < 16; j++)
                ref[16 * r + j] = 0.5 * ref[16 * r + j] + c[16 * r + (15 - j)];
    }
    size_t bad = 0;
    double diff = 0.0;
    for (int i = 0; i < n; i++) {
        double d = fabs(x[i] - ref[i]);
        if (!(d <= 1e-9 * fmax(fabs(ref[i]), 1.0)))
            bad++;
        if (d > diff)
            diff = d;
    }
    printf("max difference: %.3e (%zu of %d values off)\n", diff, bad, n);
    printf("reference: %s\n", bad ? "MISMATCH" : "match");
    free(x);
    free(c);
    free(ref);
    return bad ? 1 : 0;
}
