/* A worker thread runs a compute construct and then calls exit(3) while the
 * main thread is blocked: the trace must still be complete. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void *worker(void *arg) {
  (void)arg;
  double s = 0;
#pragma acc parallel loop reduction(+:s)
  for (int i = 0; i < 1000; i++) s += i;
  printf("sum: %.0f\n", s);
  fflush(stdout);
  exit(3);
}

int main(void) {
  pthread_t t;
  pthread_create(&t, NULL, worker, NULL);
  for (;;) pause();
}
