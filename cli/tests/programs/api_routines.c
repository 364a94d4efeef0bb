/* Calls the OpenACC API routines at known lines. Each call is marked
 * `api: NAME` (with `xN` when it runs N times); the tests find the lines
 * from these marks. Prints what the routines return (as facts that do not
 * depend on addresses) and ends with status 3. */
#include <openacc.h>
#include <stdio.h>
#include <string.h>

#define N 256

static double a[N], b[N], c[N];

int main(void) {
  for (int i = 0; i < N; i++)
    a[i] = i;
  double *da = acc_copyin(a, sizeof a); /* api: acc_copyin */
  printf("copyin: %s, present %d\n", da ? "device address" : "NULL",
         acc_is_present(a, sizeof a));
  acc_create(b, sizeof b); /* api: acc_create */
  for (int it = 0; it < 3; it++) {
    a[0] = it;
    acc_update_device(a, sizeof a); /* api: acc_update_device x3 */
  }
#pragma acc parallel loop present(a, b)
  for (int i = 0; i < N; i++)
    b[i] = 2 * a[i];
  acc_update_self(b, sizeof b); /* api: acc_update_self */
  acc_copyout(b, sizeof b); /* api: acc_copyout */
  acc_delete(a, sizeof a); /* api: acc_delete */
  printf("present after delete: %d\n", acc_is_present(a, sizeof a));
  double sum = 0;
  for (int i = 0; i < N; i++)
    sum += b[i];
  printf("sum: %.1f\n", sum);
  void *d = acc_malloc(sizeof a); /* api: acc_malloc */
  printf("acc_malloc: %s\n", d ? "device address" : "NULL");
  acc_memcpy_to_device(d, a, sizeof a); /* api: acc_memcpy_to_device */
  memset(c, 0, sizeof c);
  acc_memcpy_from_device(c, d, sizeof c); /* api: acc_memcpy_from_device */
  printf("memcpy round trip: %s\n", memcmp(a, c, sizeof a) ? "differs" : "same");
  acc_free(d); /* api: acc_free */
  acc_copyin_async(c, sizeof c, 1); /* api: acc_copyin_async */
  acc_wait(1); /* api: acc_wait */
  acc_delete(c, sizeof c); /* api: acc_delete */
  acc_wait_all(); /* api: acc_wait_all */
  return 3;
}
