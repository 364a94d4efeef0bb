/*
 * small_kernels.c - the shape of NPB BT/SP-style solvers: many small kernels,
 * each solver phase in its own function with a `data present(...)
 * create(...)` region for its temporaries, and a small download per step.
 *
 * A 3-D grid of N^3 points with 5 values each (u, rhs, forcing) stays on the
 * device for the whole run (one data region in main). Each of STEPS steps
 * calls
 *   compute_rhs  data present(u, rhs, forcing) create(flux): 3 kernels
 *   solve(dir)   for x, y and z: data present(u, rhs) create(lhs): 2 kernels each
 *   add          1 kernel: u += dt * rhs
 *   residual     5 kernels (a sum reduction per component, each result
 *                coming back as a small download), then
 *                `update device(norm[0:5])`: a 40-byte upload
 * so 15 kernels, 4 device allocations and frees of temporaries and a few
 * tiny transfers per step, plus libgomp's small upload of each kernel's
 * argument block.
 *
 * Usage: small_kernels [N [STEPS]]          defaults: 24 1500 (22.5k kernels)
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS):
 *   line 70: `#pragma acc data present(u[0:m], rhs[0:m], forcing[0:m]) create(flux[0:m])`
 *     reached S times, allocating and freeing flux each time; 3 S launches.
 *   line 90: `#pragma acc data present(u[0:m], rhs[0:m]) create(lhs[0:m])`
 *     reached 3 S times, allocating and freeing lhs each time; 6 S launches.
 *   line 162: `#pragma acc parallel loop present(rhs[0:m]) reduction(+:sum)`
 *     reached 5 S times, each result a small download.
 *   line 167: `#pragma acc update device(norm[0:5])` reached S times, 40 bytes each.
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

#define DT 0.01

/* rhs = forcing - a difference of a smoothed flux; all of it on the device. */
static void compute_rhs(long n, double *restrict u, double *restrict rhs,
                        double *restrict forcing)
{
    long m = 5 * n * n * n;
    double *flux = malloc(m * sizeof *flux);
#pragma acc data present(u[0:m], rhs[0:m], forcing[0:m]) create(flux[0:m])
    {
#pragma acc parallel loop
        for (long i = 0; i < m; i++)
            flux[i] = 0.5 * u[i] * u[i];
#pragma acc parallel loop
        for (long i = 0; i < m; i++)
            rhs[i] = forcing[i] - flux[i];
#pragma acc parallel loop
        for (long i = 5; i < m - 5; i++)
            rhs[i] += 0.25 * (u[i - 5] - 2.0 * u[i] + u[i + 5]);
    }
    free(flux);
}

/* One implicit sweep along a direction: build a diagonal, then scale rhs. */
static void solve(long n, long stride, double *restrict u, double *restrict rhs)
{
    long m = 5 * n * n * n;
    double *lhs = malloc(m * sizeof *lhs);
#pragma acc data present(u[0:m], rhs[0:m]) create(lhs[0:m])
    {
#pragma acc parallel loop
        for (long i = 0; i < m; i++)
            lhs[i] = 1.0 + DT * (1.0 + 0.1 * fabs(u[i]) + (i % stride == 0 ? 0.5 : 0.0));
#pragma acc parallel loop
        for (long i = 0; i < m; i++)
            rhs[i] = rhs[i] / lhs[i];
    }
    free(lhs);
}

static void step_cpu(long n, double *u, double *rhs, double *forcing, double *tmp, double *norm)
{
    long m = 5 * n * n * n;
    for (long i = 0; i < m; i++)
        tmp[i] = 0.5 * u[i] * u[i];
    for (long i = 0; i < m; i++)
        rhs[i] = forcing[i] - tmp[i];
    for (long i = 5; i < m - 5; i++)
        rhs[i] += 0.25 * (u[i - 5] - 2.0 * u[i] + u[i + 5]);
    long strides[3] = {5, 5 * n, 5 * n * n};
    for (int d = 0; d < 3; d++) {
        for (long i = 0; i < m; i++)
            tmp[i] = 1.0 + DT * (1.0 + 0.1 * fabs(u[i]) + (i % strides[d] == 0 ? 0.5 : 0.0));
        for (long i = 0; i < m; i++)
            rhs[i] = rhs[i] / tmp[i];
    }
    for (long i = 0; i < m; i++)
        u[i] += DT * rhs[i];
    for (int c = 0; c < 5; c++) {
        double s = 0.0;
        for (long i = c; i < m; i += 5)
            s += rhs[i] * rhs[i];
        norm[c] = s;
    }
}

int main(int argc, char **argv)
{
    long n = arg_long(argc, argv, 1, 24, 3);
    long steps = arg_long(argc, argv, 2, 1500, 0);
    long m = 5 * n * n * n;
    double *u = malloc(m * sizeof *u), *rhs = calloc(m, sizeof *rhs);
    double *forcing = malloc(m * sizeof *forcing);
    double norm[5] = {0};
    if (!u || !rhs || !forcing) {
        fprintf(stderr, "small_kernels: out of memory\n");
        return 2;
    }
    for (long i = 0; i < m; i++) {
        u[i] = 1.0 + 0.001 * (double)(i % 97);
        forcing[i] = 0.01 * (double)(i % 13);
    }
    double *u0 = malloc(m * sizeof *u0);
    for (long i = 0; i < m; i++)
        u0[i] = u[i];
    printf("small_kernels: %ld^3 points, %ld steps\n", n, steps);

    double t0 = seconds();
#pragma acc data copy(u[0:m]) copyin(forcing[0:m], norm[0:5]) create(rhs[0:m])
    {
        for (long s = 0; s < steps; s++) {
            compute_rhs(n, u, rhs, forcing);
            solve(n, 5, u, rhs);
            solve(n, 5 * n, u, rhs);
            solve(n, 5 * n * n, u, rhs);
#pragma acc parallel loop present(u[0:m], rhs[0:m])
            for (long i = 0; i < m; i++)
                u[i] += DT * rhs[i];
            for (int c = 0; c < 5; c++) {
                double sum = 0.0;
#pragma acc parallel loop present(rhs[0:m]) reduction(+:sum)
                for (long i = c; i < m; i += 5)
                    sum += rhs[i] * rhs[i];
                norm[c] = sum;
            }
#pragma acc update device(norm[0:5])
        }
    }
    printf("time: %.3f s\n", seconds() - t0);
    double sum = 0.0;
    for (long i = 0; i < m; i++)
        sum += u[i];
    printf("checksum: %.12e (residual %.6e)\n", sum, norm[0]);

    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    if (skip && *skip == '1')
        return 0;
    double *tmp = malloc(m * sizeof *tmp), *r = calloc(m, sizeof *r);
    double rnorm[5];
    for (long s = 0; s < steps; s++)
        step_cpu(n, u0, r, forcing, tmp, rnorm);
    long bad = 0;
    for (long i = 0; i < m; i++)
        if (fabs(u[i] - u0[i]) > 1e-9 * fmax(1.0, fabs(u0[i])))
            bad++;
    if (bad) {
        printf("reference: MISMATCH (%ld of %ld values)\n", bad, m);
        return 1;
    }
    printf("reference: match\n");
    return 0;
}
