/*
 * coherence_enter.c - malloc'd arrays mapped with `enter data create` and
 * filled with `update device`; every EVERY steps the host brings u back,
 * heats one point of it and (VARIANT fixed) sends the point back with
 * `update device`; VARIANT bad leaves the update out: the device goes on
 * with the old value (a lost host write, a coherence bug).
 *
 * Line 86: `#pragma acc enter data create(u[0:n], un[0:n])`, line
 * 87: `#pragma acc update device(u[0:n], un[0:n])`. Each step runs two
 * compute constructs (lines 89 and 92). Every EVERY steps line 96
 * (`#pragma acc update self(u[0:n])`) brings u back and the host writes
 * it at line 97: `u[n / 2] += 1.0; // the host write`. VARIANT fixed
 * sends it to the device at line 99: `#pragma acc update device(u[n / 2:1])`.
 * Line 103: `#pragma acc exit data copyout(u[0:n]) delete(un[0:n])`. On
 * a GPU the bad variant loses every heating and differs from the
 * reference; on the host fallback both variants are right.
 *
 * Usage: coherence_enter [N [STEPS [EVERY [VARIANT]]]]
 *        defaults: 1048576 100 10 bad; VARIANT is bad or fixed
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, E = EVERY, B = 8*N
 * bytes): 2 blocks of B made by the enter data (no copy), 2 uploads of B
 * (line 87), 2*S launches, floor(S/E) downloads of B (line 96),
 * VARIANT fixed: floor(S/E) uploads of 8 bytes (line 99), 1 download of
 * B at the exit data. With `accprof run --check coherence` on a GPU,
 * VARIANT bad: a lost host write of u at line 97 (the construct at
 * line 89 used the device copy), one C2 proposing `update device` after
 * it; VARIANT fixed: none.
 *
 * Output: "checksum: <v>" of u after the exit data, then "reference:
 * match" when it equals a plain CPU computation (relative 1e-9), else
 * "reference: MISMATCH" and exit status 1. Bad args: exit 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long arg_long(int argc, char **argv, int i, long def, long min)
{
    if (argc <= i)
        return def;
    char *end;
    errno = 0;
    long v = strtol(argv[i], &end, 10);
    if (errno || *end || end == argv[i] || v < min) {
        fprintf(stderr, "%s: argument %d must be an integer >= %ld, got '%s'\n", argv[0], i, min,
                argv[i]);
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

int main(int argc, char **argv)
{
    if (argc > 5) {
        fprintf(stderr, "usage: %s [N [STEPS [EVERY [VARIANT]]]]\n", argv[0]);
        return 2;
    }
    long n = arg_long(argc, argv, 1, 1048576, 3);
    long steps = arg_long(argc, argv, 2, 100, 1);
    long every = arg_long(argc, argv, 3, 10, 1);
    const char *variant = argc > 4 ? argv[4] : "bad";
    if (strcmp(variant, "bad") != 0 && strcmp(variant, "fixed") != 0) {
        fprintf(stderr, "%s: VARIANT must be bad or fixed, got '%s'\n", argv[0], variant);
        return 2;
    }
    const int fixed = strcmp(variant, "fixed") == 0;
    double *u = malloc(n * sizeof *u), *un = malloc(n * sizeof *un);
    double *r = malloc(n * sizeof *r), *rn = malloc(n * sizeof *rn);
    if (!u || !un || !r || !rn) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    init(u, n);
    init(un, n);
#pragma acc enter data create(u[0:n], un[0:n])
#pragma acc update device(u[0:n], un[0:n])
    for (long s = 1; s <= steps; s++) {
#pragma acc parallel loop present(u[0:n], un[0:n])
        for (long k = 1; k < n - 1; k++)
            un[k] = u[k] + 0.25 * (u[k - 1] - 2.0 * u[k] + u[k + 1]);
#pragma acc parallel loop present(u[0:n], un[0:n])
        for (long k = 1; k < n - 1; k++)
            u[k] = un[k];
        if (s % every == 0) {
#pragma acc update self(u[0:n])
            u[n / 2] += 1.0; // the host write
            if (fixed) {
#pragma acc update device(u[n / 2:1])
            }
        }
    }
#pragma acc exit data copyout(u[0:n]) delete(un[0:n])
    double sum = 0.0;
    for (long k = 0; k < n; k++)
        sum += w(k) * u[k];
    printf("checksum: %.12g\n", sum);
    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    if (skip && *skip == '1')
        return 0;
    init(r, n);
    init(rn, n);
    for (long s = 1; s <= steps; s++) {
        for (long k = 1; k < n - 1; k++)
            rn[k] = r[k] + 0.25 * (r[k - 1] - 2.0 * r[k] + r[k + 1]);
        for (long k = 1; k < n - 1; k++)
            r[k] = rn[k];
        if (s % every == 0)
            r[n / 2] += 1.0;
    }
    double want = 0.0;
    for (long k = 0; k < n; k++)
        want += w(k) * r[k];
    int match = fabs(sum - want) <= 1e-9 * fmax(1.0, fabs(want));
    printf("reference: %s\n", match ? "match" : "MISMATCH");
    free(u);
    free(un);
    free(r);
    free(rn);
    return match ? 0 : 1;
}
