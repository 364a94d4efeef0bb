/*
 * heat2d_naive.c - 2D heat equation, data moved on every time step (the BAD variant).
 *
 * An explicit 5-point stencil advances the temperature u on an NX x NY grid
 * with fixed (Dirichlet) edges. Each time step is one `parallel loop` whose
 * data clauses send the whole grid to the device and fetch the whole result
 * back, so the data crosses the bus twice per step although it is needed on
 * the host only once, at the end. heat2d_data.c is the same program with a
 * data region around the time loop.
 *
 * Usage: heat2d_naive [NX [NY [STEPS]]]      defaults: 2048 2048 200
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*NX*NY bytes):
 *   line 110: `for (int step = 0; step < steps; step++)` host time loop, S iterations
 *   line 111: `#pragma acc parallel loop collapse(2) copyin(u[0:n]) copyout(unew[0:n])`
 *     compute construct reached S times: S kernel launches, S uploads of u
 *     and S downloads of unew, B bytes each. Total 2*S*B bytes where a data
 *     region needs 2*B (heat2d_data.c).
 *   Findings to expect: D6 (transfers repeated in every iteration of the host
 *   loop: hoist `#pragma acc data copyin(u[0:n]) create(unew[0:n])` above it)
 *   and D4 (each downloaded unew is uploaded again unchanged as the next
 *   step's u: a device -> host -> device round trip).
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
    size_t n = (size_t)nx * ny;
    double *u = malloc(n * sizeof *u), *unew = malloc(n * sizeof *unew);
    if (!u || !unew) {
        fprintf(stderr, "heat2d_naive: out of memory\n");
        return 2;
    }
    printf("heat2d_naive: %d x %d grid, %d steps\n", nx, ny, steps);
    init_grid(u, nx, ny);

    double t0 = seconds();
    for (int step = 0; step < steps; step++) {
#pragma acc parallel loop collapse(2) copyin(u[0:n]) copyout(unew[0:n])
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
        fprintf(stderr, "heat2d_naive: out of memory\n");
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
