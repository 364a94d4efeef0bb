/*
 * shared_page.c - a mapped array that shares its first and last pages with
 * unrelated host data the host keeps using while the device copy is newer,
 * and one genuine stale read of the array (the BAD variant).
 *
 * One page-aligned block holds, in this order, a host-only history of HEAD
 * doubles, the array a of N doubles and a host-only record of TAIL doubles:
 * the history is on a's first page, the record on a's last one (unless
 * 8*(HEAD+N) is a multiple of the page size, which N = 8000 and N = 4500
 * are not). Only a is mapped to the device, at
 * line 126: `#pragma acc data copy(a[0:n])`
 * and each step's kernel,
 * line 129: `#pragma acc parallel loop present(a[0:n])`
 * makes the device copy newer. Between the kernels the host reads and
 * writes its history and its record, on the very pages a lies on:
 * line 132: `hist[s % HEAD] = hist[(s - 1) % HEAD] + 0.5 * s; // unrelated`
 * line 133: `rec->steps += 1; // unrelated`
 * line 134: `rec->last = hist[s % HEAD]; // unrelated`
 * These accesses are outside every mapped range: correct, and not to be
 * reported. After the loop, still inside the data region, the host reads
 * one value of a,
 * line 139: `probe = a[n / 2]; // the stale read`
 * With VARIANT bad (the default) nothing brought a back first: the probe is
 * the value from before the loop, a real stale read. With VARIANT fixed,
 * line 137: `#pragma acc update self(a[0:n])`
 * comes before it. On a GPU the bad variant prints the wrong probe
 * (MISMATCH, exit 1); on the host fallback both variants match.
 *
 * Usage: shared_page [N [STEPS [VARIANT]]]
 *        defaults: 8000 100 bad; VARIANT is bad or fixed; N >= 4096, so that
 *        a is at least 32 KiB (libgomp stages smaller copies through a buffer
 *        of its own)
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*N bytes):
 *   the data region: one upload and one download of B; S launches of the
 *   kernel; with VARIANT fixed one more download of B at the update self.
 *   With `accprof run --check coherence` on a GPU, VARIANT bad: exactly one
 *   stale host read (C1) of a, at the probe's line, the device copy written
 *   by the kernel; the proposal is `#pragma acc update self(...)` before it.
 *   Nothing at the three unrelated lines. VARIANT fixed: no finding. On the
 *   host fallback the check says it does not apply (no device copies).
 *
 * Output: "probe: <a[N/2] after the loop>", "history: <sum of the history>",
 * "record: <steps> <last>", "time: ...", "checksum: <sum of a>", then
 * "reference: match" when the probe, the history, the record and a equal a
 * plain CPU computation (relative 1e-9), else "reference: MISMATCH" and exit
 * status 1. Bad args: exit 2.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

/* "bad" (the default) is 0, "fixed" is 1. */
static int arg_variant(int argc, char **argv, int i)
{
    if (argc <= i || strcmp(argv[i], "bad") == 0)
        return 0;
    if (strcmp(argv[i], "fixed") == 0)
        return 1;
    fprintf(stderr, "%s: argument %d must be bad or fixed, got '%s'\n", argv[0], i, argv[i]);
    exit(2);
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Host-only data after the array. */
struct record {
    long steps;
    double last;
    double spare[62];
};

enum { HEAD = 64 };

/* One step of the kernel, also the CPU reference's. */
#define VALUE(k, s, old) (0.5 * (old) + 1.0 / (double)(1 + (k) % 7) + 1e-3 * (double)(s))

int main(int argc, char **argv)
{
    if (argc > 4) {
        fprintf(stderr, "usage: %s [N [STEPS [bad|fixed]]]\n", argv[0]);
        return 2;
    }
    long n = arg_long(argc, argv, 1, 8000, 4096);
    long steps = arg_long(argc, argv, 2, 100, 1);
    int fixed = arg_variant(argc, argv, 3);
    long page = sysconf(_SC_PAGESIZE);
    size_t bytes = (HEAD + n) * sizeof(double) + sizeof(struct record);
    void *block = NULL;
    if (page <= 0 || posix_memalign(&block, (size_t)page, bytes) != 0) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    memset(block, 0, bytes);
    double *hist = block, *a = hist + HEAD;
    struct record *rec = (struct record *)(a + n);
    for (long k = 0; k < n; k++)
        a[k] = (double)(k % 13);

    double t0 = seconds();
    double probe = 0.0;
#pragma acc data copy(a[0:n])
    {
        for (long s = 1; s <= steps; s++) {
#pragma acc parallel loop present(a[0:n])
            for (long k = 0; k < n; k++)
                a[k] = VALUE(k, s, a[k]);
            hist[s % HEAD] = hist[(s - 1) % HEAD] + 0.5 * s; // unrelated
            rec->steps += 1; // unrelated
            rec->last = hist[s % HEAD]; // unrelated
        }
        if (fixed) {
#pragma acc update self(a[0:n])
        }
        probe = a[n / 2]; // the stale read
    }
    double elapsed = seconds() - t0;
    double logsum = 0.0, sum = 0.0;
    for (long k = 0; k < HEAD; k++)
        logsum += hist[k];
    for (long k = 0; k < n; k++)
        sum += a[k];
    printf("probe: %.12g\n", probe);
    printf("history: %.12g\n", logsum);
    printf("record: %ld %.12g\n", rec->steps, rec->last);
    printf("time: %.3f s\n", elapsed);
    printf("checksum: %.12e\n", sum);
    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    if (skip && *skip == '1')
        return 0;
    double *r = malloc(n * sizeof *r), rlog[HEAD] = { 0.0 };
    if (!r) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    for (long k = 0; k < n; k++)
        r[k] = (double)(k % 13);
    double rlast = 0.0, rlogsum = 0.0;
    for (long s = 1; s <= steps; s++) {
        for (long k = 0; k < n; k++)
            r[k] = VALUE(k, s, r[k]);
        rlog[s % HEAD] = rlog[(s - 1) % HEAD] + 0.5 * s;
        rlast = rlog[s % HEAD];
    }
    for (long k = 0; k < HEAD; k++)
        rlogsum += rlog[k];
    int match = rec->steps == steps && rec->last == rlast && logsum == rlogsum;
    if (!(fabs(probe - r[n / 2]) <= 1e-9 * fmax(1.0, fabs(r[n / 2]))))
        match = 0;
    for (long k = 0; k < n; k++)
        if (!(fabs(a[k] - r[k]) <= 1e-9 * fmax(1.0, fabs(r[k]))))
            match = 0;
    printf("reference: %s\n", match ? "match" : "MISMATCH");
    free(r);
    free(block);
    return match ? 0 : 1;
}
