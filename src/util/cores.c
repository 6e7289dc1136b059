/* cores.c — how many threads "all cores" is (tinygpt.h: tg_threads_all_cores), the one answer every default
 * thread count uses. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <unistd.h>

#include "tinygpt.h"

int tg_threads_all_cores(void) {
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 && n < 65536 ? (int)n : 1;
}
