/*
 * caller_files_step.c - the device half of caller_files.c: one time step of
 * the 2D heat stencil, with its own data clauses (the BAD variant: called
 * from a time loop in another file, it moves the whole grid on every call).
 *
 * Expected profile: see caller_files.c.
 *   line 17: `void heat_step(int nx, int ny, const double *restrict u, double *restrict unew)`
 *   line 19: `#pragma acc parallel loop collapse(2) copyin(u[0:nx*ny]) copyout(unew[0:nx*ny])`
 */
#include <stddef.h>
#include "caller_files.h"

#define CX 0.2
#define CY 0.2

/* One time step on the device: unew from u, edges kept. */
void heat_step(int nx, int ny, const double *restrict u, double *restrict unew)
{
#pragma acc parallel loop collapse(2) copyin(u[0:nx*ny]) copyout(unew[0:nx*ny])
    for (int i = 0; i < nx; i++)
        for (int j = 0; j < ny; j++) {
            size_t k = (size_t)i * ny + j;
            if (i == 0 || j == 0 || i == nx - 1 || j == ny - 1)
                unew[k] = u[k];
            else
                unew[k] = u[k] + CX * (u[k - ny] - 2.0 * u[k] + u[k + ny])
                               + CY * (u[k - 1] - 2.0 * u[k] + u[k + 1]);
        }
}

