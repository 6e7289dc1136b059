/* bandwidth_child.h — `tinygpt bench`'s read-bandwidth probe (tinygpt.h: tg_bandwidth_probe) run in a child process,
 * so that its buffer never counts in the benchmark's peak RSS while its passes interleave with the generation tests.
 * The child sleeps between passes; the parent waits during one. */
#ifndef TG_CLI_BANDWIDTH_CHILD_H
#define TG_CLI_BANDWIDTH_CHILD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "tinygpt.h"

typedef struct {
    pid_t pid;     /* 0: no child */
    int to_child;  /* requests: one byte per pass */
    int from_child; /* replies: the buffer's bytes once, then TG_BANDWIDTH_PATTERNS doubles per pass */
    int64_t bytes; /* what one pattern of a pass reads */
} tg_bw_child;

/* Forks the child, which builds a probe of `mib` MiB on n_threads threads. False (c->pid 0) when fork, the pipes or
 * the probe failed; call it before the process starts threads of its own. */
bool tg_bw_child_start(tg_bw_child *c, int64_t mib, int n_threads);
/* tg_bw_child_start as `tinygpt bench` runs it (n_threads <= 0: all cores): when the child cannot start, one line
 * on stderr says the run goes on without a roofline. */
void tg_bw_child_start_or_warn(tg_bw_child *c, int64_t mib, int n_threads);
/* One pass in the child: each pattern's seconds into seconds[]. False when the child is gone. */
bool tg_bw_child_pass(tg_bw_child *c, double seconds[TG_BANDWIDTH_PATTERNS]);
/* Ends the child and waits for it; a no-op when none was started. */
void tg_bw_child_stop(tg_bw_child *c);

#endif
