/* A compute construct in the parent, one in a forked child, one more in the
 * parent after the child exits: each process must leave its own trace. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static double work(int n) {
  double s = 0;
#pragma acc parallel loop reduction(+:s)
  for (int i = 0; i < n; i++) s += i;
  return s;
}

int main(void) {
  double a = work(1000);
  pid_t pid = fork();
  if (pid == 0) {
    double c = work(2000);
    printf("child: %.0f\n", c);
    exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  double b = work(3000);
  printf("parent: %.0f %.0f child-status=%d\n", a, b, WEXITSTATUS(status));
  return 0;
}
