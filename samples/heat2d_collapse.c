/*
 * heat2d_collapse.c - one stencil, two loop schedules, inside one data region.
 *
 * The 2D heat equation of heat2d_data.c, but every iteration of the host loop
 * advances two time steps with two differently scheduled kernels:
 *   - u -> v with `parallel loop collapse(2)`: both loops fused into one
 *     iteration space that the compiler spreads over gangs and vector lanes;
 *   - v -> u with `parallel loop gang` over rows and a nested `loop vector`
 *     over columns, vector_length(128).
 * Both compute the same update, so their device times are directly
 * comparable (a tuner can sweep the vector length or the collapse depth of
 * either one), and the result is checked against a plain CPU run of 2*STEPS
 * time steps, which only matches if both schedules are correct.
 *
 * Usage: heat2d_collapse [NX [NY [STEPS]]]     defaults: 2048 2048 100
 *        (2*STEPS time steps in all)
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*NX*NY bytes):
 *   line 117: `#pragma acc data copy(u[0:n]) create(v[0:n])`
 *     reached once: 1 upload and 1 download of u (B bytes each), v only allocated.
 *   line 118: `for (int it = 0; it < steps; it++)` host loop, S iterations
 *   line 120: `#pragma acc parallel loop collapse(2) present(u[0:n], v[0:n])`
 *     S launches; gangs x 32 vector lanes sharing the NX*NY points (on an
 *     H200 libgomp launched 8448 gangs x 1 worker x 32 lanes).
 *   line 132: `#pragma acc parallel loop gang vector_length(128) present(u[0:n], v[0:n])`
 *     S launches; rows over gangs, 128 vector lanes per gang;
 *     line 134: `#pragma acc loop vector` is its inner column loop. libgomp
 *     sizes the grid from occupancy, not from NX (12672 gangs x 128 lanes
 *     on an H200), so with fewer rows than gangs the extra gangs idle.
 *   No transfers inside the host loop; 2*S launches in all.
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
    int steps = (int)arg_long(argc, argv, 3, 100, 0);
    size_t n = (size_t)nx * ny;
    double *u = malloc(n * sizeof *u), *v = malloc(n * sizeof *v);
    if (!u || !v) {
        fprintf(stderr, "heat2d_collapse: out of memory\n");
        return 2;
    }
    printf("heat2d_collapse: %d x %d grid, %d x 2 steps\n", nx, ny, steps);
    init_grid(u, nx, ny);

    double t0 = seconds();
#pragma acc data copy(u[0:n]) create(v[0:n])
    for (int it = 0; it < steps; it++) {
        /* u -> v, both loops collapsed into one parallel iteration space */
#pragma acc parallel loop collapse(2) present(u[0:n], v[0:n])
        for (int i = 0; i < nx; i++)
            for (int j = 0; j < ny; j++) {
                size_t k = (size_t)i * ny + j;
                if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1)
                    v[k] = u[k];
                else
                    v[k] = u[k] + CX * (u[k - ny] - 2.0 * u[k] + u[k + ny])
                                + CY * (u[k - 1] - 2.0 * u[k] + u[k + 1]);
            }

        /* v -> u, rows over gangs, columns over vector lanes */
#pragma acc parallel loop gang vector_length(128) present(u[0:n], v[0:n])
        for (int i = 0; i < nx; i++) {
#pragma acc loop vector
            for (int j = 0; j < ny; j++) {
                size_t k = (size_t)i * ny + j;
                if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1)
                    u[k] = v[k];
                else
                    u[k] = v[k] + CX * (v[k - ny] - 2.0 * v[k] + v[k + ny])
                                + CY * (v[k - 1] - 2.0 * v[k] + v[k + 1]);
            }
        }
    }
    printf("time: %.3f s\n", seconds() - t0);

    double sum = 0.0;
    for (size_t k = 0; k < n; k++)
        sum += u[k];
    printf("checksum: %.12e\n", sum);

    double *ref = reference(nx, ny, 2 * steps);
    if (!ref) {
        fprintf(stderr, "heat2d_collapse: out of memory\n");
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
    free(v);
    return ok ? 0 : 1;
}
