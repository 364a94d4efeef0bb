/*
 * data_shapes.c - loops whose compute constructs spend their host time
 * moving data, not launching: the time belongs to a data finding, and a
 * profiler must not call them launch-bound. One shape per run, chosen by
 * the first argument:
 *
 *   helper   a helper function called every step does
 *              `#pragma acc parallel loop copy(a[0:n])` (line 73): each call
 *              uploads and downloads a, n doubles (bad: a data region in
 *              main keeps a on the device).
 *   table    every step's compute construct (line 82) has
 *              `copyin(table[0:T])`: a constant table of T doubles uploaded
 *              STEPS times (bad: one upload before the loop suffices).
 *   update   a data region around the loop (line 132), but
 *              `#pragma acc update device(a[0:n])` every step (line 135)
 *              though the host changes nothing (bad).
 *   clean    the data region around the loop (line 132) and nothing else:
 *              kernels of about a millisecond each on a GPU; nothing to fix.
 *
 * Every step runs one kernel of W sweeps over a (a[i] = 0.5 * (a[i] +
 * table[i % T]) W times), so with the defaults a kernel takes about a
 * millisecond on an H100; `update` and `clean` run the same kernel inside
 * the data region.
 *
 * Usage: data_shapes SHAPE [N [STEPS [W]]]   defaults: 4194304 (4 Mi
 *        doubles: 32 MiB) 40 8; T is 65536 (512 KiB).
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS):
 *   helper: line 73 reached S times, 2 S transfers of 8 N bytes (copy).
 *   table:  line 82 reached S times, S uploads of 8 T bytes (copyin);
 *           a moves once each way (data region at line 128).
 *   update: line 135 reached S times, S uploads of 8 N bytes.
 *   clean:  line 132 once, 1 upload and 1 download of 8 N bytes; S launches.
 *
 * Output: "checksum: <sum of a>", then "reference: match" when a equals a
 * plain CPU computation (relative 1e-9), else "reference: MISMATCH" and exit
 * status 1; SAMPLE_SKIP_REFERENCE=1 skips it (timing runs). Bad args: exit 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define T 65536

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
        exit(2);
    }
    return v;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The helper of `helper`: its own copy of a, every call. */
static void relax_copy(long n, long w, double *restrict a, const double *restrict table)
{
#pragma acc parallel loop copy(a[0:n]) present(table[0:T])
    for (long i = 0; i < n; i++)
        for (long k = 0; k < w; k++)
            a[i] = 0.5 * (a[i] + table[i % T]);
}

/* The step of `table`: the constant table uploaded with every construct. */
static void relax_table(long n, long w, double *restrict a, const double *restrict table)
{
#pragma acc parallel loop present(a[0:n]) copyin(table[0:T])
    for (long i = 0; i < n; i++)
        for (long k = 0; k < w; k++)
            a[i] = 0.5 * (a[i] + table[i % T]);
}

static void relax_present(long n, long w, double *restrict a, const double *restrict table)
{
#pragma acc parallel loop present(a[0:n], table[0:T])
    for (long i = 0; i < n; i++)
        for (long k = 0; k < w; k++)
            a[i] = 0.5 * (a[i] + table[i % T]);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: data_shapes helper|table|update|clean [N [STEPS [W]]]\n");
        return 2;
    }
    const char *shape = argv[1];
    int helper = !strcmp(shape, "helper"), table_shape = !strcmp(shape, "table");
    int update = !strcmp(shape, "update"), clean = !strcmp(shape, "clean");
    if (!(helper || table_shape || update || clean)) {
        fprintf(stderr, "data_shapes: unknown shape '%s' (helper, table, update, clean)\n", shape);
        return 2;
    }
    long n = arg_long(argc, argv, 2, 4194304, 1);
    long steps = arg_long(argc, argv, 3, 40, 0);
    long w = arg_long(argc, argv, 4, 8, 1);
    double *a = malloc(n * sizeof *a), *ref = malloc(n * sizeof *ref);
    double *table = malloc(T * sizeof *table);
    if (!a || !ref || !table) {
        fprintf(stderr, "data_shapes: out of memory\n");
        return 2;
    }
    for (long i = 0; i < n; i++)
        a[i] = ref[i] = (double)(i % 1000) / 1000.0;
    for (long i = 0; i < T; i++)
        table[i] = sin(0.001 * (double)i);
    double t0 = seconds();
    if (helper) {
#pragma acc data copyin(table[0:T])
        for (long s = 0; s < steps; s++)
            relax_copy(n, w, a, table);
    } else if (table_shape) {
#pragma acc data copy(a[0:n])
        for (long s = 0; s < steps; s++)
            relax_table(n, w, a, table);
    } else {
#pragma acc data copy(a[0:n]) copyin(table[0:T])
        for (long s = 0; s < steps; s++) {
            if (update) {
#pragma acc update device(a[0:n])
            }
            relax_present(n, w, a, table);
        }
    }
    double t1 = seconds();
    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    int check = !(skip && *skip == '1');
    for (long s = 0; check && s < steps; s++)
        for (long i = 0; i < n; i++)
            for (long k = 0; k < w; k++)
                ref[i] = 0.5 * (ref[i] + table[i % T]);
    double sum = 0.0;
    int match = 1;
    for (long i = 0; i < n; i++) {
        sum += a[i];
        if (check && fabs(a[i] - ref[i]) > 1e-9 * fmax(1.0, fabs(ref[i])))
            match = 0;
    }
    printf("time: %.6f s\n", t1 - t0);
    printf("checksum: %.12e\n", sum);
    printf("reference: %s\n", !check ? "skipped" : match ? "match" : "MISMATCH");
    free(a);
    free(ref);
    free(table);
    return match ? 0 : 1;
}
