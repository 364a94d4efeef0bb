/* jacobi_copy.c - Jacobi sweeps with a copy-back: a stencil from a into b,
 * then a kernel copying b back into a, both in one data region, ITERS times.
 * The copy-back is a whole construct per iteration that swapping the
 * pointers to a and b would remove; fusing it with the stencil would be
 * wrong (it writes what other iterations of the stencil read).
 *
 * Usage: jacobi_copy [N [ITERS]]     defaults: 1024 1000
 * Built with -DSWAP, the copy-back is replaced by the swap of the pointers
 * (bench/fusion.sh measures the two); both print the same sum.
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    int iters = argc > 2 ? atoi(argv[2]) : 1000;
    double (*a)[n] = malloc(sizeof(double[n][n]));
    double (*b)[n] = malloc(sizeof(double[n][n]));
    if (!a || !b || n < 3 || iters < 1)
        return 1;
    void *pa = a, *pb = b;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            a[i][j] = b[i][j] = (i == 0 || j == 0) ? 1.0 : 0.0;
#pragma acc data copy(a[0:n][0:n], b[0:n][0:n])
    for (int it = 0; it < iters; it++) {
#pragma acc parallel loop collapse(2) present(a[0:n][0:n], b[0:n][0:n])
        for (int i = 1; i < n - 1; i++)
            for (int j = 1; j < n - 1; j++)
                b[i][j] = 0.25 * (a[i - 1][j] + a[i + 1][j] + a[i][j - 1] + a[i][j + 1]);
#ifndef SWAP
#pragma acc parallel loop collapse(2) present(a[0:n][0:n], b[0:n][0:n])
        for (int i = 1; i < n - 1; i++)
            for (int j = 1; j < n - 1; j++)
                a[i][j] = b[i][j];
#else
        double(*t)[n] = a;
        a = b;
        b = t;
#endif
    }
    double sum = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            sum += a[i][j];
    printf("sum: %.10e\n", sum);
    free(pa);
    free(pb);
    return 0;
}
