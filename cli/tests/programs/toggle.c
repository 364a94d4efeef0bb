/* Four compute regions, each on its own line; around the second one the
 * compute_construct_end callbacks are toggled off (acc_prof_unregister with
 * a NULL callback and acc_toggle), so that region's end is never reported.
 * With "start" as the first argument the start callbacks are toggled off
 * instead, around the third region. Prints the sum. */
#include <acc_prof.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
  int start = argc > 1 && strcmp(argv[1], "start") == 0;
  double s = 0;
#pragma acc parallel loop reduction(+:s)
  for (int i = 0; i < 100; i++) s += i;
  if (!start) acc_prof_unregister(acc_ev_compute_construct_end, NULL, acc_toggle);
#pragma acc parallel loop reduction(+:s)
  for (int i = 0; i < 100; i++) s += 2 * i;
  if (!start) acc_prof_register(acc_ev_compute_construct_end, NULL, acc_toggle);
  if (start) acc_prof_unregister(acc_ev_compute_construct_start, NULL, acc_toggle);
#pragma acc parallel loop reduction(+:s)
  for (int i = 0; i < 100; i++) s += 3 * i;
  if (start) acc_prof_register(acc_ev_compute_construct_start, NULL, acc_toggle);
#pragma acc parallel loop reduction(+:s)
  for (int i = 0; i < 100; i++) s += 4 * i;
  printf("sum: %.0f\n", s);
  return 0;
}
