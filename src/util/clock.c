/* clock.c — the one wall clock the timings read (clock.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <time.h>

#include "util/clock.h"

double tg_monotonic_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
