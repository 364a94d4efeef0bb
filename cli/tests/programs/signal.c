/* Runs compute constructs, then dies of the signal named on the command line
 * (TERM: raise(SIGTERM); ABRT: abort(); INT: raise(SIGINT); SEGV:
 * raise(SIGSEGV)); with "handled" as
 * a second argument it installs its own SIGTERM handler (after the
 * collector's, as any program's main() does) that exits with status 7. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void on_term(int sig) {
  (void)sig;
  static const char msg[] = "own handler ran\n";
  write(1, msg, sizeof msg - 1);
  exit(7);
}

int main(int argc, char **argv) {
  const char *how = argc > 1 ? argv[1] : "TERM";
  if (argc > 2 && strcmp(argv[2], "handled") == 0) signal(SIGTERM, on_term);
  double s = 0;
  for (int k = 0; k < 5; k++) {
#pragma acc parallel loop reduction(+:s)
    for (int i = 0; i < 1000; i++) s += i;
  }
  printf("sum: %.0f\n", s);
  fflush(stdout);
  if (strcmp(how, "ABRT") == 0) abort();
  if (strcmp(how, "INT") == 0) raise(SIGINT);
  if (strcmp(how, "SEGV") == 0) raise(SIGSEGV);
  raise(SIGTERM);
  return 0;
}
