/*
 * heat2d_data.c - 2D heat equation with a data region around the time loop.
 *
 * The same stencil as heat2d_naive.c, but the grids live on the device for
 * the whole run: a `data` region uploads u once and only allocates unew.
 * Every EVERY steps (and after the last step) an `update host` brings the
 * current grid back so the host can print a progress line, the way real codes
 * write snapshots. The host swaps the two pointers after each step; both
 * buffers are mapped, so the `present` clause finds whichever one u names.
 *
 * Usage: heat2d_data [NX [NY [STEPS [EVERY]]]]   defaults: 2048 2048 200 50
 *        EVERY = 0 reports only after the last step.
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, E = EVERY, B = 8*NX*NY bytes):
 *   line 126: `#pragma acc data copyin(u[0:n]) create(unew[0:n])`
 *     data construct reached once: 1 upload of u (B bytes), 1 allocation of
 *     unew (B bytes, no transfer), both freed at the end of the region.
 *   line 128: `for (int step = 1; step <= steps; step++)` host time loop, S iterations
 *   line 129: `#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n])`
 *     reached S times, S kernel launches, no array transfers.
 *   line 142: `#pragma acc update host(u[0:n])`
 *     reached R times, R downloads of B bytes, where R counts the steps
 *     1..S that are multiples of E, plus 1 if S itself is not one
 *     (R = ceil(S/E) for E > 0; R = 1 for E = 0; R = 0 for S = 0).
 *   Total traffic (1 + R)*B bytes. No finding about redundant transfers is
 *   expected: every download is followed by host use of the data.
 *
 * Output: "checksum: <sum of the final grid>", then "reference: match" when
 * the result equals a plain CPU computation (relative 1e-9), else
 * "reference: MISMATCH" and exit status 1. With SAMPLE_SKIP_REFERENCE set
 * (timing runs) it prints "reference: skipped" instead of computing it.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Diffusion number per direction (alpha*dt/h^2); stable below 0.25. */
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

/* A warm Gaussian spot on a cool plate; the edges keep their initial values. */
static void init_grid(double *u, int nx, int ny)
{
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < ny; j++) {
            double x = (double)i / (nx - 1) - 0.35;
            double y = (double)j / (ny - 1) - 0.6;
            u[(size_t)i * ny + j] = 5.0 + 60.0 * exp(-(x * x + y * y) / 0.02);
        }
}

/* What a real code would write to disk: here, one line of statistics. */
static void report(const double *u, int nx, int ny, int step)
{
    double total = 0.0, hottest = u[0];
    for (size_t k = 0; k < (size_t)nx * ny; k++) {
        total += u[k];
        hottest = fmax(hottest, u[k]);
    }
    printf("step %d: mean %.6f, max %.6f\n", step, total / ((double)nx * ny), hottest);
}

/* Plain CPU version of the same time stepping, for the check. */
static double *reference(int nx, int ny, int steps)
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
    int steps = (int)arg_long(argc, argv, 3, 200, 0);
    int every = (int)arg_long(argc, argv, 4, 50, 0);
    size_t n = (size_t)nx * ny;
    double *u = malloc(n * sizeof *u), *unew = malloc(n * sizeof *unew);
    if (!u || !unew) {
        fprintf(stderr, "heat2d_data: out of memory\n");
        return 2;
    }
    printf("heat2d_data: %d x %d grid, %d steps, report every %d\n", nx, ny, steps, every);
    init_grid(u, nx, ny);

    double t0 = seconds();
#pragma acc data copyin(u[0:n]) create(unew[0:n])
    {
        for (int step = 1; step <= steps; step++) {
#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n])
            for (int i = 0; i < nx; i++)
                for (int j = 0; j < ny; j++) {
                    size_t k = (size_t)i * ny + j;
                    if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1)
                        unew[k] = u[k];
                    else
                        unew[k] = u[k] + CX * (u[k - ny] - 2.0 * u[k] + u[k + ny])
                                       + CY * (u[k - 1] - 2.0 * u[k] + u[k + 1]);
                }
            double *t = u; u = unew; unew = t;

            if ((every > 0 && step % every == 0) || step == steps) {
#pragma acc update host(u[0:n])
                report(u, nx, ny, step);
            }
        }
    }
    printf("time: %.3f s\n", seconds() - t0);

    double sum = 0.0;
    for (size_t k = 0; k < n; k++)
        sum += u[k];
    printf("checksum: %.12e\n", sum);

    if (getenv("SAMPLE_SKIP_REFERENCE")) { /* timing runs (bench/overhead.sh) */
        printf("reference: skipped\n");
        free(u);
        free(unew);
        return 0;
    }
    double *ref = reference(nx, ny, steps);
    if (!ref) {
        fprintf(stderr, "heat2d_data: out of memory\n");
        return 2;
    }
    /* Relative to the largest value; NaN never compares as close. */
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
