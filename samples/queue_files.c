/*
 * queue_files.c - a time loop in one file calling two one-kernel step
 * functions of another, each launched synchronously (the BAD variant).
 *
 * Both arrays stay on the device for the whole loop (one data region here);
 * each step function of queue_files_step.c is a single short `parallel loop
 * present(...)`, so the host spends the loop launching tiny kernels and
 * waiting for each. Nothing the host does in the loop needs their results:
 * `async(1)` on both constructs and one `#pragma acc wait(1)` right after
 * the loop (before the data region's end) is a patch over both files.
 *
 * Usage: queue_files [N [STEPS]]      defaults: 4096 2000
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS):
 *   queue_files_step.c line 17 (step_relax) and line 25 (step_smooth):
 *   `#pragma acc parallel loop present(u[0:n], v[0:n])`, each reached S times,
 *   one short kernel each: 2*S launches, no array transfers.
 *   line 79: `#pragma acc data copy(u[0:n]) create(v[0:n])` reached once.
 *   line 81: `for (long s = 0; s < steps; s++) {` host time loop, S iterations,
 *   calling step_relax at
 *   line 82: `step_relax(n, u, v);` and step_smooth at
 *   line 83: `step_smooth(n, u, v);`
 *   Findings to expect (with CUPTI and the driver's timings): L5's
 *   launch-bound loop at line 81 with the two constructs, its patch
 *   `async(1)` on lines 17 and 25 of queue_files_step.c and
 *   `#pragma acc wait(1)` after line 84.
 *
 * Output: "checksum: <sum of u>", then "reference: match" when u equals a
 * plain CPU computation (relative 1e-9), else "reference: MISMATCH" and exit
 * status 1. SAMPLE_SKIP_REFERENCE=1 skips the CPU computation (benchmarks).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "queue_files.h"

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
    long n = arg_long(argc, argv, 1, 4096, 1);
    long steps = arg_long(argc, argv, 2, 2000, 0);
    double *u = malloc(n * sizeof *u), *v = malloc(n * sizeof *v);
    double *ru = malloc(n * sizeof *ru), *rv = malloc(n * sizeof *rv);
    if (!u || !v || !ru || !rv) {
        fprintf(stderr, "queue_files: out of memory\n");
        return 2;
    }
    for (long i = 0; i < n; i++) {
        u[i] = 1.0 + 0.001 * (double)(i % 101);
        ru[i] = u[i];
    }
    printf("queue_files: %ld points, %ld steps\n", n, steps);

    double t0 = seconds();
#pragma acc data copy(u[0:n]) create(v[0:n])
    {
        for (long s = 0; s < steps; s++) {
            step_relax(n, u, v);
            step_smooth(n, u, v);
        }
    }
    printf("time: %.3f s\n", seconds() - t0);
    double sum = 0.0;
    for (long i = 0; i < n; i++)
        sum += u[i];
    printf("checksum: %.12e\n", sum);

    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    if (skip && *skip == '1')
        return 0;
    for (long s = 0; s < steps; s++) {
        for (long i = 0; i < n; i++)
            rv[i] = ru[i] + 0.25 * (0.5 * (double)(i % 7) - ru[i]);
        for (long i = 0; i < n; i++)
            ru[i] = 0.5 * (ru[i] + rv[i]);
    }
    long bad = 0;
    for (long i = 0; i < n; i++)
        if (fabs(u[i] - ru[i]) > 1e-9 * fmax(1.0, fabs(ru[i])))
            bad++;
    if (bad) {
        printf("reference: MISMATCH (%ld of %ld values)\n", bad, n);
        return 1;
    }
    printf("reference: match\n");
    return 0;
}
