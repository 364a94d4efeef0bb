/* fuse_triple.c - three independent one-line loops over the same range, back
 * to back, STEPS times: 3*STEPS compute constructs whose kernels are tiny, so
 * the runtime's per-construct work dominates. The three fuse into one
 * construct (no array one writes is touched by another).
 *
 * Usage: fuse_triple [N [STEPS]]     defaults: 4096 2000
 * Prints a checksum of a, b and c (the same fused or not).
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4096;
    int steps = argc > 2 ? atoi(argv[2]) : 2000;
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c || n < 1 || steps < 1)
        return 1;
#pragma acc data create(a[0:n], b[0:n], c[0:n])
    {
        for (int s = 0; s < steps; s++) {
#pragma acc parallel loop present(a[0:n])
            for (int i = 0; i < n; i++) a[i] = 0.5 * i + s;
#pragma acc parallel loop present(b[0:n])
            for (int i = 0; i < n; i++) b[i] = 2.0 * i - s;
#pragma acc parallel loop present(c[0:n])
            for (int i = 0; i < n; i++) c[i] = (double)(i % 7) * s;
        }
#pragma acc update self(a[0:n], b[0:n], c[0:n])
    }
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += a[i] + b[i] + c[i];
    printf("checksum: %.6e\n", sum);
    free(a);
    free(b);
    free(c);
    return 0;
}
