/*
 * launch_crash.c - a program that dies of SIGSEGV in a compute construct:
 * the kernel is handed an address that is not device memory.
 *
 *   line 49: `#pragma acc data copy(x[0:n])` keeps x on the device;
 *   line 51: `#pragma acc parallel loop present(x[0:n])` doubles it (a good
 *     kernel first, so the trace has work before the crash);
 *   line 55: `#pragma acc parallel loop deviceptr(bad)` writes through
 *     `bad`, the address 0x1000, which the program says is a device
 *     pointer.
 *
 * On a GPU the launch of line 55 is where the program dies (in the CUDA
 * driver, or at the synchronization after it, depending on the driver).
 * On the host fallback the loop runs on the host and the first write
 * through `bad` is a SIGSEGV inside the construct of line 55, which is
 * what the end-to-end tests rely on. Either way a profiler must keep the
 * trace up to the crash, the signal, and the construct (and on a GPU the
 * driver call) it died in.
 *
 * Usage: launch_crash [N]          default: 1048576
 */
#include <errno.h>
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
    double *x = malloc(n * sizeof *x);
    if (!x) {
        fprintf(stderr, "launch_crash: out of memory\n");
        return 2;
    }
    for (long i = 0; i < n; i++)
        x[i] = (double)i;
    double *bad = (double *)(uintptr_t)0x1000;
    printf("launch_crash: n = %ld, writing through %p next\n", n, (void *)bad);
    fflush(stdout);
#pragma acc data copy(x[0:n])
    {
#pragma acc parallel loop present(x[0:n])
        for (long i = 0; i < n; i++)
            x[i] *= 2.0;
        /* the crash */
#pragma acc parallel loop deviceptr(bad)
        for (long i = 0; i < n; i++)
            bad[i] = (double)i;
    }
    printf("launch_crash: survived (x[1] = %g)\n", x[1]);
    return 3;
}
