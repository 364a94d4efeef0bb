/*
 * queue_files_step.c - the device half of queue_files.c: two step functions,
 * each a single short `parallel loop` on arrays the caller's data region
 * holds (present), each launched synchronously: the host waits for every
 * kernel.
 *
 * Expected profile: see queue_files.c.
 *   line 17: `#pragma acc parallel loop present(u[0:n], v[0:n])` in step_relax
 *   line 25: `#pragma acc parallel loop present(u[0:n], v[0:n])` in step_smooth
 */
#include "queue_files.h"

/* v relaxes u towards a fixed profile. */
void step_relax(long n, const double *restrict u, double *restrict v)
{
    long m = n;
#pragma acc parallel loop present(u[0:n], v[0:n])
    for (long i = 0; i < m; i++)
        v[i] = u[i] + 0.25 * (0.5 * (double)(i % 7) - u[i]);
}

/* u moves halfway to v. */
void step_smooth(long n, double *restrict u, const double *restrict v)
{
#pragma acc parallel loop present(u[0:n], v[0:n])
    for (long i = 0; i < n; i++)
        u[i] = 0.5 * (u[i] + v[i]);
}
