/*
 * mpi_halo_whole.c - MPI + OpenACC halo exchange staged through whole arrays (the BAD variant).
 *
 * mpi_halo.c as a first port usually writes it: every time step the whole
 * block goes to the host (`update host(u[0:len])`), the two MPI_Sendrecv
 * calls swap one row with each neighbour, and the whole block goes back to
 * the device (`update device(u[0:len])`), although MPI read two rows and
 * wrote two. mpi_halo.c moves only those rows; packing the halos on the
 * device, or `host_data use_device` with a CUDA-aware MPI, moves less still.
 *
 * Usage: mpirun -np P mpi_halo_whole [NX [NY [STEPS]]]     defaults: 2048 2048 200
 *
 * Expected profile, per rank (GCC 12 / libgomp; S = STEPS, L = rows owned =
 * about NX/P, R = 8*NY bytes = one row, B = (L+2)*R bytes = the block):
 *   line 145: `#pragma acc data copyin(u[0:len], unew[0:len])`
 *     reached once: 2 uploads of B bytes.
 *   line 147: `for (int step = 0; step < steps; step++)` host time loop, S iterations
 *   line 149: `#pragma acc update host(u[0:len]) // whole block`
 *     S downloads of B bytes.
 *   line 150: `MPI_Sendrecv(&u[ny], ny, MPI_DOUBLE, up, 0,` and
 *   line 153: `MPI_Sendrecv(&u[rows * ny], ny, MPI_DOUBLE, down, 1,` 2 calls
 *     per step, each sending and receiving R bytes (none towards a missing
 *     neighbour).
 *   line 156: `#pragma acc update device(u[0:len]) // whole block`
 *     S uploads of B bytes.
 *   line 158: `#pragma acc parallel loop collapse(2) present(u[0:len], unew[0:len])`
 *     S launches over L x (NY-2) points.
 *   Findings to expect: the updates at lines 149 and 156 move B bytes per
 *   step where MPI read and wrote at most 2*R: update only the rows MPI
 *   uses (as mpi_halo.c does), pack them on the device, or hand device
 *   addresses to a CUDA-aware MPI.
 *
 * Output (rank 0): "checksum: <sum of the grid>", then "reference: match"
 * when the sum and the sum of squares equal those of a serial CPU run
 * (relative 1e-9), else "reference: MISMATCH"; every rank exits 1 on a
 * mismatch.
 */
#include <errno.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Diffusion number per direction (alpha*dt/h^2); stable below 0.25. */
#define CX 0.2
#define CY 0.2

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
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    return v;
}

/* Initial value of global point (g, j), g = 0 .. nx + 1 (0 and nx + 1 are the
 * fixed top and bottom edges), j = 0 .. ny - 1 (0 and ny - 1 fixed too). */
static double initial(long g, int j, int nx, int ny)
{
    double x = (double)g / (nx + 1) - 0.3;
    double y = (double)j / (ny - 1) - 0.55;
    double v = 10.0 + 80.0 * exp(-(x * x + y * y) / 0.03);
    if (g == 0)
        v += 20.0 * j / (ny - 1); /* a warm top edge, so heat flows across ranks */
    return v;
}

/* Serial CPU run of the whole grid; sums of the nx inner rows. */
static int reference(int nx, int ny, int steps, double *sum, double *sumsq)
{
    size_t w = (size_t)ny, len = (size_t)(nx + 2) * w;
    double *a = malloc(len * sizeof *a), *b = malloc(len * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return -1;
    }
    for (long g = 0; g <= nx + 1; g++)
        for (int j = 0; j < ny; j++)
            a[g * w + j] = b[g * w + j] = initial(g, j, nx, ny);
    for (int s = 0; s < steps; s++) {
        for (size_t r = 1; r <= (size_t)nx; r++)
            for (size_t j = 1; j + 1 < w; j++) {
                size_t k = r * w + j;
                b[k] = a[k] + CX * (a[k - w] - 2.0 * a[k] + a[k + w])
                            + CY * (a[k - 1] - 2.0 * a[k] + a[k + 1]);
            }
        double *t = a; a = b; b = t;
    }
    *sum = *sumsq = 0.0;
    for (size_t k = w; k < (size_t)(nx + 1) * w; k++) {
        *sum += a[k];
        *sumsq += a[k] * a[k];
    }
    free(a);
    free(b);
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int nx = (int)arg_long(argc, argv, 1, 2048, 1);
    int ny = (int)arg_long(argc, argv, 2, 2048, 3);
    int steps = (int)arg_long(argc, argv, 3, 200, 0);
    if (nx < size) {
        if (rank == 0)
            fprintf(stderr, "mpi_halo_whole: NX (%d) must be at least the number of ranks (%d)\n",
                    nx, size);
        MPI_Finalize();
        return 2;
    }

    /* Rows first+1 .. first+rows of the global grid belong to this rank. */
    int rows = nx / size + (rank < nx % size);
    long first = (long)rank * (nx / size) + (rank < nx % size ? rank : nx % size);
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    int down = rank + 1 < size ? rank + 1 : MPI_PROC_NULL;
    size_t len = (size_t)(rows + 2) * ny;
    double *u = malloc(len * sizeof *u), *unew = malloc(len * sizeof *unew);
    if (!u || !unew) {
        fprintf(stderr, "mpi_halo_whole: rank %d out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int r = 0; r <= rows + 1; r++)
        for (int j = 0; j < ny; j++)
            u[(size_t)r * ny + j] = unew[(size_t)r * ny + j] = initial(first + r, j, nx, ny);
    if (rank == 0)
        printf("mpi_halo_whole: %d x %d grid, %d steps, %d ranks\n", nx, ny, steps, size);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
#pragma acc data copyin(u[0:len], unew[0:len])
    {
        for (int step = 0; step < steps; step++) {
            /* The whole block to the host for the exchange. */
#pragma acc update host(u[0:len]) // whole block
            MPI_Sendrecv(&u[ny], ny, MPI_DOUBLE, up, 0,
                         &u[(size_t)(rows + 1) * ny], ny, MPI_DOUBLE, down, 0,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Sendrecv(&u[rows * ny], ny, MPI_DOUBLE, down, 1,
                         &u[0], ny, MPI_DOUBLE, up, 1,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
#pragma acc update device(u[0:len]) // whole block

#pragma acc parallel loop collapse(2) present(u[0:len], unew[0:len])
            for (int r = 1; r <= rows; r++)
                for (int j = 1; j < ny - 1; j++) {
                    size_t k = (size_t)r * ny + j;
                    unew[k] = u[k] + CX * (u[k - ny] - 2.0 * u[k] + u[k + ny])
                                   + CY * (u[k - 1] - 2.0 * u[k] + u[k + 1]);
                }
            double *t = u; u = unew; unew = t;
        }
#pragma acc update host(u[ny:rows * ny]) // result
    }
    double elapsed = MPI_Wtime() - t0, slowest;
    MPI_Reduce(&elapsed, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    double local[2] = { 0.0, 0.0 }, global[2];
    for (size_t k = (size_t)ny; k < (size_t)(rows + 1) * ny; k++) {
        local[0] += u[k];
        local[1] += u[k] * u[k];
    }
    MPI_Reduce(local, global, 2, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);

    int ok = 1;
    if (rank == 0) {
        printf("time: %.3f s (slowest rank)\n", slowest);
        printf("checksum: %.12e\n", global[0]);
        double ref[2] = { 0.0, 0.0 };
        if (reference(nx, ny, steps, &ref[0], &ref[1]) != 0) {
            fprintf(stderr, "mpi_halo_whole: out of memory for the reference\n");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        for (int i = 0; i < 2; i++)
            if (!(fabs(global[i] - ref[i]) <= 1e-9 * fabs(ref[i])))
                ok = 0;
        printf("reference sum: %.12e, sum of squares: %.12e (got %.12e)\n",
               ref[0], ref[1], global[1]);
        printf("reference: %s\n", ok ? "match" : "MISMATCH");
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(u);
    free(unew);
    MPI_Finalize();
    return ok ? 0 : 1;
}
