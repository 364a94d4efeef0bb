/* Many small compute constructs (the count is the first argument): a
 * trace whose model is large. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000;
  double x = 0;
  for (long i = 0; i < n; i++) {
#pragma acc parallel num_gangs(1) copy(x)
    x += 1;
  }
  printf("%.0f\n", x);
  return 0;
}
