/* Not an OpenACC program. */
#include <stdio.h>
int main(void) {
  puts("plain program");
  return 4;
}
