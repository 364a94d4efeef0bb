/*
 * early.c - linked with early_lib.c, whose constructor calls sigaction and
 * write before the collector's constructor. Runs one construct, raises
 * SIGUSR1 (the early handler must have been installed) and exits with 3.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

int early_handler_ran(void);

int main(void)
{
    double x[64];
#pragma acc parallel loop copyout(x[0:64])
    for (int i = 0; i < 64; i++)
        x[i] = 2.0 * i;
    raise(SIGUSR1);
    printf("x[63] = %.1f, early handler ran: %d\n", x[63], early_handler_ran());
    fflush(stdout);
    exit(3);
}
