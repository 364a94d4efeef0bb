/* Runs a compute region, prints "ready", then waits inside a second one
 * (the line marked so below) until its standard input ends: a program
 * still running, inside a construct, while its trace is read. The host
 * fallback runs the region's body on the host, where stdin can be read. */
#include <stdio.h>

int main(void) {
  double s = 0;
#pragma acc parallel loop reduction(+:s)
  for (int i = 0; i < 100; i++) s += i;
  printf("ready %.0f\n", s);
  fflush(stdout);
  int n = 1;
#pragma acc parallel num_gangs(1) copy(s) /* WAITS-HERE */
  {
    char buf[64];
    if (n > 0)
      while (fread(buf, 1, sizeof buf, stdin) > 0) {
      }
  }
  return 0;
}
