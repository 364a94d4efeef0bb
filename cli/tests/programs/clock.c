/* Brackets compute constructs with the program's own CLOCK_MONOTONIC
 * readings and prints them: the trace must place each construct inside its
 * bracket, whatever clock the collector stamps events with. Pauses between
 * constructs let the collector's writer take several clock readings. */
#include <stdio.h>
#include <time.h>

static unsigned long long now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000ull + t.tv_nsec;
}

int main(void) {
  static double a[4096];
  struct timespec pause = {0, 30 * 1000 * 1000};
  for (int k = 0; k < 8; k++) {
    unsigned long long before = now();
#pragma acc parallel loop copy(a)
    for (int i = 0; i < 4096; i++) a[i] += i * k;
    unsigned long long after = now();
    printf("bracket %llu %llu\n", before, after);
    nanosleep(&pause, NULL);
  }
  printf("a[4095] = %.0f\n", a[4095]);
  return 0;
}
