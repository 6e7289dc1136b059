/* park.h — finished conversations kept for continuation: each as session snapshots (the KV cache in its stored
 * precision and the tokens it holds, docs/snapshot-format.md) in RAM within a byte budget, then optionally as files
 * in a directory within a disk budget, least recently parked evicted first (RAM to disk, disk to nothing). A
 * conversation parks two states: where it ended (its prompt and the reply fed back) and where its prompt ended. A
 * new request whose tokens strictly extend a parked state's takes the longest such: its cache is restored and only
 * the new tokens are prefilled; the prompt's state serves a request whose history came back with the reply as
 * other tokens than generated (re-tokenised, trimmed or edited by the client). Apart from the running sessions' KV
 * budget (admission.h). Thread-safe (one mutex): the scheduler parks and takes, /metrics reads the counts. */
#ifndef TG_SERVE_PARK_H
#define TG_SERVE_PARK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tinygpt.h"

typedef struct {
    int64_t ram_budget;   /* bytes of snapshots (and their token lists) held in RAM; 0 = no reuse at all */
    const char *dir;      /* NULL: RAM only; else evicted snapshots go there as NAME.tgsnap files */
    int64_t disk_budget;  /* bytes of files in dir */
    int64_t test_kill_in_write; /* tests only: > 0 = the first file write stops after this many bytes of its
                                 * temporary file and the process kills itself (SIGKILL), as a crash mid-write */
} tg_park_config;

/* The counters /metrics shows. */
typedef struct {
    int64_t hits, misses, reused_tokens;
    int64_t prompt_hits;    /* hits on the state where a conversation's prompt ended (its reply re-read) */
    int64_t ram_bytes, ram_states, disk_bytes, disk_states;
    int64_t ram_count, disk_count; /* conversations: by the tier of their end (of the prompt's state when alone) */
    int64_t held_bytes;     /* prompt states of running sessions, not parked yet (tg_park_hold) */
    int64_t ram_evictions;  /* conversations that left RAM for lack of room (to disk, or dropped without a dir) */
    int64_t disk_evictions; /* files removed for lack of disk budget */
    int64_t disk_refused;   /* files in dir that were no usable snapshot (at start or when restored) */
    int64_t write_errors;
} tg_park_stats;

typedef struct tg_park tg_park;

/* A store for conversations of model. With a dir: the directory is created when missing, stale temporary files
 * (NAME.tgsnap.tmp.PID, left by a killed server) are removed and the NAME.tgsnap files are indexed (their token
 * lists read and checksummed; a file that is no whole snapshot is refused and left alone), the oldest removed
 * beyond the disk budget. NULL with err filled when the directory cannot be used or memory runs out. */
tg_park *tg_park_new(const tg_park_config *c, const tg_model *model, tg_error *err);
/* Frees the store (the files stay). */
void tg_park_free(tg_park *p);
/* Whether conversations are parked at all (ram_budget > 0). */
bool tg_park_enabled(const tg_park *p);

/* Parks a finished conversation: sequence q, which holds ids[n] (n = its position), saved, and, when prompt_snap is
 * not NULL, the state its prompt left: a snapshot of ids[0..n_prompt) that tg_sequence_save made then (prompt_len
 * bytes, malloc'ed; the store takes it over). The most recently parked; older states evicted beyond the budgets.
 * Failures (memory, a file that cannot be written) only lose a state (counted). */
void tg_park_put(tg_park *p, const tg_sequence *q, const int32_t *ids, size_t n, void *prompt_snap, size_t prompt_len,
                 size_t n_prompt);
/* Room for a running session's prompt state (saved when its prompt's prefill ends, parked with its conversation
 * when it finishes): bytes taken from the store's second allowance of ram_budget, apart from the parked states', so
 * that the copies the running sessions hold stay bounded too. False when there is no room (the conversation then
 * parks without it). */
bool tg_park_hold(tg_park *p, int64_t bytes);
/* Gives back bytes that tg_park_hold took. */
void tg_park_release(tg_park *p, int64_t bytes);
/* For a request of ids[n]: the parked state with the longest token list that is a strict prefix of ids, restored
 * into q (a new sequence; of another cache policy, it is passed over); it and the other state of its conversation
 * are no longer parked. Returns the tokens q holds then (0: a miss, q untouched or empty). */
size_t tg_park_take(tg_park *p, tg_sequence *q, const int32_t *ids, size_t n);
/* Writes every conversation held in RAM to the directory (at shutdown, so that a restart continues them); nothing
 * without a dir. */
void tg_park_flush(tg_park *p);
void tg_park_get_stats(tg_park *p, tg_park_stats *s);

#endif
