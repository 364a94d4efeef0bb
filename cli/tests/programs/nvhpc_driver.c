/* Plays an OpenACC runtime that fills acc_prof fields the way NVHPC does
 * (source file, function, lines, variable names, kernel names), and calls
 * the registration routes a runtime may use. Run with the collector in
 * LD_PRELOAD; link with -rdynamic so the collector finds acc_prof_register. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <acc_prof.h>

static acc_prof_callback callbacks[acc_ev_last];
static int registrations;

void acc_prof_register(acc_event_t ev, acc_prof_callback cb, acc_register_t info) {
  (void)info;
  if (ev > acc_ev_none && ev < acc_ev_last) {
    if (!callbacks[ev]) registrations++;
    callbacks[ev] = cb;
  }
}

static void fire(acc_event_t ev, int line, acc_event_info *ei) {
  acc_prof_info pi;
  memset(&pi, 0, sizeof pi);
  pi.event_type = ev;
  pi.valid_bytes = _ACC_PROF_INFO_VALID_BYTES;
  pi.version = 201711;
  pi.device_type = acc_device_nvidia;
  pi.device_number = 0;
  pi.async = -2; /* acc_async_sync */
  pi.src_file = "/src/solver.c";
  pi.func_name = "solve";
  pi.line_no = line;
  pi.end_line_no = line + 5;
  pi.func_line_no = 10;
  pi.func_end_line_no = 90;
  acc_api_info ai;
  memset(&ai, 0, sizeof ai);
  if (callbacks[ev]) callbacks[ev](&pi, ei, &ai);
}

int main(void) {
  /* The ACC_PROFLIB route as NVHPC takes it: must not register twice. */
  void (*reglib)(acc_prof_reg, acc_prof_reg, acc_prof_lookup_func) =
      (void (*)(acc_prof_reg, acc_prof_reg, acc_prof_lookup_func))dlsym(RTLD_DEFAULT, "acc_register_library");
  if (reglib) reglib(acc_prof_register, acc_prof_register, NULL);
  printf("registered events: %d\n", registrations);

  acc_event_info ei;
  static double a[1000];
  for (int it = 0; it < 3; it++) {
    memset(&ei, 0, sizeof ei);
    ei.other_event.event_type = acc_ev_compute_construct_start;
    ei.other_event.valid_bytes = _ACC_OTHER_EVENT_INFO_VALID_BYTES;
    ei.other_event.parent_construct = acc_construct_parallel;
    fire(acc_ev_compute_construct_start, 42, &ei);

    memset(&ei, 0, sizeof ei);
    ei.data_event.event_type = acc_ev_enqueue_upload_start;
    ei.data_event.valid_bytes = _ACC_DATA_EVENT_INFO_VALID_BYTES;
    ei.data_event.parent_construct = acc_construct_parallel;
    ei.data_event.implicit = 1;
    ei.data_event.var_name = "a[0:1000]";
    ei.data_event.bytes = sizeof a;
    ei.data_event.host_ptr = a;
    ei.data_event.device_ptr = (void *)0x7f0000001000;
    fire(acc_ev_enqueue_upload_start, 42, &ei);
    ei.data_event.event_type = acc_ev_enqueue_upload_end;
    fire(acc_ev_enqueue_upload_end, 42, &ei);

    memset(&ei, 0, sizeof ei);
    ei.launch_event.event_type = acc_ev_enqueue_launch_start;
    ei.launch_event.valid_bytes = _ACC_LAUNCH_EVENT_INFO_VALID_BYTES;
    ei.launch_event.parent_construct = acc_construct_parallel;
    ei.launch_event.kernel_name = "solve_42_gpu";
    ei.launch_event.num_gangs = 7813;
    ei.launch_event.num_workers = 1;
    ei.launch_event.vector_length = 128;
    fire(acc_ev_enqueue_launch_start, 43, &ei);
    ei.launch_event.event_type = acc_ev_enqueue_launch_end;
    fire(acc_ev_enqueue_launch_end, 43, &ei);

    /* A truncated struct: valid_bytes stops before var_name. */
    memset(&ei, 0, sizeof ei);
    ei.data_event.event_type = acc_ev_enqueue_download_start;
    ei.data_event.valid_bytes = 16;
    ei.data_event.var_name = "must-not-be-read";
    fire(acc_ev_enqueue_download_start, 47, &ei);
    ei.data_event.event_type = acc_ev_enqueue_download_end;
    fire(acc_ev_enqueue_download_end, 47, &ei);

    memset(&ei, 0, sizeof ei);
    ei.other_event.event_type = acc_ev_compute_construct_end;
    ei.other_event.valid_bytes = _ACC_OTHER_EVENT_INFO_VALID_BYTES;
    ei.other_event.parent_construct = 99; /* out of range: must be ignored */
    fire(acc_ev_compute_construct_end, 42, &ei);
  }
  /* An event number no specification has. */
  acc_prof_info bad;
  memset(&bad, 0, sizeof bad);
  bad.event_type = (acc_event_t)77;
  bad.valid_bytes = 8;
  if (callbacks[acc_ev_compute_construct_start]) callbacks[acc_ev_compute_construct_start](&bad, NULL, NULL);
  puts("driver done");
  return 0;
}
