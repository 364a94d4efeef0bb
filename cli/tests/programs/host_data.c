/* A structured data region holding a host_data use_device region whose
 * body hands the device address of x to a function (in host fallback the
 * address is the host one). Prints the sum. */
#include <stdio.h>

static double sum(const double *p, int n) {
  double s = 0;
  for (int i = 0; i < n; i++) s += p[i];
  return s;
}

int main(void) {
  double x[64];
  for (int i = 0; i < 64; i++) x[i] = i;
  double s = 0;
#pragma acc data copyin(x)
  {
#pragma acc host_data use_device(x)
    {
      s = sum(x, 64);
      s += 1;
    }
  }
  printf("sum: %.0f\n", s);
  return 0;
}
