/* driver_cost: what timing the CUDA driver calls an OpenACC runtime makes
 * costs, and what those calls are, per compute construct.
 *
 * Preloaded into an OpenACC program (LD_PRELOAD), it counts the runtime's
 * compute constructs through acc_prof and, by DRIVER_COST:
 *   none        nothing more (the cost of being loaded and counting)
 *   activity    CUPTI driver-API activity records (start and end of every
 *               driver call, delivered in buffers)
 *   callbacks   CUPTI driver-API callbacks on every call, timed at enter and
 *               exit with clock_gettime
 * and, with DRIVER_COST_ALSO (a comma-separated list of kernel, memcpy,
 * driver), the CUPTI activity kinds a profiler enables besides (concurrent
 * kernel, memcpy, driver-API records): how much each one slows the calls.
 * At exit it prints, on stderr (or to DRIVER_COST_OUT), each driver routine
 * called: calls, total and mean time, and calls and time per compute
 * construct. bench/driver_cost.sh times the modes against the bare program.
 *
 * Build on the GPU machine (CUPTI headers and library there):
 *   gcc -O2 -shared -fPIC bench/driver_cost.c -I/usr/local/cuda/include \
 *       -L/usr/local/cuda/targets/x86_64-linux/lib -lcupti -ldl -o libdriver_cost.so
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cupti.h>

typedef void (*acc_prof_callback)(void *, void *, void *);
typedef void (*acc_prof_reg)(int, acc_prof_callback, int);
enum { ACC_EV_COMPUTE_CONSTRUCT_START = 16 };

#define MAX_CBID 4096
static _Atomic uint64_t calls[MAX_CBID], ns[MAX_CBID];
static _Atomic uint64_t constructs;
static atomic_int registered;
static int mode; /* 0 none, 1 activity, 2 callbacks */

static inline uint64_t now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void add(uint32_t cbid, uint64_t d) {
  if (cbid >= MAX_CBID) return;
  atomic_fetch_add_explicit(&calls[cbid], 1, memory_order_relaxed);
  atomic_fetch_add_explicit(&ns[cbid], d, memory_order_relaxed);
}

static void on_compute(void *prof_info, void *event_info, void *api_info) {
  (void)prof_info; (void)event_info; (void)api_info;
  atomic_fetch_add_explicit(&constructs, 1, memory_order_relaxed);
}

static void register_all(acc_prof_reg reg) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&registered, &expected, 1)) return;
  reg(ACC_EV_COMPUTE_CONSTRUCT_START, on_compute, 0);
}

void acc_register_library(acc_prof_reg reg, acc_prof_reg unreg, void *lookup) {
  (void)unreg; (void)lookup;
  register_all(reg);
}

#define BUF (8u << 20)
static void CUPTIAPI buf_req(uint8_t **b, size_t *sz, size_t *max) {
  *b = aligned_alloc(8, BUF);
  *sz = BUF;
  *max = 0;
}

static void CUPTIAPI buf_done(CUcontext c, uint32_t s, uint8_t *b, size_t sz, size_t valid) {
  (void)c; (void)s; (void)sz;
  CUpti_Activity *r = NULL;
  while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
    if (mode == 1 && r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      const CUpti_ActivityAPI *a = (const CUpti_ActivityAPI *)r;
      add(a->cbid, a->end > a->start ? a->end - a->start : 0);
    }
  }
  free(b);
}

static __thread uint64_t enter_at[64];
static __thread int depth;

static void CUPTIAPI on_driver(void *ud, CUpti_CallbackDomain d, CUpti_CallbackId id,
                               const void *data) {
  (void)ud;
  if (d == CUPTI_CB_DOMAIN_RESOURCE) {
    if (id == CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING) cuptiActivityFlushAll(1);
    return;
  }
  if (mode != 2) return;
  const CUpti_CallbackData *cd = data;
  if (cd->callbackSite == CUPTI_API_ENTER) {
    if (depth < 64) enter_at[depth] = now();
    depth++;
  } else {
    depth--;
    if (depth >= 0 && depth < 64) add(id, now() - enter_at[depth]);
    if (depth < 0) depth = 0;
  }
}

__attribute__((constructor)) static void init(void) {
  const char *m = getenv("DRIVER_COST");
  mode = !m ? 0 : !strcmp(m, "activity") ? 1 : !strcmp(m, "callbacks") ? 2 : 0;
  CUpti_SubscriberHandle sub;
  if (mode != 0 && cuptiSubscribe(&sub, on_driver, NULL) == CUPTI_SUCCESS) {
    cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
                        CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING);
    if (mode == 1) {
      cuptiActivityRegisterCallbacks(buf_req, buf_done);
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
    } else {
      cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API);
    }
    const char *also = getenv("DRIVER_COST_ALSO");
    if (mode == 2 && also && *also) {
      cuptiActivityRegisterCallbacks(buf_req, buf_done);
      if (strstr(also, "kernel")) cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
      if (strstr(also, "memcpy")) cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
      if (strstr(also, "driver")) cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER);
    }
  }
  acc_prof_reg reg = (acc_prof_reg)dlsym(RTLD_DEFAULT, "acc_prof_register");
  if (reg) register_all(reg);
}

__attribute__((destructor)) static void fini(void) {
  if (mode == 1 || getenv("DRIVER_COST_ALSO")) cuptiActivityFlushAll(1);
  if (mode == 0) return;
  const char *path = getenv("DRIVER_COST_OUT");
  FILE *f = path ? fopen(path, "a") : stderr;
  if (!f) return;
  uint64_t n = atomic_load(&constructs);
  const char *also = getenv("DRIVER_COST_ALSO");
  fprintf(f, "driver_cost %s%s%s: %llu compute constructs\n", mode == 1 ? "activity" : "callbacks",
          also && *also ? " with activity " : "", also && *also ? also : "", (unsigned long long)n);
  fprintf(f, "%-40s %10s %12s %10s %12s %12s\n", "routine", "calls", "total(us)", "mean(ns)",
          "calls/cc", "ns/cc");
  for (uint32_t i = 0; i < MAX_CBID; i++) {
    uint64_t c = atomic_load(&calls[i]), t = atomic_load(&ns[i]);
    if (!c) continue;
    const char *name = NULL;
    if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, i, &name) != CUPTI_SUCCESS || !name)
      name = "?";
    fprintf(f, "%-40s %10llu %12.1f %10.0f %12.2f %12.0f\n", name, (unsigned long long)c,
            t / 1e3, (double)t / c, n ? (double)c / n : 0.0, n ? (double)t / n : 0.0);
  }
  if (f != stderr) fclose(f);
}
