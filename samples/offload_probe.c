/* Used by the Makefile: does this compiler build OpenACC code for NVIDIA GPUs
 * (including device math functions)? Not a sample. */
#include <math.h>

int main(void)
{
    double x = 2.0;
#pragma acc parallel copy(x)
    x = sqrt(x);
    return x > 1.0 ? 0 : 1;
}
