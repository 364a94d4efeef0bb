/*
 * threads.c - several host threads, each with its own OpenACC work.
 *
 * The main thread initializes the device once (acc_init), then starts
 * THREADS POSIX threads. Each thread owns three arrays, opens its own data
 * region and runs ITERS relaxation steps on them: per step one
 * `parallel loop` computes ynew, a blend of a neighbour average of y and a
 * thread-specific x, and a second one copies ynew back into y. The threads
 * share one device, so their kernels and copies interleave in time. A
 * profiler should keep the threads apart: per thread one data region and
 * 2*ITERS launches, all at the same source lines.
 *
 * Usage: threads [THREADS [N [ITERS]]]     defaults: 4 1048576 200
 *
 * Expected profile (GCC 12 / libgomp; T = THREADS, I = ITERS, B = 8*N bytes):
 *   line 149: `acc_init(acc_device_default);` once, on the main thread.
 *   line 91: `#pragma acc data copyin(x[0:n]) copy(y[0:n]) create(ynew[0:n])`
 *     reached T times, once per thread: per thread 2 uploads (x, y) and
 *     1 download (y) of B bytes; ynew is only allocated.
 *   line 93: `#pragma acc parallel loop present(x[0:n], y[0:n], ynew[0:n])`
 *     reached T*I times: I launches on each of the T threads.
 *   line 99: `#pragma acc parallel loop present(y[0:n], ynew[0:n]) // copy back`
 *     reached T*I times as well.
 *   Total: 2*T*I launches, 3*T*B bytes of transfers.
 *
 * Output: "checksum: <sum over threads of sum(y)>", then "reference: match"
 * when every thread's y equals a plain CPU computation (relative 1e-9),
 * else "reference: MISMATCH" and exit status 1.
 */
#include <errno.h>
#include <math.h>
#include <openacc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct job {
    int id;
    size_t n;
    int iters;
    double *y;   /* result, kept for the check */
    int failed;  /* out of memory */
};

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

/* Thread-specific inputs, so that mixed-up arrays would not go unnoticed. */
static void init_job(int id, size_t n, double *x, double *y)
{
    for (size_t i = 0; i < n; i++) {
        x[i] = (double)((i * (size_t)(id + 3)) % 101) / 101.0 + id;
        y[i] = 0.0;
    }
}

static void *worker(void *arg)
{
    struct job *job = arg;
    size_t n = job->n;
    double w = 0.5 / (job->id + 1);
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    double *ynew = malloc(n * sizeof *ynew);
    if (!x || !y || !ynew) {
        job->failed = 1;
        free(x); free(y); free(ynew);
        return NULL;
    }
    init_job(job->id, n, x, y);

#pragma acc data copyin(x[0:n]) copy(y[0:n]) create(ynew[0:n])
    for (int it = 0; it < job->iters; it++) {
#pragma acc parallel loop present(x[0:n], y[0:n], ynew[0:n])
        for (size_t i = 0; i < n; i++) {
            double left = i > 0 ? y[i - 1] : y[i];
            double right = i + 1 < n ? y[i + 1] : y[i];
            ynew[i] = (1.0 - w) * (0.5 * y[i] + 0.25 * (left + right)) + w * x[i];
        }
#pragma acc parallel loop present(y[0:n], ynew[0:n]) // copy back
        for (size_t i = 0; i < n; i++)
            y[i] = ynew[i];
    }
    free(x);
    free(ynew);
    job->y = y;
    return NULL;
}

/* Plain CPU version of one thread's work. */
static double *reference(int id, size_t n, int iters)
{
    double w = 0.5 / (id + 1);
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    double *ynew = malloc(n * sizeof *ynew);
    if (!x || !y || !ynew) {
        free(x); free(y); free(ynew);
        return NULL;
    }
    init_job(id, n, x, y);
    for (int it = 0; it < iters; it++) {
        for (size_t i = 0; i < n; i++) {
            double left = i > 0 ? y[i - 1] : y[i];
            double right = i + 1 < n ? y[i + 1] : y[i];
            ynew[i] = (1.0 - w) * (0.5 * y[i] + 0.25 * (left + right)) + w * x[i];
        }
        for (size_t i = 0; i < n; i++)
            y[i] = ynew[i];
    }
    free(x);
    free(ynew);
    return y;
}

int main(int argc, char **argv)
{
    int nthreads = (int)arg_long(argc, argv, 1, 4, 1);
    size_t n = (size_t)arg_long(argc, argv, 2, 1048576, 1);
    int iters = (int)arg_long(argc, argv, 3, 200, 0);
    printf("threads: %d threads, %zu values each, %d iterations\n", nthreads, n, iters);

    struct job *jobs = calloc((size_t)nthreads, sizeof *jobs);
    pthread_t *tids = calloc((size_t)nthreads, sizeof *tids);
    if (!jobs || !tids) {
        fprintf(stderr, "threads: out of memory\n");
        return 2;
    }

    /* Initialize the device here, not in whichever thread comes first. */
    acc_init(acc_device_default);

    double t0 = seconds();
    for (int t = 0; t < nthreads; t++) {
        jobs[t] = (struct job){ .id = t, .n = n, .iters = iters };
        if (pthread_create(&tids[t], NULL, worker, &jobs[t]) != 0) {
            fprintf(stderr, "threads: cannot start thread %d\n", t);
            return 2;
        }
    }
    for (int t = 0; t < nthreads; t++)
        pthread_join(tids[t], NULL);
    printf("time: %.3f s\n", seconds() - t0);

    double sum = 0.0;
    for (int t = 0; t < nthreads; t++) {
        if (jobs[t].failed) {
            fprintf(stderr, "threads: thread %d ran out of memory\n", t);
            return 2;
        }
        for (size_t i = 0; i < n; i++)
            sum += jobs[t].y[i];
    }
    printf("checksum: %.12e\n", sum);

    size_t bad = 0;
    double diff = 0.0;
    for (int t = 0; t < nthreads; t++) {
        double *ref = reference(t, n, iters);
        if (!ref) {
            fprintf(stderr, "threads: out of memory\n");
            return 2;
        }
        for (size_t i = 0; i < n; i++) {
            double d = fabs(jobs[t].y[i] - ref[i]);
            if (!(d <= 1e-9 * fmax(fabs(ref[i]), 1.0)))
                bad++;
            if (d > diff)
                diff = d;
        }
        free(ref);
        free(jobs[t].y);
    }
    printf("max difference: %.3e (%zu values off)\n", diff, bad);
    printf("reference: %s\n", bad ? "MISMATCH" : "match");
    free(jobs);
    free(tids);
    return bad ? 1 : 0;
}
