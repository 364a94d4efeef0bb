/*
 * launch_storm.c - many tiny compute constructs: the cost of a launch.
 *
 * A small array stays on the device in a data region while a host loop
 * launches COUNT tiny `parallel loop`s over it, each doing N multiply-adds.
 * The device work per launch is negligible, so the run time is almost all
 * per-launch overhead: the runtime's bookkeeping, the kernel launch and,
 * for a synchronous construct, the wait for it to finish. The second phase
 * issues the same COUNT launches on an async queue with one `wait` at the
 * end: no synchronization per launch, but the runtime's async bookkeeping
 * instead. A profiler should show thousands of short kernels at two source
 * lines and host time dominated by the constructs, not by the kernels.
 * Measured on an H200 with GCC 12's libgomp: about 28 us per synchronous
 * launch and 63-72 us per async launch, so async is no cure for libgomp's
 * launch cost.
 *
 * Usage: launch_storm [COUNT [N]]       defaults: 100000 256
 *
 * Expected profile (GCC 12 / libgomp; C = COUNT, B = 8*N bytes):
 *   line 83: `#pragma acc data copy(x[0:n]) copyin(c[0:n])`
 *     reached once: uploads of x and c, one download of x (B bytes each).
 *   line 87: `#pragma acc parallel loop present(x[0:n], c[0:n]) // synchronous`
 *     reached C times, C launches of a few microseconds at most, each
 *     followed by a synchronization. libgomp sizes the grid from occupancy,
 *     not from N: 8448 gangs x 32 lanes on an H200 for 256 iterations.
 *   line 95: `#pragma acc parallel loop present(x[0:n], c[0:n]) async(1)`
 *     reached C times, C launches on queue 1, no waits in between;
 *     line 99: `#pragma acc wait(1)` reached once.
 *   2*C launches in all, no transfers besides the three of the data region.
 *   Findings to expect: many launches with tiny device time (launch-bound
 *   code: fuse the work into fewer, larger kernels); S2 for the
 *   synchronous phase.
 *
 * Output: "checksum: <sum of x>", then "reference: match" when x equals a
 * plain CPU computation (relative 1e-9), else "reference: MISMATCH" and
 * exit status 1.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
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

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long count = arg_long(argc, argv, 1, 100000, 0);
    int n = (int)arg_long(argc, argv, 2, 256, 1);
    double *x = malloc((size_t)n * sizeof *x), *c = malloc((size_t)n * sizeof *c);
    double *ref = malloc((size_t)n * sizeof *ref);
    if (!x || !c || !ref) {
        fprintf(stderr, "launch_storm: out of memory\n");
        return 2;
    }
    printf("launch_storm: %ld launches x 2 phases over %d values\n", count, n);
    for (int i = 0; i < n; i++) {
        x[i] = ref[i] = 1.0;
        c[i] = 1e-3 * (i % 17);
    }

    double t_sync = 0.0, t_async = 0.0;
#pragma acc data copy(x[0:n]) copyin(c[0:n])
    {
        double t0 = seconds();
        for (long it = 0; it < count; it++) {
#pragma acc parallel loop present(x[0:n], c[0:n]) // synchronous
            for (int i = 0; i < n; i++)
                x[i] = 0.999 * x[i] + c[i];
        }
        t_sync = seconds() - t0;

        t0 = seconds();
        for (long it = 0; it < count; it++) {
#pragma acc parallel loop present(x[0:n], c[0:n]) async(1)
            for (int i = 0; i < n; i++)
                x[i] = 0.999 * x[i] + c[i];
        }
#pragma acc wait(1)
        t_async = seconds() - t0;
    }
    printf("time: synchronous %.3f s (%.2f us per launch), async %.3f s (%.2f us per launch)\n",
           t_sync, count ? 1e6 * t_sync / count : 0.0,
           t_async, count ? 1e6 * t_async / count : 0.0);

    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += x[i];
    printf("checksum: %.12e\n", sum);

    /* Plain CPU reference: the same 2*count updates. */
    for (long it = 0; it < 2 * count; it++)
        for (int i = 0; i < n; i++)
            ref[i] = 0.999 * ref[i] + c[i];
    size_t bad = 0;
    double diff = 0.0;
    for (int i = 0; i < n; i++) {
        double d = fabs(x[i] - ref[i]);
        if (!(d <= 1e-9 * fmax(fabs(ref[i]), 1.0)))
            bad++;
        if (d > diff)
            diff = d;
    }
    printf("max difference: %.3e (%zu of %d values off)\n", diff, bad, n);
    printf("reference: %s\n", bad ? "MISMATCH" : "match");
    free(x);
    free(c);
    free(ref);
    return bad ? 1 : 0;
}
