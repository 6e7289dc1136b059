/* snapshot.h — the KV cache's part of a session snapshot (docs/snapshot-format.md): its policy as a list of
 * resolved numbers (what must match for a snapshot to be restored), and its state (per K/V layer the token counters
 * and every allocated buffer, byte for byte in the stored precision). */
#ifndef TG_KVCACHE_SNAPSHOT_H
#define TG_KVCACHE_SNAPSHOT_H

#include <stdbool.h>

#include "kvcache/kvcache.h"
#include "util/bytes.h"

/* Writes c's policy list: a count, then that many int64 values (their order and meaning fixed by the format's
 * version). */
void tg_kvcache_save_policy(const tg_kvcache *c, tg_wbytes *w);
/* Reads a policy list and compares it with c's: false with a message naming the first setting that differs
 * ("key precision: int4 in the snapshot, int8 here") or a list that does not parse. */
bool tg_kvcache_check_policy(const tg_kvcache *c, tg_rbytes *r, tg_error *err);

/* Writes c's state: per layer that holds K/V its counters and its stores' buffers as allocated. */
void tg_kvcache_save_state(const tg_kvcache *c, tg_wbytes *w);
/* Empties c (tg_kvcache_reset), then reads a state written by a cache of the same policy (checked before with
 * tg_kvcache_check_policy) into it: an unbounded cache allocates the chunks the state holds (max_memory checked).
 * position is the session's: every layer must hold exactly that many tokens. False with a message when the state
 * is inconsistent (counters out of range, sizes that do not match the policy), short, or memory runs out; c is then
 * empty again. */
bool tg_kvcache_load_state(tg_kvcache *c, tg_rbytes *r, int64_t position, tg_error *err);

#endif
