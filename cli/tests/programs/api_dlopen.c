/* Not linked with an OpenACC runtime. It first looks for acc_wait_all the
 * way code that works with or without a runtime does (the preloaded
 * collector defines one: it must behave as the host device), then opens
 * an OpenACC library (argv[1]) with RTLD_LOCAL and calls it. Ends with
 * status 5. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv) {
  void (*wait_all)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "acc_wait_all");
  if (wait_all)
    wait_all(); /* api: acc_wait_all */
  if (argc < 2)
    return 2;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    fprintf(stderr, "%s\n", dlerror());
    return 2;
  }
  double (*offload)(double *, int) = (double (*)(double *, int))dlsym(lib, "offload");
  double a[64];
  for (int i = 0; i < 64; i++)
    a[i] = i;
  printf("offload: %.1f\n", offload(a, 64));
  return 5;
}
