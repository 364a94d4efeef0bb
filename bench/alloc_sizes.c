/* alloc_sizes: what the CUDA driver's allocation and free calls cost by
 * size, bare (no OpenACC runtime, no profiler unless one is preloaded),
 * and the shape of one compute construct's calls under GCC's libgomp: the
 * construct's block (its data and the kernel's argument pointers), the
 * plugin's 32-byte argument array, the uploads, a synchronize, the frees.
 * The analyzer prices what a data region saves from the run's own calls;
 * this says whether a smaller block is a cheaper one.
 *
 * Usage: alloc_sizes [N]   (N pairs per size, default 2000; medians in us)
 * Needs only libcuda.so.1 at run time (dlopen): builds with plain gcc.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

static CUresult (*cu_init)(unsigned);
static CUresult (*cu_device_get)(CUdevice *, int);
static CUresult (*cu_retain)(CUcontext *, CUdevice);
static CUresult (*cu_set)(CUcontext);
static CUresult (*cu_alloc)(CUdeviceptr *, size_t);
static CUresult (*cu_free)(CUdeviceptr);
static CUresult (*cu_upload)(CUdeviceptr, const void *, size_t);
static CUresult (*cu_sync)(void);

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec * 1e-3;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

static int need(void *f, const char *name)
{
    if (!f)
        fprintf(stderr, "alloc_sizes: libcuda has no %s\n", name);
    return f != NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    if (n < 1) {
        fprintf(stderr, "alloc_sizes: N must be a positive number, not '%s'\n", argv[1]);
        return 2;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    if (!lib) {
        fprintf(stderr, "alloc_sizes: cannot load libcuda.so.1 (no NVIDIA driver here)\n");
        return 2;
    }
    *(void **)&cu_init = dlsym(lib, "cuInit");
    *(void **)&cu_device_get = dlsym(lib, "cuDeviceGet");
    *(void **)&cu_retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
    *(void **)&cu_set = dlsym(lib, "cuCtxSetCurrent");
    *(void **)&cu_alloc = dlsym(lib, "cuMemAlloc_v2");
    *(void **)&cu_free = dlsym(lib, "cuMemFree_v2");
    *(void **)&cu_upload = dlsym(lib, "cuMemcpyHtoD_v2");
    *(void **)&cu_sync = dlsym(lib, "cuCtxSynchronize");
    if (!(need(cu_init, "cuInit") && need(cu_device_get, "cuDeviceGet") &&
          need(cu_retain, "cuDevicePrimaryCtxRetain") && need(cu_set, "cuCtxSetCurrent") &&
          need(cu_alloc, "cuMemAlloc_v2") && need(cu_free, "cuMemFree_v2") &&
          need(cu_upload, "cuMemcpyHtoD_v2") && need(cu_sync, "cuCtxSynchronize")))
        return 2;
    CUdevice dev;
    CUcontext ctx;
    if (cu_init(0) || cu_device_get(&dev, 0) || cu_retain(&ctx, dev) || cu_set(ctx)) {
        fprintf(stderr, "alloc_sizes: no CUDA device\n");
        return 2;
    }
    static const size_t sizes[] = {23, 32, 4096, 65536, 262144, 524311, 1048576, 2097152, 8388615};
    const size_t max = 8388615;
    double *a = malloc((size_t)n * sizeof *a), *f = malloc((size_t)n * sizeof *f);
    char *host = malloc(max);
    if (!a || !f || !host) {
        fprintf(stderr, "alloc_sizes: out of memory\n");
        return 2;
    }
    memset(host, 1, max);
    printf("%-34s %10s %10s\n", "allocation and free (bare calls)", "alloc us", "free us");
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
        for (int i = 0; i < n; i++) {
            CUdeviceptr p;
            double t0 = now_us();
            cu_alloc(&p, sizes[s]);
            double t1 = now_us();
            cu_free(p);
            a[i] = t1 - t0;
            f[i] = now_us() - t1;
        }
        printf("  %-32zu %10.1f %10.1f\n", sizes[s], median(a, n), median(f, n));
    }
    /* One construct's calls: block of S bytes (S - 23 of data), the
     * 32-byte argument array, the data's upload, the arguments', a
     * synchronize, the two frees. */
    static const size_t blocks[] = {23, 524311, 8388615};
    printf("%-34s %10s\n", "one construct's calls, block of", "us");
    for (size_t s = 0; s < sizeof blocks / sizeof *blocks; s++) {
        for (int i = 0; i < n; i++) {
            CUdeviceptr b, args;
            double t0 = now_us();
            cu_alloc(&b, blocks[s]);
            cu_alloc(&args, 32);
            if (blocks[s] > 23)
                cu_upload(b, host, blocks[s] - 23);
            cu_upload(args, host, 32);
            cu_sync();
            cu_free(args);
            cu_free(b);
            a[i] = now_us() - t0;
        }
        printf("  %-32zu %10.1f\n", blocks[s], median(a, n));
    }
    CUdeviceptr kept;
    cu_alloc(&kept, 524288);
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        cu_upload(kept, host, 524288);
        a[i] = now_us() - t0;
    }
    cu_free(kept);
    printf("%-34s %10.1f\n", "upload of 512 KiB (pageable) into a kept block", median(a, n));
    return 0;
}
