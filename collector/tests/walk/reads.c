/* Calls into libc that read the caller's buffer inside libc (no frame
 * pointers there): the walk out of libc must reach these lines. Built as
 * a shared object by the collector's unit tests (coherence::walk). */
#include <stdio.h>
#include <string.h>

double copy_it(double *dst, const double *src, size_t n)
{
    memcpy(dst, src, n * sizeof *src); /* read: memcpy */
    return dst[0];
}

size_t put_it(FILE *f, const double *src, size_t n)
{
    size_t k = fwrite(src, sizeof *src, n, f); /* read: fwrite */
    fflush(f);
    return k;
}

int say_it(FILE *f, const char *s)
{
    int k = fprintf(f, "%s\n", s); /* read: fprintf */
    return k + 1;
}
