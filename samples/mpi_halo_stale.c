/*
 * mpi_halo_stale.c - mpi_halo's halo exchange through the host with MPI_Send
 * and MPI_Recv, where the boundary rows are sent without being brought back
 * from the device first (the BAD variant: a coherence bug).
 *
 * The 2D heat equation on an NX x NY grid (fixed edges) is cut into blocks
 * of whole rows, one per rank, each with a halo row above and below, kept on
 * the device from
 * line 176: `#pragma acc data copyin(u[0:len], unew[0:len])`
 * Every step each rank sends its first and last owned rows to its
 * neighbours and receives their rows into its halo rows (even ranks send
 * first, odd ranks receive first, so no blocking send waits on another):
 * line 187: `MPI_Send(&u[ny], ny, MPI_DOUBLE, up, 0, MPI_COMM_WORLD); // first owned row`
 * line 188: `MPI_Send(&u[(size_t)rows * ny], ny, MPI_DOUBLE, down, 1, MPI_COMM_WORLD); // last owned row`
 * line 190: `MPI_Recv(&u[(size_t)(rows + 1) * ny], ny, MPI_DOUBLE, down, 0,`
 * line 192: `MPI_Recv(&u[0], ny, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);`
 * then sends the halo rows to the device and runs the stencil. With VARIANT
 * bad (the default) the rows sent are the host copy's, never updated since
 * the data region began: the neighbours get stale rows. With VARIANT
 * fixed the boundary rows come back first, as in mpi_halo.c:
 * line 180: `#pragma acc update self(u[ny:ny]) // first owned row`
 * line 183: `#pragma acc update self(u[rows * ny:ny]) // last owned row`
 * On a GPU with 2 or more ranks the bad variant's sums differ from the
 * serial reference (MISMATCH, exit 1); on one rank, or on the host
 * fallback (one copy), both variants match. NY defaults to 512: rows of
 * 4 KiB, small messages (large ones may take another path in MPI).
 *
 * Usage: mpirun -np P mpi_halo_stale [NX [NY [STEPS [VARIANT]]]]
 *        defaults: 2048 512 200 bad; VARIANT is bad or fixed
 *
 * Expected profile, per rank (GCC 12 / libgomp; S = STEPS, H = number of
 * neighbours of the rank (0, 1 or 2), L = rows owned = about NX/P,
 * R = 8*NY bytes = one row):
 *   the data region: 2 uploads of (L+2)*R bytes;
 *   VARIANT fixed: H downloads of R per step at the two update self lines;
 *   line 196: `#pragma acc update device(u[0:ny]) // top halo`
 *   line 199: `#pragma acc update device(u[(rows + 1) * ny:ny]) // bottom halo`
 *     together H uploads of R bytes per step;
 *   line 202: `#pragma acc parallel loop collapse(2) present(u[0:len], unew[0:len])`
 *     S launches over L x (NY-2) points;
 *   line 211: `#pragma acc update self(u[ny:rows * ny]) // result` once: L*R bytes.
 *   Per step and rank: 2 MPI_Send and 2 MPI_Recv calls (to MPI_PROC_NULL
 *   at the edges).
 *   With `accprof run --check coherence` on a GPU, VARIANT bad, 2 or more
 *   ranks: stale host reads (C1) of u (or unew: the two swap each step)
 *   named with MPI_Send at the two MPI_Send lines, on every rank with a
 *   neighbour in that direction, the device copy written by the stencil;
 *   the patch is the `update self` of the row before each. VARIANT fixed:
 *   no finding. On the host fallback the check says it does not apply.
 *
 * Output (rank 0): "time: ...", "checksum: <sum of the grid>", then
 * "reference: match" when the sum and the sum of squares equal those of a
 * serial CPU run (relative 1e-9), else "reference: MISMATCH"; every rank
 * exits 1 on a mismatch. Bad args: exit 2.
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

/* "bad" (the default) is 0, "fixed" is 1. */
static int arg_variant(int argc, char **argv, int i)
{
    if (argc <= i || strcmp(argv[i], "bad") == 0)
        return 0;
    if (strcmp(argv[i], "fixed") == 0)
        return 1;
    fprintf(stderr, "%s: argument %d must be bad or fixed, got '%s'\n", argv[0], i, argv[i]);
    MPI_Abort(MPI_COMM_WORLD, 2);
    return 2;
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
    int ny = (int)arg_long(argc, argv, 2, 512, 3);
    int steps = (int)arg_long(argc, argv, 3, 200, 0);
    int fixed = arg_variant(argc, argv, 4);
    if (nx < size) {
        if (rank == 0)
            fprintf(stderr, "mpi_halo_stale: NX (%d) must be at least the number of ranks (%d)\n",
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
        fprintf(stderr, "mpi_halo_stale: rank %d out of memory\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    for (int r = 0; r <= rows + 1; r++)
        for (int j = 0; j < ny; j++)
            u[(size_t)r * ny + j] = unew[(size_t)r * ny + j] = initial(first + r, j, nx, ny);
    if (rank == 0)
        printf("mpi_halo_stale: %d x %d grid, %d steps, %d ranks\n", nx, ny, steps, size);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
#pragma acc data copyin(u[0:len], unew[0:len])
    {
        for (int step = 0; step < steps; step++) {
            if (fixed && up != MPI_PROC_NULL) {
#pragma acc update self(u[ny:ny]) // first owned row
            }
            if (fixed && down != MPI_PROC_NULL) {
#pragma acc update self(u[rows * ny:ny]) // last owned row
            }
            for (int turn = 0; turn < 2; turn++) {
                if (turn == rank % 2) {
                    MPI_Send(&u[ny], ny, MPI_DOUBLE, up, 0, MPI_COMM_WORLD); // first owned row
                    MPI_Send(&u[(size_t)rows * ny], ny, MPI_DOUBLE, down, 1, MPI_COMM_WORLD); // last owned row
                } else {
                    MPI_Recv(&u[(size_t)(rows + 1) * ny], ny, MPI_DOUBLE, down, 0,
                             MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Recv(&u[0], ny, MPI_DOUBLE, up, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                }
            }
            if (up != MPI_PROC_NULL) {
#pragma acc update device(u[0:ny]) // top halo
            }
            if (down != MPI_PROC_NULL) {
#pragma acc update device(u[(rows + 1) * ny:ny]) // bottom halo
            }

#pragma acc parallel loop collapse(2) present(u[0:len], unew[0:len])
            for (int r = 1; r <= rows; r++)
                for (int j = 1; j < ny - 1; j++) {
                    size_t k = (size_t)r * ny + j;
                    unew[k] = u[k] + CX * (u[k - ny] - 2.0 * u[k] + u[k + ny])
                                   + CY * (u[k - 1] - 2.0 * u[k] + u[k + 1]);
                }
            double *t = u; u = unew; unew = t;
        }
#pragma acc update self(u[ny:rows * ny]) // result
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
            fprintf(stderr, "mpi_halo_stale: out of memory for the reference\n");
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
