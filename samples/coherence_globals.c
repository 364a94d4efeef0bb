/*
 * coherence_globals.c - static global arrays with one `data create` in
 * main, filled by `update device`, computed on in functions under `data
 * present` (the NPB SP/BT layout), and the host reading the result after
 * the time loop without `update self` (VARIANT bad: a coherence bug).
 *
 * The arrays are static globals (u, un: NMAX doubles each). Line 98:
 * `#pragma acc data create(u, un)` makes their device copies without a
 * copy; line 100: `#pragma acc update device(u[0:n], un[0:n])` fills them. Each
 * step calls step() (line 102), whose two compute constructs (lines
 * 72 and 75) run under `data present(u, un)`. After the loop the host
 * reads u at line 108: `sum += w(k) * u[k];` while the device copy is
 * newer; VARIANT fixed brings it back first at line 104:
 * `#pragma acc update self(u[0:n])`. On a GPU the bad variant prints the
 * initial field's checksum and differs from the reference; on the host
 * fallback (no device copies) both variants are right.
 *
 * Usage: coherence_globals [N [STEPS [VARIANT]]]
 *        defaults: 1048576 100 bad; N <= 1048576; VARIANT is bad or fixed
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*N bytes): the data
 * region allocates 2 blocks of 8 MiB (the whole arrays) and copies
 * nothing; 2 uploads of B (line 100); 2*S launches; VARIANT fixed: 1
 * download of B (line 104). With `accprof run --check coherence` on a
 * GPU, VARIANT bad: a stale host read of u at line 108 (the construct at
 * line 75 wrote it), one C1 proposing `update self` before it; VARIANT
 * fixed: none, and the exit note counts u and un among the watched ranges.
 *
 * Output: "checksum: <v>" of the host's u after the loop, then "reference:
 * match" when it equals a plain CPU computation (relative 1e-9), else
 * "reference: MISMATCH" and exit status 1. Bad args: exit 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMAX 1048576L

static double u[NMAX], un[NMAX];
static long n;

static long arg_long(int argc, char **argv, int i, long def, long min, long max)
{
    if (argc <= i)
        return def;
    char *end;
    errno = 0;
    long v = strtol(argv[i], &end, 10);
    if (errno || *end || end == argv[i] || v < min || v > max) {
        fprintf(stderr, "%s: argument %d must be an integer in %ld..%ld, got '%s'\n", argv[0], i,
                min, max, argv[i]);
        exit(2);
    }
    return v;
}

static void init(double *a, long len)
{
    for (long k = 0; k < len; k++)
        a[k] = (k % 97 == 0) ? 1.0 : 0.0;
}

static double w(long k) { return (double)(k % 5 + 1); }

/* One diffusion step on the device copies. */
static void step(void)
{
#pragma acc data present(u, un)
    {
#pragma acc parallel loop
        for (long k = 1; k < n - 1; k++)
            un[k] = u[k] + 0.25 * (u[k - 1] - 2.0 * u[k] + u[k + 1]);
#pragma acc parallel loop
        for (long k = 1; k < n - 1; k++)
            u[k] = un[k];
    }
}

int main(int argc, char **argv)
{
    if (argc > 4) {
        fprintf(stderr, "usage: %s [N [STEPS [VARIANT]]]\n", argv[0]);
        return 2;
    }
    n = arg_long(argc, argv, 1, NMAX, 3, NMAX);
    long steps = arg_long(argc, argv, 2, 100, 1, 1000000);
    const char *variant = argc > 3 ? argv[3] : "bad";
    if (strcmp(variant, "bad") != 0 && strcmp(variant, "fixed") != 0) {
        fprintf(stderr, "%s: VARIANT must be bad or fixed, got '%s'\n", argv[0], variant);
        return 2;
    }
    const int fixed = strcmp(variant, "fixed") == 0;
    init(u, n);
    init(un, n);
    double sum = 0.0;
#pragma acc data create(u, un)
    {
#pragma acc update device(u[0:n], un[0:n])
        for (long s = 0; s < steps; s++)
            step();
        if (fixed) {
#pragma acc update self(u[0:n])
        }
        /* BAD without the update: u is newer on the device. */
        for (long k = 0; k < n; k++)
            sum += w(k) * u[k];
    }
    printf("checksum: %.12g\n", sum);
    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    if (skip && *skip == '1')
        return 0;
    double *r = malloc(n * sizeof *r), *rn = malloc(n * sizeof *rn);
    if (!r || !rn) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    init(r, n);
    init(rn, n);
    for (long s = 0; s < steps; s++) {
        for (long k = 1; k < n - 1; k++)
            rn[k] = r[k] + 0.25 * (r[k - 1] - 2.0 * r[k] + r[k + 1]);
        for (long k = 1; k < n - 1; k++)
            r[k] = rn[k];
    }
    double want = 0.0;
    for (long k = 0; k < n; k++)
        want += w(k) * r[k];
    int match = fabs(sum - want) <= 1e-9 * fmax(1.0, fabs(want));
    printf("reference: %s\n", match ? "match" : "MISMATCH");
    free(r);
    free(rn);
    return match ? 0 : 1;
}
