/*
 * early_lib.c - a library of the program whose constructor runs before the
 * collector's (the dynamic linker starts a program's own libraries before
 * the preloaded ones). It installs a SIGUSR1 handler and writes a line,
 * both through the collector's interposers, before the collector started.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t got;

static void on_usr1(int sig)
{
    (void)sig;
    got = 1;
}

int early_handler_ran(void)
{
    return got;
}

__attribute__((constructor)) static void early(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    const char *m = sigaction(SIGUSR1, &sa, NULL) == 0 ? "constructor: handler installed\n"
                                                        : "constructor: sigaction failed\n";
    ssize_t r = write(1, m, strlen(m));
    (void)r;
}
