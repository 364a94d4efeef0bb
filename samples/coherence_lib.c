/*
 * coherence_lib.c - host reads of a device-newer array made inside libc
 * (the BAD variant: a coherence bug, not a performance one).
 *
 * The array a (N doubles) and the text t (N bytes) live on the device in a
 * data region (line 104: `#pragma acc data copy(a[0:n], t[0:n])`); the
 * compute construct at
 * line 106: `#pragma acc parallel loop present(a[0:n], t[0:n])`
 * rewrites both; then the host hands them to libc without `update self`:
 * line 114: `memcpy(head, a, h * sizeof *a);`
 *   (libc's memcpy reads a's first pages),
 * line 115: `fwrite(a + n / 2, sizeof *a, 64, sink);`
 *   (libc's stdio copies 64 values from a's middle into its buffer; a
 *   write larger than the buffer would go to write(2) directly),
 * line 116: `printf("text: %.20s\n", t);`
 *   (libc's printf reads t's first bytes).
 * Each read is made by libc's code (built without frame pointers), not the
 * program's: the coherence check's walk out of libc reports it at the
 * program's call. With VARIANT fixed, `#pragma acc update self(a[0:n],
 * t[0:n])` comes before the calls. On a GPU the bad variant prints the
 * values from before the compute construct and the reference differs; on
 * the host fallback (no device copies) both variants are right.
 *
 * Usage: coherence_lib [N [VARIANT]]   defaults: 1048576 bad
 *
 * Expected profile (GCC 12 / libgomp): the data region uploads and
 * downloads 8*N and N bytes; one compute construct.
 *   With `accprof run --check coherence` on a GPU, VARIANT bad: stale host
 *   reads of a at the memcpy's and the fwrite's lines and of t at the
 *   printf's line, each named and placed at the program's call (never at
 *   libc's code), written by the compute construct; `accprof analyze`
 *   reports three C1, each proposing `#pragma acc update self(...)` before
 *   its line. VARIANT fixed: no finding. On the host fallback the check
 *   says that it does not apply.
 *
 * Output: "text: ...", "head: ...", "time: <seconds of the data region>",
 * "checksum: <sum of a after the region>", then
 * "reference: match" when what the host read through libc equals the
 * compute construct's values, else "reference: MISMATCH" and exit status
 * 1. Bad args: exit 2.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long n = 1048576;
    int fixed = 0;
    if (argc > 3) {
        fprintf(stderr, "usage: coherence_lib [N [bad|fixed]]\n");
        return 2;
    }
    if (argc > 1) {
        char *end;
        errno = 0;
        n = strtol(argv[1], &end, 10);
        if (errno || *end || end == argv[1] || n < 65536) {
            fprintf(stderr, "coherence_lib: argument 1 must be an integer >= 65536, got '%s'\n",
                    argv[1]);
            return 2;
        }
    }
    if (argc > 2) {
        if (strcmp(argv[2], "fixed") == 0) {
            fixed = 1;
        } else if (strcmp(argv[2], "bad") != 0) {
            fprintf(stderr, "coherence_lib: argument 2 must be bad or fixed, got '%s'\n", argv[2]);
            return 2;
        }
    }
    double *a = malloc(n * sizeof *a);
    char *t = malloc(n);
    FILE *sink = fopen("/dev/null", "w");
    if (!a || !t || !sink) {
        fprintf(stderr, "coherence_lib: out of memory\n");
        return 1;
    }
    for (long i = 0; i < n; i++) {
        a[i] = -1.0;
        t[i] = '-';
    }
    t[n - 1] = '\0';
    /* Sizes known only at run time: GCC would inline a small constant
     * memcpy as the program's own instructions. */
    long h = n / 1024;
    double *head = malloc(h * sizeof *head), *mid = malloc(64 * sizeof *mid);
    char text[32];
    if (!head || !mid) {
        fprintf(stderr, "coherence_lib: out of memory\n");
        return 1;
    }

    double t0 = now();
#pragma acc data copy(a[0:n], t[0:n])
    {
#pragma acc parallel loop present(a[0:n], t[0:n])
        for (long i = 0; i < n; i++) {
            a[i] = 2.0 * i + 1.0;
            t[i] = i == n - 1 ? '\0' : (char)('a' + i % 26);
        }
        if (fixed) {
#pragma acc update self(a[0:n], t[0:n])
        }
        memcpy(head, a, h * sizeof *a); /* libc reads a */
        fwrite(a + n / 2, sizeof *a, 64, sink); /* libc reads a */
        printf("text: %.20s\n", t); /* libc reads t */
        /* What fwrite and printf were given, read again on pages they opened. */
        memcpy(mid, a + n / 2, 64 * sizeof *a);
        snprintf(text, sizeof text, "%.20s", t);
    }
    double t1 = now();
    printf("head: %g %g %g\n", head[0], head[1], head[h - 1]);
    printf("time: %.3f s\n", t1 - t0);
    fclose(sink);
    int ok = strncmp(text, "abcdefghijklmnopqrst", 20) == 0;
    for (long i = 0; i < h; i++)
        ok = ok && head[i] == 2.0 * i + 1.0;
    for (long i = 0; i < 64; i++)
        ok = ok && mid[i] == 2.0 * (n / 2 + i) + 1.0;
    /* The results after the region (which copied a and t back): read,
     * so the check finds no download unread. */
    double sum = 0;
    for (long i = 0; i < n; i++) {
        sum += a[i];
        ok = ok && a[i] == 2.0 * i + 1.0 && t[i] == (i == n - 1 ? '\0' : (char)('a' + i % 26));
    }
    printf("checksum: %.6e\n", sum);
    printf("reference: %s\n", ok ? "match" : "MISMATCH");
    free(a);
    free(t);
    free(head);
    free(mid);
    return ok ? 0 : 1;
}
