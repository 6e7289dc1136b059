/* added_match.h — finding added tokens in a text in time linear in the text (and in the added tokens' total
 * length): an Aho-Corasick automaton over the reversed token texts, run right to left over a window of the text,
 * gives for every position the longest added token starting there. The encoder takes the first position that has
 * one (leftmost, then longest: what Hugging Face tokenizers' LeftmostLongest matcher does). */
#ifndef TG_TOKENIZER_ADDED_MATCH_H
#define TG_TOKENIZER_ADDED_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tg_added_matcher tg_added_matcher;

/* A matcher for texts[0..n) (lens[i] > 0 bytes each; the texts need not outlive it). Of equal texts the lowest index
 * wins. NULL on allocation failure or when the texts hold more than INT32_MAX - 1 bytes in all. */
tg_added_matcher *tg_added_matcher_new(const char *const *texts, const size_t *lens, size_t n);
void tg_added_matcher_free(tg_added_matcher *m);

/* One left-to-right walk over a text: the positions asked for must not decrease. */
typedef struct {
    const tg_added_matcher *m;
    const char *text;
    size_t len;
    size_t win_start, win_end; /* best[] covers text[win_start .. win_end) */
    int32_t *best;             /* [cap]: 1 + index of the longest text starting at win_start + k, 0 for none */
    size_t cap;
} tg_added_scan;

void tg_added_scan_init(tg_added_scan *s, const tg_added_matcher *m, const char *text, size_t len);
void tg_added_scan_free(tg_added_scan *s);
/* *index: the longest text starting at text[pos] (pos < len), or -1. False on allocation failure. */
bool tg_added_scan_at(tg_added_scan *s, size_t pos, int32_t *index);

#endif
