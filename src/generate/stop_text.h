/* stop_text.h — stop strings (the generation step's; `--stop STRING`, the server's "stop"): generated text passes
 * through a filter that ends the output before the first occurrence of any stop string, and holds back the tail that
 * could still become one, so that no byte of a stop string is ever handed out. */
#ifndef TG_GENERATE_STOP_TEXT_H
#define TG_GENERATE_STOP_TEXT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *const *stops; /* the stop strings (not owned; empty ones are ignored) */
    size_t n_stops;
    char *held;               /* bytes not yet released: a possible start of a stop string */
    size_t held_len, held_cap;
    char *out;                /* the bytes released by the last call */
    size_t out_cap;
    bool stopped;
} tg_stop_text;

/* Starts a filter over stops[0 .. n) (which must outlive it). */
void tg_stop_text_init(tg_stop_text *f, const char *const *stops, size_t n);
void tg_stop_text_free(tg_stop_text *f);
/* Back to the start of a text (nothing held, not stopped), keeping the buffers. */
void tg_stop_text_reset(tg_stop_text *f);

/* Adds len bytes of generated text. *out / *out_len: the bytes that are now safe to print (valid until the next
 * call). Returns true when a stop string has appeared: *out then ends just before it and everything after is
 * dropped. False with *out_len 0 and f->stopped unchanged also when memory runs out (out_of_memory set). */
bool tg_stop_text_push(tg_stop_text *f, const char *text, size_t len, const char **out, size_t *out_len,
                       bool *out_of_memory);

/* The held-back bytes, at the end of generation (they turned out not to start a stop string). */
void tg_stop_text_flush(tg_stop_text *f, const char **out, size_t *out_len);

/* Grows the malloc'ed byte buffer *p of *cap bytes (doubling, from 64) to hold at least need; false when memory runs
 * out (*p unchanged). */
bool tg_text_reserve(char **p, size_t *cap, size_t need);

#endif
