/* A library with OpenACC API calls, opened by api_dlopen.c with
 * RTLD_LOCAL: the runtime it brings is in its own scope only. Calls are
 * marked `api: NAME`. */
#include <openacc.h>
#include <stddef.h>

double offload(double *a, int n) {
  size_t bytes = (size_t)n * sizeof *a;
  acc_copyin(a, bytes); /* api: acc_copyin */
  for (int i = 0; i < n; i++)
    a[i] += 1;
  acc_update_device(a, bytes); /* api: acc_update_device */
  acc_update_self(a, bytes); /* api: acc_update_self */
  acc_delete(a, bytes); /* api: acc_delete */
  double s = 0;
  for (int i = 0; i < n; i++)
    s += a[i];
  return s;
}
