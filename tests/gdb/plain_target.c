/* A program without weft, for the extension's "not a weft program" check. */
#include <stdio.h>

__attribute__((noinline)) void plain_stop(void) { __asm__ volatile("" ::: "memory"); }

int main(void) {
    plain_stop();
    puts("plain");
    return 0;
}
