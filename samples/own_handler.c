/*
 * own_handler.c - a program with SIGSEGV handlers of its own, which it uses,
 * around a correct data region (no coherence defect: a profiler's check
 * must neither change its output nor report anything).
 *
 * The program maps a guard page with PROT_NONE. Early, before the first
 * OpenACC construct, it installs a handler that makes the page writable and
 * returns (the faulting write is retried and goes through),
 * line 170: `install(open_guard); // early`
 * and writes to the page:
 * line 171: `guard[0] = 42; // the early fault`
 * Late, inside the data region after the first kernels ran (a tool's own
 * handler, if any, is installed by then and the grid's device copy is
 * newer), it installs a second handler, which leaves the fault with
 * siglongjmp,
 * line 192: `install(probe_fault); // late`
 * closes the page again and probes it twice, once closed and once opened
 * for reading:
 * line 194: `late_closed = readable(guard); // the late fault`
 * line 196: `late_open = readable(guard);`
 * Around that, a heat loop with correct updates: the grid stays on the
 * device from
 * line 179: `#pragma acc data copy(u[0:n]) copyin(unew[0:n])`
 * and every EVERY steps
 * line 199: `#pragma acc update self(u[0:n])`
 * brings it back before the host's norm reads it at
 * line 201: `for (long k = 0; k < n; k++) sum += u[k] * u[k];`
 *
 * Usage: own_handler [NX [NY [STEPS [EVERY]]]]   defaults: 1024 1024 100 10
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, E = EVERY, B = 8*NX*NY):
 *   the data region: one upload of u and unew, one download of u (B each);
 *   line 182: `#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n])`
 *   the stencil, S launches;
 *   line 188: `#pragma acc parallel loop present(u[0:n], unew[0:n])`
 *   the copy back into u, S launches; floor(S/E) downloads of B at the
 *   update self. Two SIGSEGVs, both the program's own and handled by it.
 *   With `accprof run --check coherence` on a GPU: the same output as bare,
 *   and no C1, C2 or C3. On the host fallback the check says it does not
 *   apply (no device copies), and the output is the same as bare too.
 *
 * Output: "early: guard[0] = 42 after 1 fault(s) in the program's handler",
 * "step <s> norm <n>" every EVERY steps, "late: guard page readable: no,
 * then yes (1 fault(s) in the program's handler)", "time: ...",
 * "checksum: <sum of u>", then "reference: match" when both handlers ran
 * once, the probes said what they should and every norm and the final grid
 * equal a plain CPU computation (relative 1e-9), else "reference: MISMATCH"
 * and exit status 1. Bad args: exit 2.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void init(double *u, long nx, long ny)
{
    for (long j = 0; j < ny; j++)
        for (long i = 0; i < nx; i++)
            u[j * nx + i] = (i == 0 || j == 0) ? 1.0 : 0.0;
}

static char *guard;
static long page_size;
static volatile sig_atomic_t early_faults, late_faults, probing;
static sigjmp_buf probe_env;

static int on_guard(const siginfo_t *si)
{
    const char *p = si->si_addr;
    return p >= guard && p < guard + page_size;
}

/* The early handler: opens the guard page and returns; the write is retried. */
static void open_guard(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    if (on_guard(si) && mprotect(guard, page_size, PROT_READ | PROT_WRITE) == 0) {
        early_faults++;
        return;
    }
    signal(sig, SIG_DFL); /* not ours: the access faults again and kills */
}

/* The late handler: a probe of the page jumps back out of the fault. */
static void probe_fault(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    if (probing && on_guard(si)) {
        late_faults++;
        siglongjmp(probe_env, 1);
    }
    signal(sig, SIG_DFL);
}

static void install(void (*handler)(int, siginfo_t *, void *))
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, NULL) != 0) {
        perror("sigaction");
        exit(2);
    }
}

/* Whether one byte at p can be read, found out by touching it. */
static int readable(const volatile char *p)
{
    if (sigsetjmp(probe_env, 1)) {
        probing = 0;
        return 0;
    }
    probing = 1;
    char c = *p;
    probing = 0;
    (void)c;
    return 1;
}

int main(int argc, char **argv)
{
    if (argc > 5) {
        fprintf(stderr, "usage: %s [NX [NY [STEPS [EVERY]]]]\n", argv[0]);
        return 2;
    }
    long nx = arg_long(argc, argv, 1, 1024, 3);
    long ny = arg_long(argc, argv, 2, 1024, 3);
    long steps = arg_long(argc, argv, 3, 100, 1);
    long every = arg_long(argc, argv, 4, 10, 1);
    long n = nx * ny, reports = steps / every;
    page_size = sysconf(_SC_PAGESIZE);
    guard = mmap(NULL, (size_t)page_size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    double *u = malloc(n * sizeof *u), *unew = malloc(n * sizeof *unew);
    double *norms = calloc(reports + 1, sizeof *norms);
    if (page_size <= 0 || guard == MAP_FAILED || !u || !unew || !norms) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }

    install(open_guard); // early
    guard[0] = 42; // the early fault
    printf("early: guard[0] = %d after %d fault(s) in the program's handler\n", guard[0],
           (int)early_faults);

    init(u, nx, ny);
    init(unew, nx, ny);
    int late_closed = -1, late_open = -1;
    double t0 = seconds();
#pragma acc data copy(u[0:n]) copyin(unew[0:n])
    {
        for (long s = 1; s <= steps; s++) {
#pragma acc parallel loop collapse(2) present(u[0:n], unew[0:n])
            for (long j = 1; j < ny - 1; j++)
                for (long i = 1; i < nx - 1; i++)
                    unew[j * nx + i] = u[j * nx + i] + 0.2 * (u[j * nx + i - 1] + u[j * nx + i + 1] +
                                                             u[(j - 1) * nx + i] + u[(j + 1) * nx + i] -
                                                             4.0 * u[j * nx + i]);
#pragma acc parallel loop present(u[0:n], unew[0:n])
            for (long k = 0; k < n; k++)
                u[k] = unew[k];
            if (s == 1) {
                install(probe_fault); // late
                if (mprotect(guard, page_size, PROT_NONE) == 0)
                    late_closed = readable(guard); // the late fault
                if (mprotect(guard, page_size, PROT_READ) == 0)
                    late_open = readable(guard);
            }
            if (s % every == 0) {
#pragma acc update self(u[0:n])
                double sum = 0.0;
                for (long k = 0; k < n; k++) sum += u[k] * u[k];
                norms[s / every - 1] = sqrt(sum);
                printf("step %ld norm %.12g\n", s, norms[s / every - 1]);
            }
        }
    }
    double elapsed = seconds() - t0;
    printf("late: guard page readable: %s, then %s (%d fault(s) in the program's handler)\n",
           late_closed ? "yes" : "no", late_open ? "yes" : "no", (int)late_faults);
    double total = 0.0;
    for (long k = 0; k < n; k++)
        total += u[k];
    printf("time: %.3f s\n", elapsed);
    printf("checksum: %.12e\n", total);
    int match = early_faults == 1 && guard[0] == 42 && late_faults == 1 && late_closed == 0 &&
                late_open == 1;
    const char *skip = getenv("SAMPLE_SKIP_REFERENCE");
    if (skip && *skip == '1')
        return match ? 0 : 1;
    double *r = malloc(n * sizeof *r), *rnew = malloc(n * sizeof *rnew);
    if (!r || !rnew) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    init(r, nx, ny);
    init(rnew, nx, ny);
    for (long s = 1; s <= steps; s++) {
        for (long j = 1; j < ny - 1; j++)
            for (long i = 1; i < nx - 1; i++)
                rnew[j * nx + i] = r[j * nx + i] + 0.2 * (r[j * nx + i - 1] + r[j * nx + i + 1] +
                                                         r[(j - 1) * nx + i] + r[(j + 1) * nx + i] -
                                                         4.0 * r[j * nx + i]);
        for (long k = 0; k < n; k++)
            r[k] = rnew[k];
        if (s % every == 0) {
            double rs = 0.0;
            for (long k = 0; k < n; k++)
                rs += r[k] * r[k];
            double want = sqrt(rs), got = norms[s / every - 1];
            if (!(fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want))))
                match = 0;
        }
    }
    for (long k = 0; k < n; k++)
        if (!(fabs(u[k] - r[k]) <= 1e-9 * fmax(1.0, fabs(r[k]))))
            match = 0;
    printf("reference: %s\n", match ? "match" : "MISMATCH");
    free(r);
    free(rnew);
    free(u);
    free(unew);
    free(norms);
    munmap(guard, (size_t)page_size);
    return match ? 0 : 1;
}
