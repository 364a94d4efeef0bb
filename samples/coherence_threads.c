/*
 * coherence_threads.c - two host threads, each with its own arrays, data
 * region and kernels; with OMIT 1 (the default: the BAD variant) thread 1
 * leaves out its `update self` and reads its stale host copy.
 *
 * Each thread keeps x, y and ynew on the device, from
 * line 106: `#pragma acc data copyin(x[0:n]) copy(y[0:n]) create(ynew[0:n])`
 * and runs ITERS relaxation steps:
 * line 108: `#pragma acc parallel loop present(x[0:n], y[0:n], ynew[0:n])`
 * line 114: `#pragma acc parallel loop present(y[0:n], ynew[0:n]) // copy back`
 * Every EVERY steps it brings y back,
 * line 119: `#pragma acc update self(y[0:n])`
 * and takes its norm on the host, at
 * line 122: `for (size_t i = 0; i < n; i++) sum += y[i] * y[i];`
 * With OMIT 1 thread 1 skips the update,
 * line 118: `if (!(job->omit && job->id == 1)) {`
 * so its norms are those of the host copy from before its loop; thread 0
 * stays right. On a GPU thread 1's norms differ from the reference
 * (MISMATCH, exit 1); on the host fallback (one copy) both settings match.
 *
 * Usage: coherence_threads [N [ITERS [EVERY [OMIT]]]]
 *        defaults: 1048576 200 20 1; OMIT is 0 (correct) or 1
 *
 * Expected profile (GCC 12 / libgomp; I = ITERS, E = EVERY, B = 8*N bytes):
 *   line 158: `acc_init(acc_device_default);` once, on the main thread;
 *   per thread: one data region (2 uploads and 1 download of B), I launches
 *   at each of the two kernels, floor(I/E) downloads of B at the update
 *   (thread 0 always, thread 1 only with OMIT 0).
 *   With `accprof run --check coherence` on a GPU, OMIT 1: stale host reads
 *   of y at the norm's line, all on thread 1's host thread (one C1, whose
 *   patch puts `#pragma acc update self(y[0:n])` before the norm), none on
 *   thread 0. OMIT 0: no finding. On the host fallback the check says it
 *   does not apply (no device copies).
 *
 * Output: "thread <t> step <s> norm <n>" for each thread and report (printed
 * after both threads ended), "time: ...", "checksum: <sum over threads of
 * sum(y)>", then "reference: match" when every norm and both final arrays
 * equal a plain CPU computation (relative 1e-9), else "reference: MISMATCH"
 * and exit status 1. Bad args: exit 2.
 */
#include <errno.h>
#include <math.h>
#include <openacc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { THREADS = 2 };

struct job {
    int id;
    int omit;
    size_t n;
    long iters, every;
    double *y;     /* result, kept for the check */
    double *norms; /* one per report */
    int failed;    /* out of memory */
};

static long arg_long(int argc, char **argv, int i, long def, long min, long max)
{
    if (argc <= i)
        return def;
    char *end;
    errno = 0;
    long v = strtol(argv[i], &end, 10);
    if (errno || *end || end == argv[i] || v < min || v > max) {
        fprintf(stderr, "%s: argument %d must be an integer from %ld to %ld, got '%s'\n",
                argv[0], i, min, max, argv[i]);
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
    for (long it = 1; it <= job->iters; it++) {
#pragma acc parallel loop present(x[0:n], y[0:n], ynew[0:n])
        for (size_t i = 0; i < n; i++) {
            double left = i > 0 ? y[i - 1] : y[i];
            double right = i + 1 < n ? y[i + 1] : y[i];
            ynew[i] = (1.0 - w) * (0.5 * y[i] + 0.25 * (left + right)) + w * x[i];
        }
#pragma acc parallel loop present(y[0:n], ynew[0:n]) // copy back
        for (size_t i = 0; i < n; i++)
            y[i] = ynew[i];
        if (it % job->every == 0) {
            if (!(job->omit && job->id == 1)) {
#pragma acc update self(y[0:n])
            }
            double sum = 0.0;
            for (size_t i = 0; i < n; i++) sum += y[i] * y[i];
            job->norms[it / job->every - 1] = sqrt(sum);
        }
    }
    free(x);
    free(ynew);
    job->y = y;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 5) {
        fprintf(stderr, "usage: %s [N [ITERS [EVERY [OMIT]]]]\n", argv[0]);
        return 2;
    }
    size_t n = (size_t)arg_long(argc, argv, 1, 1048576, 1, 1L << 40);
    long iters = arg_long(argc, argv, 2, 200, 0, 1L << 40);
    long every = arg_long(argc, argv, 3, 20, 1, 1L << 40);
    int omit = (int)arg_long(argc, argv, 4, 1, 0, 1);
    long reports = iters / every;
    printf("coherence_threads: %d threads, %zu values each, %ld iterations, omit %d\n", THREADS,
           n, iters, omit);

    struct job jobs[THREADS];
    pthread_t tids[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t] = (struct job){ .id = t, .omit = omit, .n = n, .iters = iters, .every = every };
        jobs[t].norms = calloc((size_t)reports + 1, sizeof(double));
        if (!jobs[t].norms) {
            fprintf(stderr, "coherence_threads: out of memory\n");
            return 2;
        }
    }

    /* Initialize the device here, not in whichever thread comes first. */
    acc_init(acc_device_default);

    double t0 = seconds();
    for (int t = 0; t < THREADS; t++)
        if (pthread_create(&tids[t], NULL, worker, &jobs[t]) != 0) {
            fprintf(stderr, "coherence_threads: cannot start thread %d\n", t);
            return 2;
        }
    for (int t = 0; t < THREADS; t++)
        pthread_join(tids[t], NULL);
    double elapsed = seconds() - t0;

    double sum = 0.0;
    for (int t = 0; t < THREADS; t++) {
        if (jobs[t].failed) {
            fprintf(stderr, "coherence_threads: thread %d ran out of memory\n", t);
            return 2;
        }
        for (long r = 0; r < reports; r++)
            printf("thread %d step %ld norm %.12g\n", t, (r + 1) * every, jobs[t].norms[r]);
        for (size_t i = 0; i < n; i++)
            sum += jobs[t].y[i];
    }
    printf("time: %.3f s\n", elapsed);
    printf("checksum: %.12e\n", sum);

    /* Plain CPU version of each thread's work. */
    int match = 1;
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    double *ynew = malloc(n * sizeof *ynew);
    if (!x || !y || !ynew) {
        fprintf(stderr, "coherence_threads: out of memory\n");
        return 2;
    }
    for (int t = 0; t < THREADS; t++) {
        double w = 0.5 / (t + 1);
        init_job(t, n, x, y);
        for (long it = 1; it <= iters; it++) {
            for (size_t i = 0; i < n; i++) {
                double left = i > 0 ? y[i - 1] : y[i];
                double right = i + 1 < n ? y[i + 1] : y[i];
                ynew[i] = (1.0 - w) * (0.5 * y[i] + 0.25 * (left + right)) + w * x[i];
            }
            for (size_t i = 0; i < n; i++)
                y[i] = ynew[i];
            if (it % every == 0) {
                double rs = 0.0;
                for (size_t i = 0; i < n; i++)
                    rs += y[i] * y[i];
                double want = sqrt(rs), got = jobs[t].norms[it / every - 1];
                if (!(fabs(got - want) <= 1e-9 * fmax(1.0, want)))
                    match = 0;
            }
        }
        for (size_t i = 0; i < n; i++)
            if (!(fabs(jobs[t].y[i] - y[i]) <= 1e-9 * fmax(1.0, fabs(y[i]))))
                match = 0;
        free(jobs[t].y);
        free(jobs[t].norms);
    }
    printf("reference: %s\n", match ? "match" : "MISMATCH");
    free(x);
    free(y);
    free(ynew);
    return match ? 0 : 1;
}
