/*
 * stderr_crash.c - runs one compute construct, then dies of a signal while
 * its stderr is a pipe that nobody reads and that is already full.
 *
 *   stderr_crash segv|bus|pipe full|open
 *
 *   segv  reads a page it mapped PROT_NONE: a SIGSEGV for an access the
 *         page's protection refused (with the coherence check on, the
 *         collector's handler writes a note on stderr: the fault is not on
 *         a page the check watches)
 *   bus   reads a page of a mapped file past the file's end (SIGBUS)
 *   pipe  writes to a pipe whose reading end it closed (SIGPIPE)
 *
 *   full  stderr becomes a pipe filled to the brim whose reader never
 *         reads: a write there blocks for ever
 *   open  stderr stays as it was
 *
 * It defines `write` itself (and is linked with -rdynamic), so every call
 * of `write` made through the dynamic linker, the preloaded collector's
 * included, comes here first: a line of the collector's ("accprof: ...")
 * that arrives is reported on stdout. The collector writes its own lines
 * with the raw system call, so none ever should.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static void say(const char *s)
{
    syscall(SYS_write, 1, s, strlen(s));
}

ssize_t write(int fd, const void *buf, size_t n)
{
    if (n >= 8 && memcmp(buf, "accprof:", 8) == 0)
        say("write() entered by a line of the collector's\n");
    return syscall(SYS_write, fd, buf, n);
}

/* Makes fd 2 a pipe that is full and whose reading end stays open. */
static void fill_stderr(void)
{
    int p[2];
    if (pipe(p) != 0) {
        perror("pipe");
        _exit(3);
    }
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    char chunk[4096];
    memset(chunk, 'x', sizeof chunk);
    long filled = 0;
    for (;;) {
        long r = syscall(SYS_write, p[1], chunk, sizeof chunk);
        if (r > 0) {
            filled += r;
            continue;
        }
        if (r < 0 && errno == EAGAIN) {
            /* What is left of the last page. */
            if (syscall(SYS_write, p[1], chunk, 1) == 1) {
                filled += 1;
                continue;
            }
            break;
        }
        perror("filling the pipe");
        _exit(3);
    }
    fcntl(p[1], F_SETFL, 0);
    printf("stderr is a full pipe (%ld bytes)\n", filled);
    fflush(stdout);
    dup2(p[1], 2);
    close(p[1]);
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: stderr_crash segv|bus|pipe full|open\n");
        return 2;
    }
    double x[64];
    for (int i = 0; i < 64; i++)
        x[i] = i;
#pragma acc parallel loop copy(x[0:64])
    for (int i = 0; i < 64; i++)
        x[i] *= 2;
    printf("x[1] = %g\n", x[1]);
    fflush(stdout);
    long page = sysconf(_SC_PAGESIZE);
    /* Prepared before stderr fills, so nothing below can fail on it. */
    volatile char *none = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int mem = memfd_create("stderr_crash", 0);
    volatile char *past_end = mmap(NULL, page, PROT_READ, MAP_SHARED, mem, 0);
    int dead[2];
    if (none == MAP_FAILED || mem < 0 || past_end == MAP_FAILED || pipe(dead) != 0) {
        perror("setting up");
        return 3;
    }
    close(dead[0]);
    if (strcmp(argv[2], "full") == 0)
        fill_stderr();
    if (strcmp(argv[1], "segv") == 0)
        return none[0];
    if (strcmp(argv[1], "bus") == 0)
        return past_end[0];
    if (strcmp(argv[1], "pipe") == 0) {
        write(dead[1], "x", 1);
        say("survived SIGPIPE\n");
        return 4;
    }
    return 2;
}
