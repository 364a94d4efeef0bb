/*
 * lost_write.c - the host changes an array between two kernels inside a data
 * region and never sends the change to the device (the BAD variant: a lost
 * host write, a coherence bug).
 *
 * A heat loop keeps the grid u on the device for the whole run, from
 * line 115: `#pragma acc data copy(u[0:n]) copyin(unew[0:n])`. Every EVERY
 * steps the host brings u back,
 * line 128: `#pragma acc update self(u[0:n])`
 * reads the centre value (printed) and heats the centre point on its own
 * copy, at
 * line 131: `u[src] += heat; // the host write`
 * With VARIANT bad (the default) nothing sends that write to the device:
 * the next step's stencil,
 * line 118: `#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n])`
 * uses the device copy, which never got the heat, and the next
 * `update self` overwrites the host's write. With VARIANT fixed,
 * line 133: `#pragma acc update device(u[0:n])`
 * follows the write and the device computes what the CPU does. On a GPU the
 * bad variant's printed values and checksum differ from the reference
 * (MISMATCH, exit 1); on the host fallback (one copy) both variants match.
 *
 * Usage: lost_write [NX [NY [STEPS [EVERY [VARIANT]]]]]
 *        defaults: 1024 1024 100 10 bad; VARIANT is bad or fixed
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, E = EVERY, B = 8*NX*NY):
 *   the data region: one upload of u and unew, one download of u (B each);
 *   line 118: `#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n])`
 *   the stencil, S launches;
 *   line 124: `#pragma acc parallel loop present(u[0:n], unew[0:n])`
 *   the copy back into u, S launches;
 *   floor(S/E) downloads of u at the update self, and with VARIANT fixed
 *   floor(S/E) uploads of u at the update device.
 *   With `accprof run --check coherence` on a GPU, VARIANT bad: a lost host
 *   write (C2) of u at the write's line, found when the stencil starts (once
 *   per heating, except the last when it falls on the last step); the
 *   proposal is `#pragma acc update device(...)` after the write. No
 *   finding with VARIANT fixed. On the host fallback the check says it does
 *   not apply (no device copies).
 *
 * Output: "step <s> centre <value before heating>" every EVERY steps, then
 * "time: ...", "checksum: <sum of u>", then "reference: match" when every
 * printed value and the final grid equal a plain CPU computation (relative
 * 1e-9), else "reference: MISMATCH" and exit status 1. Bad args: exit 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* "bad" (the default) is 0, "fixed" is 1. */
static int arg_variant(int argc, char **argv, int i)
{
    if (argc <= i || strcmp(argv[i], "bad") == 0)
        return 0;
    if (strcmp(argv[i], "fixed") == 0)
        return 1;
    fprintf(stderr, "%s: argument %d must be bad or fixed, got '%s'\n", argv[0], i, argv[i]);
    exit(2);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void init(double *u, long nx, long ny)
{
    for (long j = 0; j < ny; j++)
        for (long i = 0; i < nx; i++)
            u[j * nx + i] = (i == 0 || j == 0) ? 1.0 : 0.0;
}

int main(int argc, char **argv)
{
    if (argc > 6) {
        fprintf(stderr, "usage: %s [NX [NY [STEPS [EVERY [bad|fixed]]]]]\n", argv[0]);
        return 2;
    }
    long nx = arg_long(argc, argv, 1, 1024, 3);
    long ny = arg_long(argc, argv, 2, 1024, 3);
    long steps = arg_long(argc, argv, 3, 100, 1);
    long every = arg_long(argc, argv, 4, 10, 1);
    int fixed = arg_variant(argc, argv, 5);
    long n = nx * ny, src = (ny / 2) * nx + nx / 2, reports = steps / every;
    const double heat = 1.0;
    double *u = malloc(n * sizeof *u), *unew = malloc(n * sizeof *unew);
    double *centre = calloc(reports + 1, sizeof *centre);
    if (!u || !unew || !centre) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    init(u, nx, ny);
    init(unew, nx, ny);
    double t0 = seconds();
#pragma acc data copy(u[0:n]) copyin(unew[0:n])
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
#pragma acc update self(u[0:n])
                centre[s / every - 1] = u[src];
                printf("step %ld centre %.12g\n", s, centre[s / every - 1]);
                u[src] += heat; // the host write
                if (fixed) {
#pragma acc update device(u[0:n])
                }
            }
        }
    }
    double elapsed = seconds() - t0;
    double sum = 0.0;
    for (long k = 0; k < n; k++)
        sum += u[k];
    printf("time: %.3f s\n", elapsed);
    printf("checksum: %.12e\n", sum);
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
            double want = r[src], got = centre[s / every - 1];
            if (!(fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want))))
                match = 0;
            r[src] += heat;
        }
    }
    for (long k = 0; k < n; k++)
        if (!(fabs(u[k] - r[k]) <= 1e-9 * fmax(1.0, fabs(r[k]))))
            match = 0;
    printf("reference: %s\n", match ? "match" : "MISMATCH");
    free(r);
    free(rnew);
    free(u);
    free(unew);
    free(centre);
    return match ? 0 : 1;
}
