/* Two threads call exit: the main thread first, then, while the main
 * thread is still in its (slow) atexit handler, a second thread. This is
 * the shape of an OpenACC runtime's fatal device error, reported at once
 * by the thread that waited and by the driver's callback thread. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static atomic_int exiting;

static void slow_handler(void) {
  atomic_store(&exiting, 1);
  usleep(300 * 1000);
  printf("handler done\n");
  fflush(stdout);
}

static void *second(void *arg) {
  (void)arg;
  while (!atomic_load(&exiting)) usleep(1000);
  exit(7);
}

int main(void) {
  double s = 0;
#pragma acc parallel loop reduction(+:s)
  for (int i = 0; i < 1000; i++) s += i;
  printf("sum: %.0f\n", s);
  fflush(stdout);
  atexit(slow_handler);
  pthread_t t;
  pthread_create(&t, NULL, second, NULL);
  exit(3);
}
