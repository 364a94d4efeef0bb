/* One compute construct; a line on stdout, one on stderr, and the exit
 * code given as the first argument: what a test compares between a run
 * with the profiler and one without. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  int code = argc > 1 ? atoi(argv[1]) : 0;
  double s = 0;
#pragma acc parallel loop reduction(+:s)
  for (int i = 0; i < 1000; i++) s += i;
  printf("sum %.0f\n", s);
  fprintf(stderr, "echo_acc: done\n");
  return code;
}
