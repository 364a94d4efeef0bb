/*
 * async.c - a chunked pipeline over several async queues.
 *
 * The array x is cut into CHUNKS pieces; piece c (from 0) goes to queue
 * 1 + c % QUEUES, and each queue's pieces are issued in turn.
 * On its queue each piece is uploaded (`update device ... async`), run through
 * a kernel (`parallel loop ... async`) and its result y downloaded
 * (`update host ... async`), so uploads, kernels and downloads of different
 * pieces can overlap. The host then waits for queue 1 alone (`wait(1)`) and
 * sums the pieces that queue produced while the other queues may still be
 * busy, then waits for everything (`wait`) and folds y back into x for the
 * next round. The device arrays are only created by the data region; all
 * traffic goes through the async updates.
 *
 * Usage: async [N [CHUNKS [QUEUES [ROUNDS]]]]     defaults: 16777216 16 4 5
 *
 * Expected profile (GCC 12 / libgomp; R = ROUNDS, K = CHUNKS, Q = QUEUES,
 * B = 8*N bytes in all, about B/K per piece):
 *   line 88: `#pragma acc data create(x[0:n], y[0:n])` reached once, no transfers.
 *   line 95: `#pragma acc update device(x[lo:len]) async(q)`
 *     reached R*K times: R*K uploads of about B/K bytes, on queues 1..Q.
 *   line 96: `#pragma acc parallel loop present(x[0:n], y[0:n]) async(q)`
 *     reached R*K times: R*K launches, spread over Q queues.
 *   line 99: `#pragma acc update host(y[lo:len]) async(q)`
 *     reached R*K times: R*K downloads of about B/K bytes.
 *   line 104: `#pragma acc wait(1)` reached R times (waits for queue 1 only).
 *   line 112: `#pragma acc wait` reached R times (waits for all queues).
 *   Per round: K uploads, K launches, K downloads, 2 waits; copies and
 *   kernels of different queues overlap in time. Host memory is pageable,
 *   so the async copies are staged (expect S1: pin the buffers).
 *
 * Output: "checksum: <sum of x plus the early partial sums>", then
 * "reference: match" when it equals a plain CPU computation (relative 1e-9),
 * else "reference: MISMATCH" and exit status 1.
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

/* The per-element work, written out again in the kernel and the reference. */
#define WORK(v) (sin(v) * exp(-0.25 * (v)) + 0.5 * (v))

int main(int argc, char **argv)
{
    size_t n = (size_t)arg_long(argc, argv, 1, 16777216, 1);
    int chunks = (int)arg_long(argc, argv, 2, 16, 1);
    int queues = (int)arg_long(argc, argv, 3, 4, 1);
    int rounds = (int)arg_long(argc, argv, 4, 5, 0);
    /* Equal pieces, the last one possibly shorter; none empty. */
    size_t chunk = (n + chunks - 1) / chunks;
    chunks = (int)((n + chunk - 1) / chunk);
    double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    double *rx = malloc(n * sizeof *rx), *ry = malloc(n * sizeof *ry);
    if (!x || !y || !rx || !ry) {
        fprintf(stderr, "async: out of memory\n");
        return 2;
    }
    printf("async: %zu values in %d chunks on %d queues, %d rounds\n", n, chunks, queues, rounds);
    for (size_t i = 0; i < n; i++)
        x[i] = rx[i] = 4.0 * (double)(i % 1000) / 1000.0;

    double early = 0.0; /* sums of queue 1's pieces, taken before the full wait */
    double t0 = seconds();
#pragma acc data create(x[0:n], y[0:n])
    {
        for (int r = 0; r < rounds; r++) {
            for (int q = 1; q <= queues; q++) {
                for (int c = q - 1; c < chunks; c += queues) {
                    size_t lo = (size_t)c * chunk;
                    size_t len = lo + chunk <= n ? chunk : n - lo;
#pragma acc update device(x[lo:len]) async(q)
#pragma acc parallel loop present(x[0:n], y[0:n]) async(q)
                    for (size_t i = lo; i < lo + len; i++)
                        y[i] = WORK(x[i]);
#pragma acc update host(y[lo:len]) async(q)
                }
            }

            /* Queue 1 is done: use its pieces while the others finish. */
#pragma acc wait(1)
            for (int c = 0; c < chunks; c += queues) {
                size_t lo = (size_t)c * chunk;
                size_t hi = lo + chunk <= n ? lo + chunk : n;
                for (size_t i = lo; i < hi; i++)
                    early += y[i];
            }

#pragma acc wait
            for (size_t i = 0; i < n; i++)
                x[i] = x[i] + 0.1 * y[i];
        }
    }
    printf("time: %.3f s\n", seconds() - t0);

    double sum = early;
    for (size_t i = 0; i < n; i++)
        sum += x[i];
    printf("checksum: %.12e\n", sum);

    /* Plain CPU reference of the same rounds. */
    double rearly = 0.0;
    for (int r = 0; r < rounds; r++) {
        for (size_t i = 0; i < n; i++)
            ry[i] = WORK(rx[i]);
        for (int c = 0; c < chunks; c += queues) {
            size_t lo = (size_t)c * chunk;
            size_t hi = lo + chunk <= n ? lo + chunk : n;
            for (size_t i = lo; i < hi; i++)
                rearly += ry[i];
        }
        for (size_t i = 0; i < n; i++)
            rx[i] = rx[i] + 0.1 * ry[i];
    }
    size_t bad = 0;
    double diff = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(x[i] - rx[i]);
        if (!(d <= 1e-9 * fmax(fabs(rx[i]), 1.0)))
            bad++;
        if (d > diff)
            diff = d;
    }
    if (!(fabs(early - rearly) <= 1e-9 * fmax(fabs(rearly), 1.0)))
        bad++;
    printf("max difference: %.3e (%zu values off)\n", diff, bad);
    printf("reference: %s\n", bad ? "MISMATCH" : "match");
    free(x);
    free(y);
    free(rx);
    free(ry);
    return bad ? 1 : 0;
}
