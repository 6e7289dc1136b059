/* backend.h — the seam between the model program (program.h) and what executes it: a backend is a table of
 * functions (tg_backend_i) over its own state, handed the whole program once and then one call's rows at a time.
 *
 * Why the program as a whole, not one function pointer per operation called as the program runs: every backend we
 * have or plan needs to see past the operation in hand. The CPU backend fuses (a norm becomes the input preparation
 * of the products that read it, the residual add and the gated activation become part of the product's units), plans
 * the units of the next product and warms its weights while a step ends, and counts its steps from the program before
 * a call; a GPU backend records the step's operations into one submission and replays it. With per-operation calls
 * each would have to defer and rebuild the list the program already is. So the program is data (program.h's
 * operations on named activations), the backend compiles it once (its own table of what each operation kind becomes)
 * and runs it per call; a new backend is a new tg_backend_i row, and a new architecture touches no backend unless it
 * brings an operation kind that is not there yet. */
#ifndef TG_FORWARD_BACKEND_H
#define TG_FORWARD_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "forward/program.h"
#include "kvcache/kvcache.h"

/* One call's rows (row t of the call: a token of some session) and where their logits go; filled by forward.c. */
typedef struct {
    int n;                 /* rows, 1 .. max_rows */
    const int32_t *ids;    /* [n] each row's token */
    tg_kvcache **cache;    /* [n] each row's cache (several rows may share one) */
    const int64_t *pos;    /* [n] each row's position */
    const bool *alone;     /* [n] whether a row is its cache's only row in its attention round */
    int n_rounds;          /* attention rounds: a round's appends all come before its attention */
    const int *round_rows; /* [n] rows in round order: round k = round_rows[round_start[k] .. round_start[k + 1]) */
    const int *round_start;
    /* the logits: every row from row t0 (0 with logits_all, else n - 1) into logits_all [n - t0, vocab], the last
     * row into logits_last [vocab] (both NULL: none); or, n_head > 0, the rows head_rows[0 .. n_head) into head_out
     * [n_head, vocab] */
    float *logits_all, *logits_last;
    int n_head;
    const int *head_rows;
    float *head_out;
    bool meter; /* sum the attention meter's pieces after the call (tg_forward_chunk's calls) */
} tg_rows;

typedef struct tg_backend tg_backend;

/* What a device backend holds on its device (tg_cache_report's device fields). */
typedef struct {
    char device[128];
    size_t kv, weights, other;
} tg_backend_memory;

typedef struct {
    const char *name;
    /* The backend's state for program p of model m: activations and scratch for up to max_rows rows, attention work
     * space sized for `cache` (or one of the same shape and policy), n_threads workers where it has any (< 1: 1).
     * NULL (err filled) when it cannot run the program or memory runs out. p and m must outlive it. */
    tg_backend *(*create)(const struct tg_model *m, const tg_program *p, const tg_kvcache *cache, int max_rows,
                          int n_threads, tg_error *err);
    void (*destroy)(tg_backend *be); /* NULL: nothing */
    int (*threads)(const tg_backend *be);
    /* Whether rows through `cache` fit the attention work space the backend was sized for (a device backend: and
     * whether it has the geometry the backend keeps caches' copies in). */
    bool (*fits)(const tg_backend *be, const tg_kvcache *cache);
    /* `cache` runs no more calls (it is about to be freed): what the backend holds for it may serve another cache
     * (NULL: nothing held). */
    void (*release)(tg_backend *be, const tg_kvcache *cache);
    /* Runs the program over the rows; allocates nothing. */
    void (*run)(tg_backend *be, const tg_rows *rows);
    /* The attention-sink meter (forward.h's tg_forward_meter_on / tg_forward_meter). */
    bool (*meter_on)(tg_backend *be, tg_error *err);
    bool (*meter)(const tg_backend *be, tg_attention_stats *out);
    /* A device backend's name for its device and its bytes there (NULL for the CPU: nothing to say). */
    void (*memory)(const tg_backend *be, tg_backend_memory *out);
} tg_backend_i;

/* The CPU backend (cpu.c): one thread team, work-stealing steps, kernels chosen per instruction set. */
extern const tg_backend_i tg_backend_cpu;

/* The Vulkan backend (src/backend/vulkan/): its create opens device 0; tg_backend_vulkan_create opens device
 * `device` (the N of --device vulkan:N). In a build without Vulkan (no glslc or Vulkan headers when it was built)
 * both fail with one message saying so. */
extern const tg_backend_i tg_backend_vulkan;
tg_backend *tg_backend_vulkan_create(const struct tg_model *m, const tg_program *p, const tg_kvcache *cache,
                                     int max_rows, int device, tg_error *err);

#endif
