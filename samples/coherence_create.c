/*
 * coherence_create.c - arrays that only `create` maps and the device
 * alone fills (the NPB SP/BT layout: rhs, forcing, square are never copied
 * either way), and the host reading one of them after the time loop
 * without `update self` (VARIANT bad: a coherence bug).
 *
 * Static globals u, rhs, forcing, square (NMAX doubles each). Line 78:
 * `#pragma acc data create(u, rhs, forcing, square)` makes their device
 * copies in one block without a copy; line 80: `update device(u[0:n])`
 * fills u, the only one the host ever sends. Line 81: the device computes
 * forcing. Each step (line 85) computes square and rhs from u and forcing
 * and advances u. After the loop `update self(u[0:n])` (line 92) brings u
 * back in both variants; the host then reads rhs at line 98 (`res += rhs[k]
 * * rhs[k];`) while only the device copy holds it: no copy ever named
 * rhs's host address, so only the runtime's mapping table tells the check
 * where it is. VARIANT fixed brings rhs back at line 94. On a GPU the bad
 * variant prints a residual of 0 and differs from the reference; on the
 * host fallback both are right.
 *
 * Usage: coherence_create [N [STEPS [VARIANT]]]
 *        defaults: 1048576 50 bad; N <= 1048576; VARIANT is bad or fixed
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*N bytes): the data
 * region allocates one block of 4 NMAX doubles and copies nothing; 1 upload
 * of B (line 80); 1 + S launches; 1 download of B (line 92), and with
 * VARIANT fixed one more (line 94). With `accprof run --check coherence`
 * on a GPU the exit note counts all four arrays among the watched ranges
 * (the mapping table names them); VARIANT bad: a stale host read of rhs at
 * line 98 (written by the construct at line 85), one C1 proposing `update
 * self(rhs...)` before it; VARIANT fixed: none.
 *
 * Output: "checksum: <sum of u>", "residual: <sum of rhs^2>", then
 * "reference: match" when both equal a plain CPU computation (relative
 * 1e-9), else "reference: MISMATCH" and exit status 1. Bad args: exit 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NMAX 1048576L

static double u[NMAX], rhs[NMAX], forcing[NMAX], square[NMAX];

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

int main(int argc, char **argv)
{
    if (argc > 4) {
        fprintf(stderr, "usage: %s [N [STEPS [VARIANT]]]\n", argv[0]);
        return 2;
    }
    long n = arg_long(argc, argv, 1, NMAX, 1, NMAX);
    long steps = arg_long(argc, argv, 2, 50, 1, 1000000);
    const char *variant = argc > 3 ? argv[3] : "bad";
    if (strcmp(variant, "bad") != 0 && strcmp(variant, "fixed") != 0) {
        fprintf(stderr, "%s: VARIANT must be bad or fixed, got '%s'\n", argv[0], variant);
        return 2;
    }
    const int fixed = strcmp(variant, "fixed") == 0;
    for (long k = 0; k < n; k++)
        u[k] = 1.0 + (double)(k % 7);
    double sum = 0.0, res = 0.0;
#pragma acc data create(u, rhs, forcing, square)
    {
#pragma acc update device(u[0:n])
#pragma acc parallel loop present(forcing)
        for (long k = 0; k < n; k++)
            forcing[k] = 0.001 * (double)(k % 11);
        for (long s = 0; s < steps; s++) {
#pragma acc parallel loop present(u, rhs, forcing, square)
            for (long k = 0; k < n; k++) {
                square[k] = u[k] * u[k];
                rhs[k] = forcing[k] - 0.01 * square[k];
                u[k] += 0.1 * rhs[k];
            }
        }
#pragma acc update self(u[0:n])
        if (fixed) {
#pragma acc update self(rhs[0:n])
        }
        /* BAD without the second update: rhs lives on the device only. */
        for (long k = 0; k < n; k++) {
            res += rhs[k] * rhs[k];
            sum += u[k];
        }
    }
    printf("checksum: %.12g\nresidual: %.12g\n", sum, res);
    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    if (skip && *skip == '1')
        return 0;
    double want_sum = 0.0, want_res = 0.0;
    for (long k = 0; k < n; k++) {
        double x = 1.0 + (double)(k % 7), f = 0.001 * (double)(k % 11), r = 0.0;
        for (long s = 0; s < steps; s++) {
            r = f - 0.01 * x * x;
            x += 0.1 * r;
        }
        want_sum += x;
        want_res += r * r;
    }
    int match = fabs(sum - want_sum) <= 1e-9 * fmax(1.0, fabs(want_sum)) &&
                fabs(res - want_res) <= 1e-9 * fmax(1.0, fabs(want_res));
    printf("reference: %s\n", match ? "match" : "MISMATCH");
    return match ? 0 : 1;
}
