/*
 * coherence_api.c - arrays mapped by the OpenACC API routines instead of
 * directives, and the host reading the result after the time loop without
 * bringing it back (VARIANT bad: a coherence bug).
 *
 * ROUTINE picks how u and un get their device copies (lines 92-107):
 *   map     acc_malloc + acc_map_data, then `update device` (line 99;
 *           on the host fallback, which shares the host's memory, nothing);
 *   create  acc_create, then acc_update_device (line 103);
 *   copyin  acc_copyin (line 106).
 * Each step runs two compute constructs (lines 110 and 113, `present`).
 * After the loop the host reads u at line 122: `sum += w(k) * u[k];`
 * while the device copy is newer; VARIANT fixed brings it back first at
 * line 118: `acc_update_self(u, bytes);`. The copies go at lines
 * 123-130 (acc_unmap_data + acc_free, or acc_delete). On a GPU
 * the bad variant prints the initial field's checksum and differs from
 * the reference; on the host fallback both variants are right.
 *
 * Usage: coherence_api [N [STEPS [ROUTINE [VARIANT]]]]
 *        defaults: 1048576 100 map bad; ROUTINE map, create or copyin;
 *        VARIANT bad or fixed
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*N bytes): 2 device
 * blocks of B made outside any construct, 2 uploads of B, 2*S launches;
 * VARIANT fixed: 1 download of B (line 118). With `accprof run --check
 * coherence` on a GPU, VARIANT bad: a stale host read of u at line 122
 * (the construct at line 113 wrote it), one C1; VARIANT fixed: none.
 *
 * Output: "checksum: <v>" of the host's u after the loop, then "reference:
 * match" when it equals a plain CPU computation (relative 1e-9), else
 * "reference: MISMATCH" and exit status 1. Bad args: exit 2.
 */
#include <errno.h>
#include <math.h>
#include <openacc.h>
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
        fprintf(stderr, "usage: %s [N [STEPS [ROUTINE [VARIANT]]]]\n", argv[0]);
        return 2;
    }
    long n = arg_long(argc, argv, 1, 1048576, 3);
    long steps = arg_long(argc, argv, 2, 100, 1);
    const char *routine = argc > 3 ? argv[3] : "map";
    const char *variant = argc > 4 ? argv[4] : "bad";
    if (strcmp(routine, "map") != 0 && strcmp(routine, "create") != 0 &&
        strcmp(routine, "copyin") != 0) {
        fprintf(stderr, "%s: ROUTINE must be map, create or copyin, got '%s'\n", argv[0], routine);
        return 2;
    }
    if (strcmp(variant, "bad") != 0 && strcmp(variant, "fixed") != 0) {
        fprintf(stderr, "%s: VARIANT must be bad or fixed, got '%s'\n", argv[0], variant);
        return 2;
    }
    const int fixed = strcmp(variant, "fixed") == 0;
    const size_t bytes = n * sizeof(double);
    double *u = malloc(bytes), *un = malloc(bytes);
    if (!u || !un) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    init(u, n);
    init(un, n);
    void *du = NULL, *dun = NULL;
    if (strcmp(routine, "map") == 0 && acc_get_device_type() == acc_device_host) {
        /* The host fallback shares the host's memory: nothing to map. */
    } else if (strcmp(routine, "map") == 0) {
        du = acc_malloc(bytes);
        dun = acc_malloc(bytes);
        acc_map_data(u, du, bytes);
        acc_map_data(un, dun, bytes);
#pragma acc update device(u[0:n], un[0:n])
    } else if (strcmp(routine, "create") == 0) {
        acc_create(u, bytes);
        acc_create(un, bytes);
        acc_update_device(u, bytes);
        acc_update_device(un, bytes);
    } else {
        acc_copyin(u, bytes);
        acc_copyin(un, bytes);
    }
    for (long s = 0; s < steps; s++) {
#pragma acc parallel loop present(u[0:n], un[0:n])
        for (long k = 1; k < n - 1; k++)
            un[k] = u[k] + 0.25 * (u[k - 1] - 2.0 * u[k] + u[k + 1]);
#pragma acc parallel loop present(u[0:n], un[0:n])
        for (long k = 1; k < n - 1; k++)
            u[k] = un[k];
    }
    if (fixed)
        acc_update_self(u, bytes);
    /* BAD without the update: u is newer on the device. */
    double sum = 0.0;
    for (long k = 0; k < n; k++)
        sum += w(k) * u[k];
    if (du) {
        acc_unmap_data(u);
        acc_unmap_data(un);
        acc_free(du);
        acc_free(dun);
    } else {
        acc_delete(u, bytes);
        acc_delete(un, bytes);
    }
    printf("checksum: %.12g\n", sum);
    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    if (skip && *skip == '1')
        return 0;
    double *r = malloc(bytes), *rn = malloc(bytes);
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
    free(u);
    free(un);
    free(r);
    free(rn);
    return match ? 0 : 1;
}
