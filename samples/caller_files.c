/*
 * caller_files.c - the time loop in one file, the kernel in another (the BAD variant).
 *
 * caller_loop.c split over two files, as real codes are: main() here calls
 * heat_step() of caller_files_step.c twice per time step with the roles of
 * the grids swapped. The compiler cannot inline across the files, so the
 * profiler finds the loop by unwinding: the construct's function has no
 * loop, its caller here has. A `data` region around the time loop here and
 * `present` in caller_files_step.c move each grid once.
 *
 * Usage: caller_files [NX [NY [STEPS]]]      defaults: 2048 2048 100
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*NX*NY bytes):
 *   caller_files_step.c line 19, the `parallel loop` in heat_step, reached
 *   2*S times: 2*S launches, 2*S uploads and 2*S downloads of B bytes.
 *   line 110: `for (int step = 0; step < steps; step++) {` host time loop, S iterations,
 *   calling heat_step at
 *   line 111: `heat_step(nx, ny, u, unew);` and
 *   line 112: `heat_step(nx, ny, unew, u);`
 *   Findings to expect: D6 at the loop of line 110, proposing
 *   `#pragma acc data copy(u[0:nx*ny], unew[0:nx*ny])` before it and
 *   `present(u[0:nx*ny]) present(unew[0:nx*ny])` in place of the clauses in
 *   caller_files_step.c: one patch over both files; 4*S transfers become 4.
 *
 * Output: "checksum: <sum of the final grid>", then "reference: match" when
 * the result equals a plain CPU computation (relative 1e-9), else
 * "reference: MISMATCH" and exit status 1.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "caller_files.h"

#define CX 0.2
#define CY 0.2

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

static void init_grid(double *u, int nx, int ny)
{
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < ny; j++) {
            double x = (double)i / (nx - 1) - 0.35;
            double y = (double)j / (ny - 1) - 0.6;
            u[(size_t)i * ny + j] = 5.0 + 60.0 * exp(-(x * x + y * y) / 0.02);
        }
}

static double *reference(int nx, int ny, int steps)
{
    size_t n = (size_t)nx * ny;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b)
        return NULL;
    init_grid(a, nx, ny);
    memcpy(b, a, n * sizeof *a);
    for (int s = 0; s < 2 * steps; s++) {
        for (int i = 1; i < nx - 1; i++)
            for (int j = 1; j < ny - 1; j++) {
                size_t k = (size_t)i * ny + j;
                b[k] = a[k] + CX * (a[k - ny] - 2.0 * a[k] + a[k + ny])
                            + CY * (a[k - 1] - 2.0 * a[k] + a[k + 1]);
            }
        double *t = a; a = b; b = t;
    }
    free(b);
    return a;
}

int main(int argc, char **argv)
{
    int nx = (int)arg_long(argc, argv, 1, 2048, 3);
    int ny = (int)arg_long(argc, argv, 2, 2048, 3);
    int steps = (int)arg_long(argc, argv, 3, 100, 0);
    size_t n = (size_t)nx * ny;
    double *u = malloc(n * sizeof *u), *unew = malloc(n * sizeof *unew);
    if (!u || !unew) {
        fprintf(stderr, "caller_files: out of memory\n");
        return 2;
    }
    printf("caller_files: %d x %d grid, %d double steps\n", nx, ny, steps);
    init_grid(u, nx, ny);
    memcpy(unew, u, n * sizeof *u);

    double t0 = seconds();
    for (int step = 0; step < steps; step++) {
        heat_step(nx, ny, u, unew);
        heat_step(nx, ny, unew, u);
    }
    printf("time: %.3f s\n", seconds() - t0);

    double sum = 0.0;
    for (size_t k = 0; k < n; k++)
        sum += u[k];
    printf("checksum: %.12e\n", sum);

    double *ref = reference(nx, ny, steps);
    if (!ref) {
        fprintf(stderr, "caller_files: out of memory\n");
        return 2;
    }
    double scale = 0.0, diff = 0.0;
    size_t bad = 0;
    for (size_t k = 0; k < n; k++)
        scale = fmax(scale, fabs(ref[k]));
    for (size_t k = 0; k < n; k++) {
        double d = fabs(u[k] - ref[k]);
        if (!(d <= 1e-9 * scale))
            bad++;
        if (d > diff)
            diff = d;
    }
    int ok = bad == 0;
    printf("max difference: %.3e (%zu of %zu values off)\n", diff, bad, n);
    printf("reference: %s\n", ok ? "match" : "MISMATCH");
    free(ref);
    free(u);
    free(unew);
    return ok ? 0 : 1;
}
