/*
 * late_handler.c - installs a SIGSEGV handler after the collector's (as a
 * Fortran runtime or the program itself would), then crashes inside a
 * compute construct.
 *
 *   late_handler sigaction   sigaction(SA_SIGINFO | SA_RESETHAND) with SIGUSR1
 *                            in sa_mask; the handler says whether SIGUSR1 is
 *                            blocked and whether the disposition was reset,
 *                            then returns: the write faults again and the
 *                            process dies of SIGSEGV.
 *   late_handler nodefer     the same with SA_NODEFER: SIGSEGV is not
 *                            blocked while the handler runs.
 *   late_handler signal      signal(); the handler re-raises the way
 *                            libgfortran's does: signal(sig, SIG_DFL), raise.
 *
 * Before crashing it reads its disposition back and prints whether it is its
 * own handler, with the flags it set. Everything it prints must be the same
 * with and without a collector.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void say(const char *s)
{
    ssize_t r = write(1, s, strlen(s));
    (void)r;
}

static void with_info(int sig, siginfo_t *info, void *ctx)
{
    (void)info;
    (void)ctx;
    sigset_t now;
    sigprocmask(SIG_BLOCK, NULL, &now);
    say(sigismember(&now, SIGUSR1) ? "handler: SIGUSR1 blocked\n" : "handler: SIGUSR1 not blocked\n");
    say(sigismember(&now, sig) ? "handler: SIGSEGV blocked\n" : "handler: SIGSEGV not blocked\n");
    struct sigaction now_sa;
    sigaction(SIGSEGV, NULL, &now_sa);
    say(now_sa.sa_handler == SIG_DFL ? "handler: reset to default\n" : "handler: still installed\n");
}

static void plain(int sig)
{
    say("handler: re-raising\n");
    signal(sig, SIG_DFL);
    raise(sig);
}

int main(int argc, char **argv)
{
    int use_signal = argc > 1 && strcmp(argv[1], "signal") == 0;
    int nodefer = argc > 1 && strcmp(argv[1], "nodefer") == 0;
    double x[64];
    for (int i = 0; i < 64; i++)
        x[i] = i;
#pragma acc parallel loop copy(x[0:64])
    for (int i = 0; i < 64; i++)
        x[i] *= 2;
    if (use_signal) {
        void (*old)(int) = signal(SIGSEGV, plain);
        printf("old handler default: %s\n", old == SIG_DFL ? "yes" : "no");
        struct sigaction back;
        sigaction(SIGSEGV, NULL, &back);
        printf("read back own handler: %s\n", back.sa_handler == plain ? "yes" : "no");
    } else {
        struct sigaction sa, old, back;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = with_info;
        sa.sa_flags = SA_SIGINFO | SA_RESETHAND | (nodefer ? SA_NODEFER : 0);
        sigemptyset(&sa.sa_mask);
        sigaddset(&sa.sa_mask, SIGUSR1);
        sigaction(SIGSEGV, &sa, &old);
        printf("old handler default: %s\n", old.sa_handler == SIG_DFL ? "yes" : "no");
        sigaction(SIGSEGV, NULL, &back);
        printf("read back own handler: %s, flags kept: %s, mask kept: %s\n",
               back.sa_sigaction == with_info ? "yes" : "no",
               (back.sa_flags & (SA_SIGINFO | SA_RESETHAND)) == (SA_SIGINFO | SA_RESETHAND) ? "yes" : "no",
               sigismember(&back.sa_mask, SIGUSR1) ? "yes" : "no");
    }
    printf("x[1] = %g\n", x[1]);
    fflush(stdout);
    double *bad = (double *)(uintptr_t)0x1000;
#pragma acc parallel loop deviceptr(bad)
    for (int i = 0; i < 64; i++)
        bad[i] = i;
    printf("survived\n");
    return 3;
}
