/* An external function for external_target.c, in a library built without
 * -fsplit-stack and outside the program's analysis: stackcheck has no bound
 * for it. It uses 12 KiB of stack, more than MaxPath leaves. */
#include <stddef.h>

unsigned long deep_external(unsigned seed) {
    volatile unsigned char buf[12 * 1024];
    for (size_t i = 0; i < sizeof buf; ++i) buf[i] = (unsigned char)(seed + i);
    unsigned long sum = 0;
    for (size_t i = 0; i < sizeof buf; ++i) sum += buf[i];
    return sum;
}
