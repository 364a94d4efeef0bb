/* Stands in for the CUDA driver (built as a shared library whose soname is
 * libcuda.so.1) for coherence_driver.c: the two routines the coherence
 * check calls to read a device copy. The driver's "device memory" is host
 * memory, so a device-to-host copy is a memcpy. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

int cuCtxGetCurrent(void **ctx) {
  *ctx = (void *)1;
  return 0;
}

int cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t bytes) {
  memcpy(dst, (const void *)(uintptr_t)src, bytes);
  return 0;
}
