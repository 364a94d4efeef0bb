/*
 * coherence_norm.c - a heat loop in a data region whose host code reads the
 * grid without `update self` (the BAD variant: a coherence bug, not a
 * performance one).
 *
 * The grid u lives on the device for the whole time loop, from
 * line 83: `#pragma acc data copy(u[0:n], unew[0:n])`. Every EVERY steps
 * the host computes the grid's norm, reading u on the host at
 * line 98: `for (long k = 0; k < n; k++) sum += u[k] * u[k];`
 * The host copy is the one from before the loop, the device copy is newer,
 * and nothing brings it back (the fix: `#pragma acc update self(u[0:n])`
 * before the norm). On a GPU the printed norms stay at the first value and
 * differ from the reference; on the host fallback (no device copies) the
 * two copies are one and the program is right.
 *
 * Usage: coherence_norm [NX [NY [STEPS [EVERY]]]]   defaults: 1024 1024 100 10
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*NX*NY bytes):
 *   the data region: one upload and one download of B bytes per grid;
 *   line 86: `#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n])`
 *   the stencil, S launches;
 *   line 92: `#pragma acc parallel loop present(u[0:n], unew[0:n])`
 *   the copy back into u, S launches.
 *   With `accprof run --check coherence` on a GPU: stale host reads of u at
 *   line 98 (one per page of u each norm, S/EVERY norms), the device copy
 *   written by the compute construct at line 92; `accprof analyze` reports
 *   one C1 (an error, ranked before every performance finding) proposing
 *   `#pragma acc update self(u[0:n])` before line 98. On the host fallback
 *   the check says that it does not apply (no device copies).
 *
 * Output: "step <s> norm <n>" every EVERY steps, then "norm: <final norm of
 * the host's u after the region>", then "reference: match" when every
 * printed norm equals a plain CPU computation (relative 1e-9), else
 * "reference: MISMATCH" and exit status 1; SAMPLE_SKIP_REFERENCE=1 skips
 * the reference. Bad args: exit 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

static void init(double *u, long nx, long ny)
{
    for (long j = 0; j < ny; j++)
        for (long i = 0; i < nx; i++)
            u[j * nx + i] = (i == 0 || j == 0) ? 1.0 : 0.0;
}

int main(int argc, char **argv)
{
    if (argc > 5) {
        fprintf(stderr, "usage: %s [NX [NY [STEPS [EVERY]]]]\n", argv[0]);
        return 2;
    }
    long nx = arg_long(argc, argv, 1, 1024, 3);
    long ny = arg_long(argc, argv, 2, 1024, 3);
    long steps = arg_long(argc, argv, 3, 100, 1);
    long every = arg_long(argc, argv, 4, 10, 1);
    long n = nx * ny, reports = steps / every;
    double *u = malloc(n * sizeof *u), *unew = malloc(n * sizeof *unew);
    double *norms = calloc(reports + 1, sizeof *norms);
    if (!u || !unew || !norms) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    init(u, nx, ny);
    init(unew, nx, ny);
#pragma acc data copy(u[0:n], unew[0:n])
    {
        for (long s = 1; s <= steps; s++) {
#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n])
            for (long j = 1; j < ny - 1; j++)
                for (long i = 1; i < nx - 1; i++)
                    unew[j * nx + i] = u[j * nx + i] + 0.2 * (u[j * nx + i - 1] + u[j * nx + i + 1] +
                                                             u[(j - 1) * nx + i] + u[(j + 1) * nx + i] -
                                                             4.0 * u[j * nx + i]);
#pragma acc parallel loop present(u[0:n], unew[0:n])
            for (long k = 0; k < n; k++)
                u[k] = unew[k];
            if (s % every == 0) {
                /* BAD: u is newer on the device; no update self before this read. */
                double sum = 0.0;
                for (long k = 0; k < n; k++) sum += u[k] * u[k];
                norms[s / every - 1] = sqrt(sum);
                printf("step %ld norm %.12g\n", s, norms[s / every - 1]);
            }
        }
    }
    double sum = 0.0;
    for (long k = 0; k < n; k++)
        sum += u[k] * u[k];
    printf("norm: %.12g\n", sqrt(sum));
    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    if (skip && *skip == '1')
        return 0;
    double *r = malloc(n * sizeof *r), *rnew = malloc(n * sizeof *rnew);
    if (!r || !rnew) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    init(r, nx, ny);
    init(rnew, nx, ny);
    int match = 1;
    for (long s = 1; s <= steps; s++) {
        for (long j = 1; j < ny - 1; j++)
            for (long i = 1; i < nx - 1; i++)
                rnew[j * nx + i] = r[j * nx + i] + 0.2 * (r[j * nx + i - 1] + r[j * nx + i + 1] +
                                                         r[(j - 1) * nx + i] + r[(j + 1) * nx + i] -
                                                         4.0 * r[j * nx + i]);
        for (long k = 0; k < n; k++)
            r[k] = rnew[k];
        if (s % every == 0) {
            double rs = 0.0;
            for (long k = 0; k < n; k++)
                rs += r[k] * r[k];
            double want = sqrt(rs), got = norms[s / every - 1];
            if (fabs(got - want) > 1e-9 * fmax(1.0, fabs(want)))
                match = 0;
        }
    }
    printf("reference: %s\n", match ? "match" : "MISMATCH");
    free(r);
    free(rnew);
    free(u);
    free(unew);
    free(norms);
    return match ? 0 : 1;
}
