/*
 * default_async.c - `acc_set_default_async` and `async` without a queue, as a
 * conformance test writes them.
 *
 * Each round copies a and b in, squares a on "the default queue" after
 * `set default_async(1)` and b on the default queue after
 * `set default_async(2)`, then adds them on queue 1 after waiting for queue 2
 * (`parallel loop async(1) wait(2)`), waits for queue 1 and copies c out at
 * the end of the data region.
 *
 * The OpenACC specification says an `async` clause without an argument uses
 * the queue `set default_async` chose, so the sum waits for both squares.
 * GCC 12 ignores the `set` directive (warning: ignoring '#pragma acc set'),
 * so both squares go to libgomp's acc_async_noval queue (a CUDA stream of
 * its own); the sum on queue 1 waits for an empty queue 2, and nothing
 * orders it after the squares: it races them. On a GPU the squares usually
 * finish first, because they are launched first and are short; WORK repeats
 * each square's arithmetic WORK times (same result) to widen the window, and
 * any added delay on the device (a tracing tool's instrumentation, a busy
 * GPU) can make the sum read unsquared values. The fix: name the queues,
 * `async(1)` and `async(2)`.
 *
 * Usage: default_async [N [ROUNDS [WORK]]]      defaults: 4096 10 1
 *
 * Expected profile (GCC 12 / libgomp; R = ROUNDS):
 *   line 74: `#pragma acc data copyin(a[0:n], b[0:n]) copyout(c[0:n])`
 *     reached R times: 2R uploads and R downloads of 8*N bytes.
 *   line 77: `#pragma acc parallel loop async` reached R times (acc_async_noval queue).
 *   line 80: `#pragma acc parallel loop async` reached R times (the same queue).
 *   line 83: `#pragma acc parallel loop async(1) wait(2)` reached R times (queue 1).
 *   line 86: `#pragma acc wait(1)` reached R times.
 *
 * Output: the number of rounds whose sums were wrong, "checksum: <sum of c>",
 * then "reference: match" when every c[i] equals a[i]^2 + b[i]^2 (integers,
 * exact), else "reference: MISMATCH" and exit status 1.
 */
#include <errno.h>
#include <openacc.h>
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

int main(int argc, char **argv)
{
    long n = arg_long(argc, argv, 1, 4096, 1);
    long rounds = arg_long(argc, argv, 2, 10, 1);
    long work = arg_long(argc, argv, 3, 1, 1);
    long *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "default_async: out of memory\n");
        return 2;
    }
    long bad_rounds = 0, checksum = 0;
    for (long r = 0; r < rounds; r++) {
        for (long i = 0; i < n; i++) {
            a[i] = (i * 7 + r) % 1000;
            b[i] = (i * 13 + 3 * r) % 1000;
            c[i] = 0;
        }
#pragma acc data copyin(a[0:n], b[0:n]) copyout(c[0:n])
        {
#pragma acc set default_async(1)
#pragma acc parallel loop async
            for (long i = 0; i < n; i++) { long s = 0; for (long k = 0; k < work; k++) s += a[i] * a[i]; a[i] = s / work; }
#pragma acc set default_async(2)
#pragma acc parallel loop async
            for (long i = 0; i < n; i++) { long s = 0; for (long k = 0; k < work; k++) s += b[i] * b[i]; b[i] = s / work; }

#pragma acc parallel loop async(1) wait(2)
            for (long i = 0; i < n; i++)
                c[i] = a[i] + b[i];
#pragma acc wait(1)
        }
        long bad = 0;
        for (long i = 0; i < n; i++) {
            long x = (i * 7 + r) % 1000, y = (i * 13 + 3 * r) % 1000;
            if (c[i] != x * x + y * y)
                bad++;
            checksum += c[i];
        }
        if (bad)
            bad_rounds++;
    }
    printf("default_async: %ld of %ld rounds wrong\n", bad_rounds, rounds);
    printf("checksum: %ld\n", checksum);
    if (bad_rounds) {
        printf("reference: MISMATCH\n");
        return 1;
    }
    printf("reference: match\n");
    return 0;
}
