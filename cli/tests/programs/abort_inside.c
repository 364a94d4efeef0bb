/* Runs two compute regions, then calls abort() inside the third, on the
 * line marked ABORT-HERE (the host fallback runs the region's body on the
 * host, so abort() is callable there). Prints the sums first. */
#include <stdio.h>
#include <stdlib.h>

int main(void) {
  double s = 0;
  for (int k = 0; k < 2; k++) {
#pragma acc parallel loop reduction(+:s)
    for (int i = 0; i < 100; i++) s += i;
  }
  printf("sum: %.0f\n", s);
  fflush(stdout);
  int n = 100;
#pragma acc parallel num_gangs(1) copy(s) /* DIES-HERE */
  {
    if (n > 0 && s > 0) abort();
  }
  printf("not reached\n");
  return 0;
}
