/*
 * coherence_vector_enter.cpp - two std::vector<double> whose data() is
 * mapped with `enter data create` and filled with `update device`; the
 * host sums the vector with std::accumulate after the loop without `update
 * self` (VARIANT bad: a coherence bug; the read happens inside the
 * library's inlined template).
 *
 * The vectors' data are mapped at line 78: `#pragma acc enter data create(pu[0:n], pn[0:n])`
 * (pu = u.data()), filled at line 79: `#pragma acc update device(pu[0:n], pn[0:n])`.
 * Each step runs two compute constructs (lines 81 and 84). After the
 * loop VARIANT fixed brings u back at line 89: `#pragma acc update self(pu[0:n])`,
 * and the host reads it at line 91: `double sum = std::accumulate(u.begin(), u.end(), 0.0);`
 * The copies go at line 92: `#pragma acc exit data delete(pu[0:n], pn[0:n])`.
 * On a GPU the bad variant prints the initial field's sum and differs
 * from the reference; on the host fallback both variants are right.
 *
 * Usage: coherence_vector_enter [N [STEPS [VARIANT]]]
 *        defaults: 1048576 100 bad; VARIANT is bad or fixed
 *
 * Expected profile (GCC 12 / libgomp; S = STEPS, B = 8*N bytes): 2 blocks
 * of B made by the enter data (no copy), 2 uploads of B (line 79), 2*S
 * launches, VARIANT fixed: 1 download of B (line 89). With `accprof run
 * --check coherence` on a GPU, VARIANT bad: a stale host read of pu at
 * line 91 (the construct at line 84 wrote it), one C1 proposing
 * `update self` before it; VARIANT fixed: none.
 *
 * Output: "checksum: <v>", the sum of the host's u after the loop, then "reference:
 * match" when it equals a plain CPU computation (relative 1e-9), else
 * "reference: MISMATCH" and exit status 1. Bad args: exit 2.
 */
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
        std::fprintf(stderr, "%s: argument %d must be an integer >= %ld, got '%s'\n", argv[0], i,
                     min, argv[i]);
        std::exit(2);
    }
    return v;
}

static void init(std::vector<double> &a)
{
    for (std::size_t k = 0; k < a.size(); k++)
        a[k] = (k % 97 == 0) ? 1.0 : 0.0;
}

int main(int argc, char **argv)
{
    if (argc > 4) {
        std::fprintf(stderr, "usage: %s [N [STEPS [VARIANT]]]\n", argv[0]);
        return 2;
    }
    const long n = arg_long(argc, argv, 1, 1048576, 3);
    const long steps = arg_long(argc, argv, 2, 100, 1);
    const char *variant = argc > 3 ? argv[3] : "bad";
    if (std::strcmp(variant, "bad") != 0 && std::strcmp(variant, "fixed") != 0) {
        std::fprintf(stderr, "%s: VARIANT must be bad or fixed, got '%s'\n", argv[0], variant);
        return 2;
    }
    const bool fixed = std::strcmp(variant, "fixed") == 0;
    std::vector<double> u(n), un(n);
    init(u);
    init(un);
    double *pu = u.data(), *pn = un.data();
#pragma acc enter data create(pu[0:n], pn[0:n])
#pragma acc update device(pu[0:n], pn[0:n])
    for (long s = 0; s < steps; s++) {
#pragma acc parallel loop present(pu[0:n], pn[0:n])
        for (long k = 1; k < n - 1; k++)
            pn[k] = pu[k] + 0.25 * (pu[k - 1] - 2.0 * pu[k] + pu[k + 1]);
#pragma acc parallel loop present(pu[0:n], pn[0:n])
        for (long k = 1; k < n - 1; k++)
            pu[k] = pn[k];
    }
    if (fixed) {
#pragma acc update self(pu[0:n])
    }
    double sum = std::accumulate(u.begin(), u.end(), 0.0); // BAD without the update
#pragma acc exit data delete(pu[0:n], pn[0:n])
    std::printf("checksum: %.12g\n", sum);
    const char *skip = std::getenv("SAMPLE_SKIP_REFERENCE");
    if (skip && *skip == '1')
        return 0;
    std::vector<double> r(n), rn(n);
    init(r);
    init(rn);
    for (long s = 0; s < steps; s++) {
        for (long k = 1; k < n - 1; k++)
            rn[k] = r[k] + 0.25 * (r[k - 1] - 2.0 * r[k] + r[k + 1]);
        for (long k = 1; k < n - 1; k++)
            r[k] = rn[k];
    }
    const double want = std::accumulate(r.begin(), r.end(), 0.0);
    const bool match = std::fabs(sum - want) <= 1e-9 * std::fmax(1.0, std::fabs(want));
    std::printf("reference: %s\n", match ? "match" : "MISMATCH");
    return match ? 0 : 1;
}
