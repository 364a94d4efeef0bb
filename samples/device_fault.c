/*
 * device_fault.c - an async kernel that writes through a bad device pointer.
 *
 *   line 55: `#pragma acc parallel loop present(x[0:n]) async(1)` adds 1 to
 *     every x[i] on queue 1;
 *   line 58: `#pragma acc parallel loop deviceptr(bad) async(1)` writes
 *     through a pointer that is not device memory, on the same queue, so the
 *     GPU raises an illegal memory access;
 *   line 61: `#pragma acc wait(1)` is where libgomp learns of it: it prints
 *     "cuStreamSynchronize error: an illegal memory access was encountered"
 *     and exits with status 1 (GCC 12's libgomp may also hang in its own
 *     exit path afterwards: a libgomp behaviour, not the program's).
 *
 * A profiler must leave this alone: the same message, the same exit status,
 * no hang or crash of its own, and a trace that says the program died at the
 * wait on line 61 after the kernel of line 58.
 *
 * Without a GPU (host fallback) the bad pointer would fault on the host, so
 * the program says so and does nothing.
 *
 * Usage: device_fault [N]          default: 1048576
 */
#include <errno.h>
#include <openacc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = 1048576;
    if (argc > 1) {
        char *end;
        errno = 0;
        n = strtol(argv[1], &end, 10);
        if (errno || *end || n < 1) {
            fprintf(stderr, "%s: N must be an integer >= 1, got '%s'\n", argv[0], argv[1]);
            return 2;
        }
    }
    if (acc_get_num_devices(acc_device_nvidia) == 0) {
        printf("device_fault: no NVIDIA GPU, nothing to do\n");
        return 0;
    }
    double *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "device_fault: out of memory\n");
        return 2;
    }
    for (long i = 0; i < n; i++)
        x[i] = (double)i;
    double *bad = (double *)(uintptr_t)0x1000;
#pragma acc data copy(x[0:n])
    {
#pragma acc parallel loop present(x[0:n]) async(1)
        for (long i = 0; i < n; i++)
            x[i] += 1.0;
#pragma acc parallel loop deviceptr(bad) async(1)
        for (long i = 0; i < n; i++)
            bad[i] = (double)i;
#pragma acc wait(1)
    }
    printf("device_fault: the fault went unnoticed (x[1] = %g)\n", x[1]);
    return 3;
}
