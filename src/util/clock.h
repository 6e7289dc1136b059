/* clock.h — the one wall clock the timings read (reports, the bandwidth probe, the server's latencies). */
#ifndef TG_UTIL_CLOCK_H
#define TG_UTIL_CLOCK_H

/* Seconds on CLOCK_MONOTONIC (an arbitrary origin: only differences mean anything). */
double tg_monotonic_s(void);

#endif
