/* added_match.c — the added-token matcher: a trie of the reversed texts with Aho-Corasick failure links, so that
 * reading the text backwards, the state after text[p] names the longest text that starts at p. */
#include "tokenizer/added_match.h"

#include <stdlib.h>
#include <string.h>

#include "tokenizer/hashmap.h"
#include "util/checked.h"

/* Positions resolved per backward pass (at least; a pass covers max_len more when the texts are longer). */
#define WINDOW 65536

struct tg_added_matcher {
    tg_pairmap edges;      /* (node, byte) -> child in .merged */
    int32_t *fail;         /* [n_nodes] the longest proper suffix of the node's string that is a node */
    int32_t *out;          /* [n_nodes] the longest text that is a suffix of the node's string, or -1 */
    int32_t *first_child;  /* [n_nodes] -1 if none; children chained through next_sibling */
    int32_t *next_sibling; /* [n_nodes] */
    uint8_t *in_byte;      /* [n_nodes] the byte on the edge into the node */
    size_t n_nodes;
    size_t max_len;        /* the longest text */
};

static int32_t child_of(const tg_added_matcher *m, int32_t node, uint8_t b) {
    const tg_pair_slot *e = tg_pairmap_get(&m->edges, node, b);
    return e ? e->merged : -1;
}

/* The state after reading byte b in state s. */
static int32_t step(const tg_added_matcher *m, int32_t s, uint8_t b) {
    for (;;) {
        const int32_t c = child_of(m, s, b);
        if (c >= 0) return c;
        if (s == 0) return 0;
        s = m->fail[s];
    }
}

void tg_added_matcher_free(tg_added_matcher *m) {
    if (!m) return;
    tg_pairmap_free(&m->edges);
    free(m->fail);
    free(m->out);
    free(m->first_child);
    free(m->next_sibling);
    free(m->in_byte);
    free(m);
}

/* Links every node to its failure node and longest output, breadth first (the order fail[] needs). */
static bool link_failures(tg_added_matcher *m, const int32_t *term) {
    int32_t *queue = malloc(m->n_nodes * sizeof *queue);
    if (!queue) return false;
    size_t head = 0, tail = 0;
    m->fail[0] = 0;
    m->out[0] = -1;
    queue[tail++] = 0;
    while (head < tail) {
        const int32_t u = queue[head++];
        for (int32_t v = m->first_child[u]; v >= 0; v = m->next_sibling[v]) {
            const int32_t f = u == 0 ? 0 : step(m, m->fail[u], m->in_byte[v]);
            m->fail[v] = f;
            m->out[v] = term[v] >= 0 ? term[v] : m->out[f];
            queue[tail++] = v;
        }
    }
    free(queue);
    return true;
}

tg_added_matcher *tg_added_matcher_new(const char *const *texts, const size_t *lens, size_t n) {
    size_t total = 1;
    for (size_t i = 0; i < n; i++) {
        if (!tg_add_size(total, lens[i], &total)) return NULL;
    }
    if (total >= INT32_MAX) return NULL;
    tg_added_matcher *m = calloc(1, sizeof *m);
    int32_t *term = malloc(total * sizeof *term);
    if (!m || !term || !tg_pairmap_init(&m->edges, total)) goto fail;
    m->fail = malloc(total * sizeof *m->fail);
    m->out = malloc(total * sizeof *m->out);
    m->first_child = malloc(total * sizeof *m->first_child);
    m->next_sibling = malloc(total * sizeof *m->next_sibling);
    m->in_byte = malloc(total);
    if (!m->fail || !m->out || !m->first_child || !m->next_sibling || !m->in_byte) goto fail;
    m->n_nodes = 1;
    term[0] = -1;
    m->first_child[0] = m->next_sibling[0] = -1;
    for (size_t i = 0; i < n; i++) {
        int32_t node = 0;
        for (size_t j = lens[i]; j-- > 0;) { /* the text backwards */
            const uint8_t b = (uint8_t)texts[i][j];
            int32_t c = child_of(m, node, b);
            if (c < 0) {
                c = (int32_t)m->n_nodes++;
                term[c] = -1;
                m->first_child[c] = -1;
                m->next_sibling[c] = m->first_child[node];
                m->first_child[node] = c;
                m->in_byte[c] = b;
                tg_pairmap_put(&m->edges, node, b, 0, c);
            }
            node = c;
        }
        if (term[node] < 0) term[node] = (int32_t)i;
        if (lens[i] > m->max_len) m->max_len = lens[i];
    }
    if (!link_failures(m, term)) goto fail;
    free(term);
    return m;
fail:
    free(term);
    tg_added_matcher_free(m);
    return NULL;
}

void tg_added_scan_init(tg_added_scan *s, const tg_added_matcher *m, const char *text, size_t len) {
    memset(s, 0, sizeof *s);
    s->m = m;
    s->text = text;
    s->len = len;
}

void tg_added_scan_free(tg_added_scan *s) {
    free(s->best);
    s->best = NULL;
}

/* Resolves text[pos .. pos + window): one backward pass from where the longest text starting in the window could
 * end. Every position is read at most twice over the whole walk (window >= max_len). */
static bool resolve_window(tg_added_scan *s, size_t pos) {
    const tg_added_matcher *m = s->m;
    const size_t window = m->max_len > WINDOW ? m->max_len : WINDOW;
    const size_t end = s->len - pos < window ? s->len : pos + window;
    const size_t hi = s->len - end < m->max_len ? s->len : end + m->max_len;
    if (s->cap < end - pos) {
        int32_t *b = realloc(s->best, (end - pos) * sizeof *b);
        if (!b) return false;
        s->best = b;
        s->cap = end - pos;
    }
    int32_t state = 0;
    for (size_t q = hi; q-- > pos;) {
        state = step(m, state, (uint8_t)s->text[q]);
        if (q < end) s->best[q - pos] = m->out[state] + 1;
    }
    s->win_start = pos;
    s->win_end = end;
    return true;
}

bool tg_added_scan_at(tg_added_scan *s, size_t pos, int32_t *index) {
    *index = -1;
    if (!s->m || pos >= s->len) return true;
    if ((pos < s->win_start || pos >= s->win_end) && !resolve_window(s, pos)) return false;
    *index = s->best[pos - s->win_start] - 1;
    return true;
}
