/* Runs a few compute constructs, then ends the way its arguments say, so the
 * collector's handling of each way a process can end or be replaced is seen
 * on a real program:
 *   exit N | return N | _exit N | _Exit N      end that way with status N
 *   silent N             return N, having written nothing to stderr
 *   signal NAME          raise SIGNAME (USR1, USR2, ALRM, VTALRM, PROF, TRAP, RTMIN)
 *   pipe                 print lines until stdout's reader is gone (SIGPIPE)
 *   exec HOW PROG ARGS.. exec PROG with HOW = execl, execlp, execle, execv,
 *                        execvp, execvpe, execve or fexecve
 *   exec-fail            exec a program that does not exist, go on, return 0
 *   forks N              fork N children; each runs a construct and _exits
 *   fork-exit            one child that runs a construct and exits (0)
 *   fork-signal          one child that runs a construct and raises SIGUSR1
 *   fork-exec-fail       one child that fails to exec, then runs a construct
 *                        and exits (0)
 *   chdir DIR            chdir to DIR before any construct, then return 0
 *   none                 no construct at all; return 0
 * Each mode prints to stdout and stderr, and nothing that varies between
 * runs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static double work(int n) {
  double s = 0;
#pragma acc parallel loop reduction(+:s)
  for (int i = 0; i < n; i++) s += i;
  return s;
}

static int signal_named(const char *name) {
  if (strcmp(name, "USR1") == 0) return SIGUSR1;
  if (strcmp(name, "USR2") == 0) return SIGUSR2;
  if (strcmp(name, "ALRM") == 0) return SIGALRM;
  if (strcmp(name, "VTALRM") == 0) return SIGVTALRM;
  if (strcmp(name, "PROF") == 0) return SIGPROF;
  if (strcmp(name, "TRAP") == 0) return SIGTRAP;
  if (strcmp(name, "RTMIN") == 0) return SIGRTMIN;
  return SIGTERM;
}

/* argv: the new image's words, NULL-terminated, at most 8. */
static int do_exec(const char *how, char **argv) {
  const char *prog = argv[0];
  char *const *args = argv;
  /* The words after argv[0] as execl & co take them: one by one, then a
   * NULL (then, for execle, the environment), padded with NULLs. */
  char *v[10] = {0};
  int n = 0;
  while (argv[1 + n]) {
    v[n] = argv[1 + n];
    n++;
  }
  fflush(stdout);
  fflush(stderr);
  if (strcmp(how, "execl") == 0)
    return execl(prog, prog, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], (char *)0);
  if (strcmp(how, "execlp") == 0)
    return execlp(prog, prog, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], (char *)0);
  if (strcmp(how, "execle") == 0) {
    v[n + 1] = (char *)environ;
    return execle(prog, prog, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9]);
  }
  if (strcmp(how, "execv") == 0) return execv(prog, args);
  if (strcmp(how, "execvp") == 0) return execvp(prog, args);
  if (strcmp(how, "execvpe") == 0) return execvpe(prog, args, environ);
  if (strcmp(how, "execve") == 0) return execve(prog, args, environ);
  if (strcmp(how, "fexecve") == 0) {
    int fd = open(prog, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    return fexecve(fd, args, environ);
  }
  errno = EINVAL;
  return -1;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "return";
  const char *arg = argc > 2 ? argv[2] : "0";
  if (strcmp(mode, "none") == 0) {
    puts("no constructs");
    fputs("nothing to report\n", stderr);
    return 0;
  }
  if (strcmp(mode, "chdir") == 0 && chdir(arg) != 0) {
    perror("chdir");
    return 1;
  }
  double s = 0;
  for (int k = 0; k < 3; k++) s += work(1000);
  printf("sum: %.0f\n", s);
  if (strcmp(mode, "silent") != 0) fprintf(stderr, "mode %s\n", mode);
  fflush(stdout);
  int code = atoi(arg);
  if (strcmp(mode, "exit") == 0) exit(code);
  if (strcmp(mode, "_exit") == 0) _exit(code);
  if (strcmp(mode, "_Exit") == 0) _Exit(code);
  if (strcmp(mode, "signal") == 0) {
    raise(signal_named(arg));
    return 99;
  }
  if (strcmp(mode, "late-kill") == 0) {
    /* Long enough for the collector's periodic write, then a death it
     * cannot see. */
    usleep(600000);
    raise(SIGKILL);
    return 97;
  }
  if (strcmp(mode, "pipe") == 0) {
    for (int i = 0; i < 100000; i++) printf("line %d\n", i);
    return 98;
  }
  if (strcmp(mode, "exec") == 0 && argc > 3) {
    /* Up to eight words for the new image; execl & co take them one by one. */
    char *words[9] = {0};
    for (int i = 0; i < 7 && 3 + i < argc; i++) words[i] = argv[3 + i];
    do_exec(arg, words);
    perror("exec");
    return 97;
  }
  if (strcmp(mode, "exec-fail") == 0) {
    char *words[] = {"/nonexistent/program", NULL};
    if (execv(words[0], words) != 0) puts("exec failed, carrying on");
    printf("more: %.0f\n", work(500));
    return 0;
  }
  if (strcmp(mode, "forks") == 0 || strcmp(mode, "fork-exit") == 0 ||
      strcmp(mode, "fork-signal") == 0 || strcmp(mode, "fork-exec-fail") == 0) {
    int n = strcmp(mode, "forks") == 0 ? code : 1;
    for (int i = 0; i < n; i++) {
      pid_t pid = fork();
      if (pid == 0) {
        if (strcmp(mode, "fork-exec-fail") == 0) {
          char *words[] = {"/nonexistent/program", NULL};
          execv(words[0], words);
        }
        double c = work(100 * (i + 1));
        printf("child %d: %.0f\n", i, c);
        fflush(stdout);
        if (strcmp(mode, "forks") == 0) _exit(0);
        if (strcmp(mode, "fork-signal") == 0) raise(SIGUSR1);
        exit(0);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      if (WIFSIGNALED(status))
        printf("child %d signal %d\n", i, WTERMSIG(status));
      else
        printf("child %d status %d\n", i, WEXITSTATUS(status));
    }
    printf("after: %.0f\n", work(300));
    return 0;
  }
  return code;
}
