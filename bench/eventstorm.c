/* eventstorm: a synthetic OpenACC runtime that fires, per "construct", the
 * 16 acc_prof events GCC's libgomp sends for a tiny compute construct on a
 * GPU (compute start/end, enter/exit data start/end, create/alloc/delete/free,
 * upload start/end of the argument block, launch start/end), with GCC's
 * empty source fields. It measures the collector's cost per event on any
 * machine, GPU or not:
 *   ./eventstorm 200000                        # bare
 *   LD_PRELOAD=.../libaccprof.so ./eventstorm 200000
 * and prints ns per event.
 *
 * The "runtime" half is built as a shared library named like an OpenACC
 * runtime (libaccstorm.so), so the call chain app -> runtime -> collector
 * has the shape it has with libgomp:
 *   cc -O2 -shared -fPIC -DSTORM_RUNTIME bench/eventstorm.c -o libaccstorm.so
 *   cc -O2 bench/eventstorm.c -o eventstorm -L. -laccstorm -Wl,-rpath,'$ORIGIN' */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <acc_prof.h>

void storm_construct(char *buf);

#ifdef STORM_RUNTIME
static acc_prof_callback cbs[acc_ev_last];

void acc_prof_register(acc_event_t ev, acc_prof_callback cb, acc_register_t info) {
  (void)info;
  if (ev > acc_ev_none && ev < acc_ev_last) cbs[ev] = cb;
}

static acc_prof_info pi = {
    .valid_bytes = _ACC_PROF_INFO_VALID_BYTES,
    .version = 201711,
    .device_type = acc_device_nvidia,
    .async = -2,
    .line_no = -1,
    .end_line_no = -1,
    .func_line_no = -1,
    .func_end_line_no = -1,
};
static acc_api_info ai;

static void fire(acc_event_t ev, acc_event_info *ei) {
  pi.event_type = ev;
  ei->event_type = ev;
  if (cbs[ev]) cbs[ev](&pi, ei, &ai);
}

#endif

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

#ifdef STORM_RUNTIME
void storm_construct(char *buf) {
  acc_event_info o, d, l;
  memset(&o, 0, sizeof o);
  o.other_event.valid_bytes = _ACC_OTHER_EVENT_INFO_VALID_BYTES;
  o.other_event.parent_construct = acc_construct_parallel;
  memset(&d, 0, sizeof d);
  d.data_event.valid_bytes = _ACC_DATA_EVENT_INFO_VALID_BYTES;
  d.data_event.parent_construct = acc_construct_parallel;
  d.data_event.implicit = 1;
  d.data_event.bytes = 24;
  d.data_event.host_ptr = buf;
  d.data_event.device_ptr = (void *)0x7f0000400000;
  memset(&l, 0, sizeof l);
  l.launch_event.valid_bytes = _ACC_LAUNCH_EVENT_INFO_VALID_BYTES;
  l.launch_event.parent_construct = acc_construct_parallel;
  l.launch_event.kernel_name = "main$_omp_fn$0";
  l.launch_event.num_gangs = 8448;
  l.launch_event.num_workers = 1;
  l.launch_event.vector_length = 32;
  fire(acc_ev_compute_construct_start, &o);
  fire(acc_ev_enter_data_start, &o);
  fire(acc_ev_alloc, &d);
  fire(acc_ev_create, &d);
  fire(acc_ev_enqueue_upload_start, &d);
  fire(acc_ev_enqueue_upload_end, &d);
  fire(acc_ev_enter_data_end, &o);
  fire(acc_ev_enqueue_launch_start, &l);
  fire(acc_ev_enqueue_launch_end, &l);
  fire(acc_ev_exit_data_start, &o);
  fire(acc_ev_delete, &d);
  fire(acc_ev_free, &d);
  fire(acc_ev_exit_data_end, &o);
  fire(acc_ev_compute_construct_end, &o);
  fire(acc_ev_alloc, &d);
  fire(acc_ev_free, &d);
}
#else
int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 200000;
  static char buf[64];
  double t0 = now();
  for (long i = 0; i < n; i++) storm_construct(buf);
  double t = now() - t0;
  printf("%ld constructs, %ld events: %.1f ns per event\n", n, 16 * n, 1e9 * t / (16.0 * n));
  return 0;
}
#endif
