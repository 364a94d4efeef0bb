/*
 * partial_region.c - a data region that leaves one array out (the BAD variant).
 *
 * The 2D heat stencil with a heat source q: the time loop sits inside a
 * `data` region that keeps the grids u and unew on the device, but the
 * compute construct still has `copyin(q[0:n])` for the source, which the
 * region does not hold, so q is sent again on every step although it never
 * changes. The fix is to add `copyin(q[0:n])` to the existing region and
 * make q `present` in the construct, not a second region around the loop.
 *
 * Usage: partial_region [NX [NY [STEPS]]]    defaults: 2048 2048 200
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*NX*NY bytes):
 *   line 102: `#pragma acc data copy(u[0:n], unew[0:n])`
 *     reached once: 1 upload and 1 download of u and of unew (the host swaps them).
 *   line 103: `for (int step = 0; step < steps; step++) {` host time loop, S iterations
 *   line 104: `#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n]) copyin(q[0:n])`
 *     reached S times: S launches, S uploads of q (B bytes each).
 *   Findings to expect: D6 at the loop of line 103, proposing to extend the
 *   region at line 102 to `#pragma acc data copy(u[0:n], unew[0:n]) copyin(q[0:n])`
 *   and `present(q[0:n])` in place of the `copyin` at line 104: S uploads
 *   of q become 1.
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

/* A small heat source near one corner. */
static void init_source(double *q, int nx, int ny)
{
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < ny; j++)
            q[(size_t)i * ny + j] = (i < nx / 4 && j < ny / 4) ? 0.01 : 0.0;
}

static double *reference(int nx, int ny, int steps, const double *q)
{
    size_t n = (size_t)nx * ny;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    if (!a || !b)
        return NULL;
    init_grid(a, nx, ny);
    memcpy(b, a, n * sizeof *a);
    for (int s = 0; s < steps; s++) {
        for (int i = 1; i < nx - 1; i++)
            for (int j = 1; j < ny - 1; j++) {
                size_t k = (size_t)i * ny + j;
                b[k] = a[k] + CX * (a[k - ny] - 2.0 * a[k] + a[k + ny])
                            + CY * (a[k - 1] - 2.0 * a[k] + a[k + 1]) + q[k];
            }
        double *t = a; a = b; b = t;
    }
    free(b);
    return a;
}

static int run(int nx, int ny, int steps, double *u, double *unew, const double *q)
{
    size_t n = (size_t)nx * ny;
#pragma acc data copy(u[0:n], unew[0:n])
    for (int step = 0; step < steps; step++) {
#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n]) copyin(q[0:n])
        for (int i = 0; i < nx; i++)
            for (int j = 0; j < ny; j++) {
                size_t k = (size_t)i * ny + j;
                if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1)
                    unew[k] = u[k];
                else
                    unew[k] = u[k] + CX * (u[k - ny] - 2.0 * u[k] + u[k + ny])
                                   + CY * (u[k - 1] - 2.0 * u[k] + u[k + 1]) + q[k];
            }
        double *t = u; u = unew; unew = t;
    }
    /* After an odd number of steps the result is in the other buffer. */
    return steps % 2;
}

int main(int argc, char **argv)
{
    int nx = (int)arg_long(argc, argv, 1, 2048, 3);
    int ny = (int)arg_long(argc, argv, 2, 2048, 3);
    int steps = (int)arg_long(argc, argv, 3, 200, 0);
    size_t n = (size_t)nx * ny;
    double *u = malloc(n * sizeof *u), *unew = malloc(n * sizeof *unew);
    double *q = malloc(n * sizeof *q);
    if (!u || !unew || !q) {
        fprintf(stderr, "partial_region: out of memory\n");
        return 2;
    }
    printf("partial_region: %d x %d grid, %d steps\n", nx, ny, steps);
    init_grid(u, nx, ny);
    memcpy(unew, u, n * sizeof *u);
    init_source(q, nx, ny);

    double t0 = seconds();
    double *res = run(nx, ny, steps, u, unew, q) ? unew : u;
    printf("time: %.3f s\n", seconds() - t0);
    double sum = 0.0;
    for (size_t k = 0; k < n; k++)
        sum += res[k];
    printf("checksum: %.12e\n", sum);

    double *ref = reference(nx, ny, steps, q);
    if (!ref) {
        fprintf(stderr, "partial_region: out of memory\n");
        return 2;
    }
    double scale = 0.0, diff = 0.0;
    size_t bad = 0;
    for (size_t k = 0; k < n; k++)
        scale = fmax(scale, fabs(ref[k]));
    for (size_t k = 0; k < n; k++) {
        double d = fabs(res[k] - ref[k]);
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
    free(q);
    return ok ? 0 : 1;
}
