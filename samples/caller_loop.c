/*
 * caller_loop.c - each kernel in its own function, called from the time loop (the BAD variant).
 *
 * The 2D heat stencil of heat2d_naive.c, laid out the way real codes are:
 * heat_step() holds the compute construct with its own data clauses,
 * advance() calls it twice per time step with the roles of the grids
 * swapped, and main() calls advance() from the time loop. The construct has
 * no host loop around it in its function, so the repetition comes from a
 * caller's caller: every call sends the whole grid up and brings the whole
 * result back. Moving a `data` region into main(), around the time loop,
 * and giving the construct `present` moves each grid once.
 *
 * Usage: caller_loop [NX [NY [STEPS]]]      defaults: 2048 2048 100
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*NX*NY bytes):
 *   line 78: `#pragma acc parallel loop collapse(2) copyin(u[0:nx*ny]) copyout(unew[0:nx*ny])`
 *     in heat_step, reached 2*S times (from the two calls at
 *     line 93: `heat_step(nx, ny, u, unew);` and
 *     line 94: `heat_step(nx, ny, unew, u);`):
 *     2*S launches, 2*S uploads and 2*S downloads of B bytes.
 *   line 134: `for (int step = 0; step < steps; step++)` host time loop in
 *     main, S iterations, calling advance() at
 *     line 135: `advance(nx, ny, u, unew);`
 *   Findings to expect: D6 at the loop of line 134 (the caller's caller),
 *   proposing `#pragma acc data copy(u[0:nx*ny], unew[0:nx*ny])` before it
 *   and `present(u[0:nx*ny]) present(unew[0:nx*ny])` in place of the clauses
 *   at line 78: 4*S transfers become 4.
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

/* One time step on the device: unew from u, edges kept. */
static void heat_step(int nx, int ny, const double *restrict u, double *restrict unew)
{
#pragma acc parallel loop collapse(2) copyin(u[0:nx*ny]) copyout(unew[0:nx*ny])
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < ny; j++) {
            size_t k = (size_t)i * ny + j;
            if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1)
                unew[k] = u[k];
            else
                unew[k] = u[k] + CX * (u[k - ny] - 2.0 * u[k] + u[k + ny])
                               + CY * (u[k - 1] - 2.0 * u[k] + u[k + 1]);
        }
}

/* Two time steps; the result is back in u. */
static void advance(int nx, int ny, double *u, double *unew)
{
    heat_step(nx, ny, u, unew);
    heat_step(nx, ny, unew, u);
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
        fprintf(stderr, "caller_loop: out of memory\n");
        return 2;
    }
    printf("caller_loop: %d x %d grid, %d double steps\n", nx, ny, steps);
    init_grid(u, nx, ny);
    memcpy(unew, u, n * sizeof *u);

    double t0 = seconds();
    for (int step = 0; step < steps; step++)
        advance(nx, ny, u, unew);
    printf("time: %.3f s\n", seconds() - t0);

    double sum = 0.0;
    for (size_t k = 0; k < n; k++)
        sum += u[k];
    printf("checksum: %.12e\n", sum);

    double *ref = reference(nx, ny, steps);
    if (!ref) {
        fprintf(stderr, "caller_loop: out of memory\n");
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
