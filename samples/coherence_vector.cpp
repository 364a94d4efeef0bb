/*
 * coherence_vector.cpp - coherence_norm.c in C++: the grid is a
 * std::vector<double>, mapped through its data() pointer, and the host
 * computes the norm with std::inner_product over the vector without
 * `update self` (VARIANT bad: a coherence bug).
 *
 * The grids live on the device for the whole time loop, from
 * line 91: `#pragma acc data copy(pu[0:n], pn[0:n])` (pu = u.data()).
 * Every EVERY steps the host reads u through the vector's iterators at
 * line 107: `double sum = std::inner_product(u.begin(), u.end(), u.begin(), 0.0);`
 * The host copy is the one from before the loop, the device copy is newer.
 * With VARIANT fixed, line 105: `#pragma acc update self(pu[0:n])` brings
 * it back first. On a GPU the bad variant's norms stay at the first value
 * and differ from the reference; on the host fallback (no device copies)
 * both variants are right.
 *
 * Usage: coherence_vector [NX [NY [STEPS [EVERY [VARIANT]]]]]
 *        defaults: 1024 1024 100 10 bad; VARIANT is bad or fixed
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*NX*NY bytes):
 *   the data region: one upload and one download of B bytes per grid;
 *   line 94: the stencil, S launches; line 100: the copy back into u, S
 *   launches; with VARIANT fixed floor(S/EVERY) downloads of B at line 105.
 *   With `accprof run --check coherence` on a GPU, VARIANT bad: stale host
 *   reads of u at line 107 (the construct at line 100 wrote it), one C1
 *   proposing `update self` before line 107; VARIANT fixed: none.
 *
 * Output: "step <s> norm <n>" every EVERY steps, "norm: <n>" of the host's
 * u after the region, then "reference: match" when every printed norm
 * equals a plain CPU computation (relative 1e-9), else "reference:
 * MISMATCH" and exit status 1. Bad args: exit 2.
 */
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <numeric>
#include <vector>

static long arg_long(int argc, char **argv, int i, long def, long min)
{
    if (argc <= i)
        return def;
    char *end;
    errno = 0;
    long v = std::strtol(argv[i], &end, 10);
    if (errno || *end || end == argv[i] || v < min) {
        std::fprintf(stderr, "%s: argument %d must be an integer >= %ld, got '%s'\n",
                     argv[0], i, min, argv[i]);
        std::exit(2);
    }
    return v;
}

static void init(std::vector<double> &u, long nx, long ny)
{
    for (long j = 0; j < ny; j++)
        for (long i = 0; i < nx; i++)
            u[j * nx + i] = (i == 0 || j == 0) ? 1.0 : 0.0;
}

int main(int argc, char **argv)
{
    if (argc > 6) {
        std::fprintf(stderr, "usage: %s [NX [NY [STEPS [EVERY [VARIANT]]]]]\n", argv[0]);
        return 2;
    }
    long nx = arg_long(argc, argv, 1, 1024, 3);
    long ny = arg_long(argc, argv, 2, 1024, 3);
    long steps = arg_long(argc, argv, 3, 100, 1);
    long every = arg_long(argc, argv, 4, 10, 1);
    const char *variant = argc > 5 ? argv[5] : "bad";
    if (std::strcmp(variant, "bad") != 0 && std::strcmp(variant, "fixed") != 0) {
        std::fprintf(stderr, "%s: VARIANT must be bad or fixed, got '%s'\n", argv[0], variant);
        return 2;
    }
    const bool fixed = std::strcmp(variant, "fixed") == 0;
    const long n = nx * ny;
    std::vector<double> u(n), unew(n), norms(steps / every + 1);
    init(u, nx, ny);
    init(unew, nx, ny);
    double *pu = u.data(), *pn = unew.data();
    double t0 = 0;
    {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        t0 = ts.tv_sec + 1e-9 * ts.tv_nsec;
    }
#pragma acc data copy(pu[0:n], pn[0:n])
    {
        for (long s = 1; s <= steps; s++) {
#pragma acc parallel loop collapse(2) present(pu[0:n], pn[0:n])
            for (long j = 1; j < ny - 1; j++)
                for (long i = 1; i < nx - 1; i++)
                    pn[j * nx + i] = pu[j * nx + i] + 0.2 * (pu[j * nx + i - 1] + pu[j * nx + i + 1] +
                                                           pu[(j - 1) * nx + i] + pu[(j + 1) * nx + i] -
                                                           4.0 * pu[j * nx + i]);
#pragma acc parallel loop present(pu[0:n], pn[0:n])
            for (long k = 0; k < n; k++)
                pu[k] = pn[k];
            if (s % every == 0) {
                if (fixed) {
#pragma acc update self(pu[0:n])
                }
                double sum = std::inner_product(u.begin(), u.end(), u.begin(), 0.0);
                norms[s / every - 1] = std::sqrt(sum);
                std::printf("step %ld norm %.12g\n", s, norms[s / every - 1]);
            }
        }
    }
    {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        std::printf("time: %.3f s\n", ts.tv_sec + 1e-9 * ts.tv_nsec - t0);
    }
    std::printf("norm: %.12g\n", std::sqrt(std::inner_product(u.begin(), u.end(), u.begin(), 0.0)));
    std::vector<double> r(n), rnew(n);
    init(r, nx, ny);
    init(rnew, nx, ny);
    bool match = true;
    for (long s = 1; s <= steps; s++) {
        for (long j = 1; j < ny - 1; j++)
            for (long i = 1; i < nx - 1; i++)
                rnew[j * nx + i] = r[j * nx + i] + 0.2 * (r[j * nx + i - 1] + r[j * nx + i + 1] +
                                                         r[(j - 1) * nx + i] + r[(j + 1) * nx + i] -
                                                         4.0 * r[j * nx + i]);
        r = rnew;
        if (s % every == 0) {
            double want = std::sqrt(std::inner_product(r.begin(), r.end(), r.begin(), 0.0));
            double got = norms[s / every - 1];
            if (std::fabs(got - want) > 1e-9 * std::fmax(1.0, std::fabs(want)))
                match = false;
        }
    }
    std::printf("checksum: %.12g\n", std::accumulate(u.begin(), u.end(), 0.0));
    std::printf("reference: %s\n", match ? "match" : "MISMATCH");
    return match ? 0 : 1;
}
