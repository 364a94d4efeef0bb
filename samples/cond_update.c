/*
 * cond_update.c - an `update device` on every step for data the host changes on some steps (the BAD variant).
 *
 * The 2D heat stencil with a heat source src that the host recomputes every
 * EVERY steps (a moving hot spot). The grids and the source live in a
 * `data` region, and the source is refreshed on the device with an
 * `update device(src[0:n])` on every step, although it changed on only one
 * step in EVERY: the other uploads send the same bytes again. The fix is an
 * `if(step % every == 0)` clause on the update (the condition that guards
 * the host's writes), or the update moved next to those writes.
 *
 * Usage: cond_update [NX [NY [STEPS [EVERY]]]]   defaults: 2048 2048 200 10
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, E = EVERY, B = 8*NX*NY bytes):
 *   line 111: `#pragma acc data copy(u[0:n], unew[0:n]) copyin(src[0:n])`
 *     reached once: 1 upload and 1 download of u and of unew, 1 upload of src.
 *   line 112: `for (int step = 0; step < steps; step++) {` host time loop, S iterations
 *   line 113: `if (step % every == 0) {` guards the host's writes of src (line 116)
 *   line 118: `#pragma acc update device(src[0:n])`
 *     reached S times: S uploads of src (B bytes each), of which
 *     S - ceil(S/E) carry the same bytes as the upload before them.
 *   line 119: `#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n], src[0:n])`
 *     reached S times: S launches, no array transfers.
 *   Findings to expect (with --hash full): the update at line 118 repeated
 *   with unchanged data S - ceil(S/E) times, proposing
 *   `#pragma acc update device(src[0:n]) if(step % every == 0)`.
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

/* A hot spot that moves along the diagonal as the steps go by. */
static double source_at(int nx, int ny, int i, int j, int step)
{
    int c = step % (nx < ny ? nx : ny);
    return (abs(i - c) < 3 && abs(j - c) < 3) ? 0.05 : 0.0;
}

static double *reference(int nx, int ny, int steps, int every)
{
    size_t n = (size_t)nx * ny;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    double *q = malloc(n * sizeof *q);
    if (!a || !b || !q)
        return NULL;
    init_grid(a, nx, ny);
    memcpy(b, a, n * sizeof *a);
    for (int s = 0; s < steps; s++) {
        if (s % every == 0)
            for (int i = 0; i < nx; i++)
                for (int j = 0; j < ny; j++)
                    q[(size_t)i * ny + j] = source_at(nx, ny, i, j, s);
        for (int i = 1; i < nx - 1; i++)
            for (int j = 1; j < ny - 1; j++) {
                size_t k = (size_t)i * ny + j;
                b[k] = a[k] + CX * (a[k - ny] - 2.0 * a[k] + a[k + ny])
                            + CY * (a[k - 1] - 2.0 * a[k] + a[k + 1]) + q[k];
            }
        double *t = a; a = b; b = t;
    }
    free(b);
    free(q);
    return a;
}

static int run(int nx, int ny, int steps, int every, double *u, double *unew, double *src)
{
    size_t n = (size_t)nx * ny;
#pragma acc data copy(u[0:n], unew[0:n]) copyin(src[0:n])
    for (int step = 0; step < steps; step++) {
        if (step % every == 0) {
            for (int i = 0; i < nx; i++)
                for (int j = 0; j < ny; j++)
                    src[(size_t)i * ny + j] = source_at(nx, ny, i, j, step);
        }
#pragma acc update device(src[0:n])
#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n], src[0:n])
        for (int i = 0; i < nx; i++)
            for (int j = 0; j < ny; j++) {
                size_t k = (size_t)i * ny + j;
                if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1)
                    unew[k] = u[k];
                else
                    unew[k] = u[k] + CX * (u[k - ny] - 2.0 * u[k] + u[k + ny])
                                   + CY * (u[k - 1] - 2.0 * u[k] + u[k + 1]) + src[k];
            }
        double *t = u; u = unew; unew = t;
    }
    return steps % 2;
}

int main(int argc, char **argv)
{
    int nx = (int)arg_long(argc, argv, 1, 2048, 3);
    int ny = (int)arg_long(argc, argv, 2, 2048, 3);
    int steps = (int)arg_long(argc, argv, 3, 200, 0);
    int every = (int)arg_long(argc, argv, 4, 10, 1);
    size_t n = (size_t)nx * ny;
    double *u = malloc(n * sizeof *u), *unew = malloc(n * sizeof *unew);
    double *src = calloc(n, sizeof *src);
    if (!u || !unew || !src) {
        fprintf(stderr, "cond_update: out of memory\n");
        return 2;
    }
    printf("cond_update: %d x %d grid, %d steps, source moved every %d\n", nx, ny, steps, every);
    init_grid(u, nx, ny);
    memcpy(unew, u, n * sizeof *u);

    double t0 = seconds();
    double *res = run(nx, ny, steps, every, u, unew, src) ? unew : u;
    printf("time: %.3f s\n", seconds() - t0);
    double sum = 0.0;
    for (size_t k = 0; k < n; k++)
        sum += res[k];
    printf("checksum: %.12e\n", sum);

    double *ref = reference(nx, ny, steps, every);
    if (!ref) {
        fprintf(stderr, "cond_update: out of memory\n");
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
    free(src);
    return ok ? 0 : 1;
}
