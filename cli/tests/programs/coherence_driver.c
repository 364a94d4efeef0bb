/* Plays an OpenACC runtime with its own device memory (a second buffer on
 * the host stands in for the device copy) for the coherence check: an
 * array is mapped by an enter data, a compute construct "writes" its
 * device copy, and the host reads the host copy without an update. The
 * OpenACC API routines the check asks (acc_is_present, acc_deviceptr,
 * acc_memcpy_from_device) are this program's; the CUDA driver's routines
 * it copies the device bytes with come from the library FAKE_LIBCUDA names
 * (fake_libcuda.c, soname libcuda.so.1), loaded first. As libgomp does,
 * the program holds its profiling lock while it calls the callbacks, and
 * its own acc_memcpy_from_device dispatches events under that lock: called
 * from a callback, it would wait on itself (libgomp hangs there); here it
 * prints "deadlock" and exits 7. Run with the collector in LD_PRELOAD and
 * ACCPROF_CHECK=coherence; link with -rdynamic.
 *
 * Modes (argv[1]):
 *   stale    the device copy differs: one stale read to report
 *   current  the "kernel" leaves the device copy equal: nothing to report
 *   handler  the program installs its own SIGSEGV handler first (after the
 *            collector's), then as stale, then it dereferences NULL; its
 *            handler jumps back and it exits 0 (a fault at any other
 *            address reaching it exits 9)
 *   null     as stale, then a NULL dereference with no handler of its own
 *   write    as stale, but the host writes a[1000] (42) instead of reading
 *   thread   as stale, the read made by a second thread (prints its id as
 *            "reader <tid>")
 *   unnamed  as stale, but the data events give no host addresses (as
 *            libgomp's without CUPTI): nothing can be checked
 *   lost     before the first kernel the host writes a[1000] (42) and no
 *            update device follows: the kernel uses the old device copy
 *   updated  as lost, but an update device follows the write: no loss
 *   unread   after the kernel, three update self of the array; the host
 *            reads it only after the third: two downloads nobody read
 *   fwrite   as stale, but the host writes the array to a temporary file with
 *            fwrite (the kernel reads the stale copy; prints "fwrite
 *            wrote <n>", n = 2048)
 *   sigwrite as stale, but the host writes a[1000] to a pipe with write()
 *            from its own SIGALRM handler (raised), and reads it back;
 *            prints "handler wrote <n> (<value>), <k> allocations" (n = 8;
 *            k: calls of malloc, calloc and realloc while the handler's
 *            write ran on its thread, which this program defines over
 *            the C library's); then SIGALRM, sent to the main thread
 *            every 20 ms until the read returns, interrupts a read of an
 *            empty pipe: "blocked read interrupted" (EINTR: the handler
 *            has no SA_RESTART) or "blocked read restarted"
 *   every10  100 steps of a kernel and an update self; the host reads the
 *            array only when step % 10 == 0 (prints "seen <sum>"), and not
 *            after the loop: 90 downloads nobody read
 *   all      one of each: as lost, then as unread, then a second kernel
 *            and the stale read (for the views of host accesses)
 *
 * Each construct is reported at this file's line of the call that plays it
 * (the runtime's src_file and line_no), as NVHPC reports its directives.
 *
 * Prints "range <a> read <&a[1000]>" (addresses, in hex), "other read
 * <value>" (data sharing the array's first page), "host read <value>"
 * (the host copy's value, as without the check), then "done". */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <acc_prof.h>

#define N 2048 /* doubles: 16 KiB, four pages from 256 bytes into a page */

static acc_prof_callback callbacks[acc_ev_last];
/* The line the constructs being played are reported at. */
static int at_line = 10;
#define AT(call) (at_line = __LINE__, call)
static char *block;
static double *a, *dev;

void acc_prof_register(acc_event_t ev, acc_prof_callback cb, acc_register_t info) {
  (void)info;
  if (ev > acc_ev_none && ev < acc_ev_last) callbacks[ev] = cb;
}

int acc_is_present(void *h, size_t bytes) {
  return a && (char *)h >= (char *)a && (char *)h + bytes <= (char *)(a + N);
}

void *acc_deviceptr(void *h) {
  return acc_is_present(h, 1) ? (char *)dev + ((char *)h - (char *)a) : NULL;
}

static void fire(acc_event_t ev, acc_construct_t construct, void *host, size_t bytes);

/* As a runtime may, the routine reports its own download: the check
   calls it from inside its callback. */
void acc_memcpy_from_device(void *dst, void *src, size_t bytes) {
  fire(acc_ev_enqueue_download_start, acc_construct_runtime_api, dst, bytes);
  memcpy(dst, src, bytes);
  fire(acc_ev_enqueue_download_end, acc_construct_runtime_api, dst, bytes);
}

/* libgomp's goacc_prof_lock: held while the callbacks run. */
static pthread_mutex_t prof_lock;

static void fire(acc_event_t ev, acc_construct_t construct, void *host, size_t bytes) {
  if (pthread_mutex_lock(&prof_lock) == EDEADLK) {
    static const char msg[] = "deadlock: the profiling lock taken again from a callback\n";
    write(2, msg, sizeof msg - 1);
    _exit(7);
  }
  acc_prof_info pi;
  memset(&pi, 0, sizeof pi);
  pi.event_type = ev;
  pi.valid_bytes = _ACC_PROF_INFO_VALID_BYTES;
  pi.version = 201711;
  pi.device_type = acc_device_nvidia;
  pi.async = -2;
  pi.src_file = __FILE__;
  pi.func_name = "main";
  pi.line_no = at_line;
  acc_event_info ei;
  memset(&ei, 0, sizeof ei);
  if (host) {
    ei.data_event.event_type = ev;
    ei.data_event.valid_bytes = _ACC_DATA_EVENT_INFO_VALID_BYTES;
    ei.data_event.parent_construct = construct;
    ei.data_event.var_name = "a";
    ei.data_event.bytes = bytes;
    ei.data_event.host_ptr = host;
    ei.data_event.device_ptr = dev;
  } else {
    ei.other_event.event_type = ev;
    ei.other_event.valid_bytes = _ACC_OTHER_EVENT_INFO_VALID_BYTES;
    ei.other_event.parent_construct = construct;
  }
  acc_api_info ai;
  memset(&ai, 0, sizeof ai);
  if (callbacks[ev]) callbacks[ev](&pi, &ei, &ai);
  pthread_mutex_unlock(&prof_lock);
}

static void update(int device) {
  fire(acc_ev_update_start, acc_construct_update, NULL, 0);
  if (device) {
    fire(acc_ev_enqueue_upload_start, acc_construct_update, a, N * sizeof *a);
    memcpy(dev, a, N * sizeof *a);
    fire(acc_ev_enqueue_upload_end, acc_construct_update, a, N * sizeof *a);
  } else {
    fire(acc_ev_enqueue_download_start, acc_construct_update, a, N * sizeof *a);
    memcpy(a, dev, N * sizeof *a);
    fire(acc_ev_enqueue_download_end, acc_construct_update, a, N * sizeof *a);
  }
  fire(acc_ev_update_end, acc_construct_update, NULL, 0);
}

static void kernel(int change) {
  fire(acc_ev_compute_construct_start, acc_construct_parallel, NULL, 0);
  for (int i = 0; i < N; i++) dev[i] = change ? dev[i] + 1 : dev[i];
  fire(acc_ev_compute_construct_end, acc_construct_parallel, NULL, 0);
}

/* The C library's allocator, behind this program's malloc, calloc and
   realloc, which count their calls while `counting` is set (on the
   calling thread). */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
static __thread volatile sig_atomic_t counting;
static volatile long allocations;
void *malloc(size_t n) {
  if (counting) allocations++;
  return __libc_malloc(n);
}
void *calloc(size_t k, size_t n) {
  if (counting) allocations++;
  return __libc_calloc(k, n);
}
void *realloc(void *p, size_t n) {
  if (counting) allocations++;
  return __libc_realloc(p, n);
}

/* sigwrite: the program's SIGALRM handler writes the stale element out
   (write is async-signal-safe). */
static int pipe_fds[2];
static volatile long handler_wrote = -2;
static void alarm_handler(int sig) {
  (void)sig;
  counting = 1;
  handler_wrote = write(pipe_fds[1], (const void *)&a[1000], sizeof *a);
  counting = 0;
}

static pthread_t main_thread;
static volatile sig_atomic_t alarms_done;
static void *send_alarms(void *arg) {
  (void)arg;
  while (!alarms_done) {
    usleep(20000);
    if (!alarms_done) pthread_kill(main_thread, SIGALRM);
  }
  return NULL;
}

static double thread_read;
static void *reader(void *arg) {
  (void)arg;
  printf("reader %ld\n", (long)syscall(SYS_gettid));
  thread_read = ((volatile double *)a)[1000];
  return NULL;
}

static sigjmp_buf back;
static void own_handler(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  static const char msg[] = "own handler ran\n";
  if (si->si_addr == NULL) {
    write(1, msg, sizeof msg - 1);
    siglongjmp(back, 1);
  }
  _exit(9);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "stale";
  pthread_mutexattr_t attr;
  pthread_mutexattr_init(&attr);
  pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
  pthread_mutex_init(&prof_lock, &attr);
  const char *cuda = getenv("FAKE_LIBCUDA");
  if (cuda && !dlopen(cuda, RTLD_NOW)) {
    fprintf(stderr, "cannot load %s: %s\n", cuda, dlerror());
    return 2;
  }
  void (*reglib)(acc_prof_reg, acc_prof_reg, acc_prof_lookup_func) =
      (void (*)(acc_prof_reg, acc_prof_reg, acc_prof_lookup_func))dlsym(RTLD_DEFAULT, "acc_register_library");
  if (reglib) reglib(acc_prof_register, acc_prof_register, NULL);
  if (strcmp(mode, "handler") == 0) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = own_handler;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
  }
  long page = sysconf(_SC_PAGESIZE);
  if (posix_memalign((void **)&block, page, 6 * page)) return 2;
  a = (double *)(block + 256);
  dev = malloc(N * sizeof *dev);
  for (int i = 0; i < 256; i++) block[i] = (char)i;
  for (int i = 0; i < N; i++) a[i] = i;

  int named = strcmp(mode, "unnamed") != 0;
  at_line = __LINE__;
  fire(acc_ev_enter_data_start, acc_construct_enter_data, NULL, 0);
  if (named) {
    fire(acc_ev_create, acc_construct_enter_data, a, N * sizeof *a);
    fire(acc_ev_enqueue_upload_start, acc_construct_enter_data, a, N * sizeof *a);
  }
  memcpy(dev, a, N * sizeof *a);
  if (named) fire(acc_ev_enqueue_upload_end, acc_construct_enter_data, a, N * sizeof *a);
  fire(acc_ev_enter_data_end, acc_construct_enter_data, NULL, 0);

  printf("range %#lx read %#lx\n", (unsigned long)a, (unsigned long)&a[1000]);
  volatile double *va = a;
  int all = strcmp(mode, "all") == 0;
  if (strcmp(mode, "lost") == 0 || strcmp(mode, "updated") == 0 || all) {
    va[1000] = 42;
    if (strcmp(mode, "updated") == 0) AT(update(1));
  }
  AT(kernel(strcmp(mode, "current") != 0));
  if (strcmp(mode, "unread") == 0 || all) {
    AT(update(0));
    AT(update(0));
    AT(update(0));
  }
  if (strcmp(mode, "every10") == 0) {
    double seen = 0;
    for (int step = 0; step < 100; step++) {
      AT(kernel(1));
      AT(update(0));
      if (step % 10 == 0) seen += va[1000];
    }
    printf("seen %g\n", seen);
  }
  if (all) AT(kernel(1));
  /* Other data on the array's first page: let through, not reported. */
  volatile char *other = block;
  printf("other read %d\n", other[7]);
  /* The stale read. */
  double v;
  if (strcmp(mode, "thread") == 0) {
    pthread_t t;
    pthread_create(&t, NULL, reader, NULL);
    pthread_join(t, NULL);
    v = thread_read;
  } else if (strcmp(mode, "fwrite") == 0) {
    FILE *f = tmpfile();
    size_t n = f ? fwrite(a, sizeof *a, N, f) : 0;
    if (f) fclose(f);
    printf("fwrite wrote %zu\n", n);
    v = -1;
  } else if (strcmp(mode, "sigwrite") == 0) {
    if (pipe(pipe_fds)) return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = alarm_handler;
    sigaction(SIGALRM, &sa, NULL);
    raise(SIGALRM);
    double back_v = -1;
    if (read(pipe_fds[0], &back_v, sizeof back_v) != sizeof back_v) back_v = -1;
    printf("handler wrote %ld (%g), %ld allocations\n", handler_wrote, back_v, allocations);
    /* The handler installed without SA_RESTART: a blocking read that the
       alarm interrupts fails with EINTR, as without the check. The alarm
       is sent to this thread (a process's SIGALRM may go to any of its
       threads), again until the read has returned. */
    int idle[2];
    if (pipe(idle)) return 2;
    pthread_t alarmer;
    main_thread = pthread_self();
    pthread_create(&alarmer, NULL, send_alarms, NULL);
    char c;
    ssize_t r = read(idle[0], &c, 1);
    int err = errno;
    alarms_done = 1;
    pthread_join(alarmer, NULL);
    errno = err;
    printf("blocked read %s\n", r < 0 && errno == EINTR ? "interrupted" : "restarted");
    v = -1;
  } else if (strcmp(mode, "every10") == 0) {
    v = 1000; /* no read after the loop: the last download stays unread */
  } else if (strcmp(mode, "write") == 0) {
    va[1000] = 42;
    v = 1000;
  } else {
    v = va[1000];
  }
  printf("host read %g\n", v);
  fflush(stdout);
  /* The next construct: the check compares the bytes read with the
     device copy. */
  AT(kernel(0));

  if (strcmp(mode, "handler") == 0) {
    if (sigsetjmp(back, 1) == 0) {
      volatile int *null = NULL;
      printf("%d\n", *null);
    }
  } else if (strcmp(mode, "null") == 0) {
    volatile int *null = NULL;
    printf("%d\n", *null);
  }

  at_line = __LINE__;
  fire(acc_ev_exit_data_start, acc_construct_exit_data, NULL, 0);
  if (named) fire(acc_ev_enqueue_download_start, acc_construct_exit_data, a, N * sizeof *a);
  memcpy(a, dev, N * sizeof *a);
  if (named) {
    fire(acc_ev_enqueue_download_end, acc_construct_exit_data, a, N * sizeof *a);
    fire(acc_ev_delete, acc_construct_exit_data, a, N * sizeof *a);
  }
  fire(acc_ev_exit_data_end, acc_construct_exit_data, NULL, 0);
  printf("a[1000] after exit data %g\n", a[1000]);
  puts("done");
  return 0;
}
