/*
 * laplace_good.c - Jacobi iteration for the Laplace equation, tuned port (the GOOD variant).
 *
 * The problem, the arrays and the stopping rule of laplace_bad.c, with the
 * two usual repairs: a `data` region keeps A (copied in and out once) and
 * Anew (device only) on the device for the whole iteration, and both loop
 * nests are `parallel loop`s, the second with an explicit max reduction so
 * the compiler spreads it over all gangs instead of one.
 *
 * Usage: laplace_good [N [ITERS [TOL]]]     defaults: 1024 20 1e-4
 *        N <= LAPLACE_NMAX (1024; make LAPLACE_NMAX=4096 builds larger arrays)
 *
 * Expected profile (GCC 12 / libgomp; I = iterations done = min(ITERS, until
 * the change <= TOL), A = 8*(LAPLACE_NMAX+2)^2 bytes = one whole array,
 * whatever N is):
 *   line 132: `#pragma acc data copy(A) create(Anew)`
 *     reached once: 1 upload and 1 download of A (A bytes each), Anew only allocated.
 *   line 133: `while (dt > tol && iter < iters)` host loop, I iterations
 *   line 134: `#pragma acc parallel loop gang // stencil`
 *     reached I times, I launches, rows over gangs;
 *     line 136: `#pragma acc loop vector` spreads the columns over vector lanes.
 *   line 142: `#pragma acc parallel loop collapse(2) reduction(max:dt) // update`
 *     reached I times, I launches over many gangs; the only transfers are
 *     the 8-byte reduction result dt coming back (and its initial value).
 *   Per iteration: 2 launches and no array transfers; total 2*A bytes.
 *
 * Output: "checksum: <sum of the inner points>", then "reference: match" when
 * the result equals a plain CPU computation of the same number of iterations
 * (relative 1e-9), else "reference: MISMATCH" and exit status 1.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef LAPLACE_NMAX
#define LAPLACE_NMAX 1024
#endif
#define W (LAPLACE_NMAX + 2)

/* Global arrays: sized at compile time, so the compiler can copy them whole. */
static double A[W][W];
static double Anew[W][W];

static long arg_long(int argc, char **argv, int i, long def, long min, long max)
{
    if (argc <= i)
        return def;
    char *end;
    errno = 0;
    long v = strtol(argv[i], &end, 10);
    if (errno || *end || end == argv[i] || v < min || v > max) {
        fprintf(stderr, "%s: argument %d must be an integer in [%ld, %ld], got '%s'\n",
                argv[0], i, min, max, argv[i]);
        exit(2);
    }
    return v;
}

static double arg_double(int argc, char **argv, int i, double def)
{
    if (argc <= i)
        return def;
    char *end;
    double v = strtod(argv[i], &end);
    if (*end || end == argv[i] || !(v >= 0.0)) {
        fprintf(stderr, "%s: argument %d must be a number >= 0, got '%s'\n", argv[0], i, argv[i]);
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

/* Edge values of point (i, j) of an (n+2) x (n+2) plate; 0 inside. */
static double edge(int i, int j, int n)
{
    if (j == n + 1)
        return 100.0 * i / (n + 1);
    if (i == n + 1)
        return 100.0 * j / (n + 1);
    return 0.0;
}

/* Plain CPU Jacobi on its own (n+2)^2 arrays; returns the last max change. */
static double reference(double *a, int n, int iters)
{
    size_t w = (size_t)n + 2;
    double *b = malloc(w * w * sizeof *b);
    if (!b)
        return NAN;
    for (size_t i = 0; i < w; i++)
        for (size_t j = 0; j < w; j++)
            a[i * w + j] = b[i * w + j] = edge((int)i, (int)j, n);
    double dt = 0.0;
    for (int it = 0; it < iters; it++) {
        for (size_t i = 1; i <= (size_t)n; i++)
            for (size_t j = 1; j <= (size_t)n; j++)
                b[i * w + j] = 0.25 * (a[(i - 1) * w + j] + a[(i + 1) * w + j]
                                     + a[i * w + j - 1] + a[i * w + j + 1]);
        dt = 0.0;
        for (size_t i = 1; i <= (size_t)n; i++)
            for (size_t j = 1; j <= (size_t)n; j++) {
                dt = fmax(dt, fabs(b[i * w + j] - a[i * w + j]));
                a[i * w + j] = b[i * w + j];
            }
    }
    free(b);
    return dt;
}

int main(int argc, char **argv)
{
    int n = (int)arg_long(argc, argv, 1, LAPLACE_NMAX, 1, LAPLACE_NMAX);
    int iters = (int)arg_long(argc, argv, 2, 20, 0, 1000000000);
    double tol = arg_double(argc, argv, 3, 1e-4);
    printf("laplace_good: %d x %d inner points, at most %d iterations, tolerance %g\n",
           n, n, iters, tol);
    for (int i = 0; i <= n + 1; i++)
        for (int j = 0; j <= n + 1; j++)
            A[i][j] = Anew[i][j] = edge(i, j, n);

    double t0 = seconds();
    double dt = INFINITY;
    int iter = 0;
#pragma acc data copy(A) create(Anew)
    while (dt > tol && iter < iters) {
#pragma acc parallel loop gang // stencil
        for (int i = 1; i <= n; i++) {
#pragma acc loop vector
            for (int j = 1; j <= n; j++)
                Anew[i][j] = 0.25 * (A[i - 1][j] + A[i + 1][j] + A[i][j - 1] + A[i][j + 1]);
        }

        dt = 0.0;
#pragma acc parallel loop collapse(2) reduction(max:dt) // update
        for (int i = 1; i <= n; i++)
            for (int j = 1; j <= n; j++) {
                dt = fmax(dt, fabs(Anew[i][j] - A[i][j]));
                A[i][j] = Anew[i][j];
            }
        iter++;
    }
    printf("time: %.3f s\n", seconds() - t0);
    printf("iterations: %d, last max change: %.6e\n", iter, iter ? dt : 0.0);

    double sum = 0.0;
    for (int i = 1; i <= n; i++)
        for (int j = 1; j <= n; j++)
            sum += A[i][j];
    printf("checksum: %.12e\n", sum);

    size_t w = (size_t)n + 2;
    double *ref = malloc(w * w * sizeof *ref);
    if (!ref) {
        fprintf(stderr, "laplace_good: out of memory\n");
        return 2;
    }
    double ref_dt = reference(ref, n, iter);
    /* Relative to the largest value; NaN never compares as close. */
    double scale = 100.0, diff = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < w; i++)
        for (size_t j = 0; j < w; j++) {
            double d = fabs(A[i][j] - ref[i * w + j]);
            if (!(d <= 1e-9 * scale))
                bad++;
            if (d > diff)
                diff = d;
        }
    if (iter > 0 && !(fabs(dt - ref_dt) <= 1e-9 * scale))
        bad++;
    int ok = bad == 0;
    printf("max difference: %.3e (%zu values off)\n", diff, bad);
    printf("reference: %s\n", ok ? "match" : "MISMATCH");
    free(ref);
    return ok ? 0 : 1;
}
