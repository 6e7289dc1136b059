/* stop_text.c — the stop-string filter: search the held bytes for each stop string, release what cannot be part of
 * one. */
#include "generate/stop_text.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void tg_stop_text_init(tg_stop_text *f, const char *const *stops, size_t n) {
    memset(f, 0, sizeof *f);
    f->stops = stops;
    f->n_stops = n;
}

void tg_stop_text_free(tg_stop_text *f) {
    free(f->held);
    free(f->out);
    memset(f, 0, sizeof *f);
}

void tg_stop_text_reset(tg_stop_text *f) {
    f->held_len = 0;
    f->stopped = false;
}

bool tg_text_reserve(char **p, size_t *cap, size_t need) {
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        if (c > SIZE_MAX / 2) return false;
        c *= 2;
    }
    char *q = realloc(*p, c);
    if (!q) return false;
    *p = q;
    *cap = c;
    return true;
}

/* The first position of needle[0 .. m) in hay[0 .. n), or n when absent. */
static size_t find(const char *hay, size_t n, const char *needle, size_t m) {
    if (m == 0 || m > n) return n;
    for (size_t i = 0; i + m <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, m) == 0) return i;
    return n;
}

bool tg_stop_text_push(tg_stop_text *f, const char *text, size_t len, const char **out, size_t *out_len,
                       bool *out_of_memory) {
    *out = f->out;
    *out_len = 0;
    *out_of_memory = false;
    if (f->stopped) return true;
    if (len > SIZE_MAX - f->held_len || !tg_text_reserve(&f->held, &f->held_cap, f->held_len + len) ||
        !tg_text_reserve(&f->out, &f->out_cap, f->held_len + len + 1)) {
        *out_of_memory = true;
        return false;
    }
    if (len) memcpy(f->held + f->held_len, text, len);
    f->held_len += len;
    *out = f->out;

    /* the earliest stop string in the held text ends the output there */
    size_t cut = f->held_len;
    for (size_t i = 0; i < f->n_stops; i++) {
        size_t at = find(f->held, f->held_len, f->stops[i], strlen(f->stops[i]));
        if (at < cut) cut = at;
    }
    if (cut < f->held_len) {
        if (cut) memcpy(f->out, f->held, cut);
        *out_len = cut;
        f->held_len = 0;
        f->stopped = true;
        return true;
    }
    /* keep the longest tail that is a proper prefix of some stop string */
    size_t keep = 0;
    for (size_t i = 0; i < f->n_stops; i++) {
        const size_t m = strlen(f->stops[i]);
        if (m == 0) continue;
        for (size_t k = m - 1 < f->held_len ? m - 1 : f->held_len; k > keep; k--) {
            if (memcmp(f->held + f->held_len - k, f->stops[i], k) == 0) {
                keep = k;
                break;
            }
        }
    }
    const size_t release = f->held_len - keep;
    if (release) memcpy(f->out, f->held, release);
    if (keep && release) memmove(f->held, f->held + release, keep);
    f->held_len = keep;
    *out_len = release;
    return false;
}

void tg_stop_text_flush(tg_stop_text *f, const char **out, size_t *out_len) {
    *out = f->held;
    *out_len = f->stopped ? 0 : f->held_len;
    f->held_len = 0;
}
