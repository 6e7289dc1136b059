/* generator.c — tinygpt.h's tg_generator: the one generation step of every loop (sampler, end-of-turn ids,
 * detokeniser, stop strings with their held-back text, max tokens, abort). It never evaluates: the caller's session
 * or batch does, following the rule the header states. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "generate/stop_text.h"
#include "tinygpt.h"
#include "util/error.h"

struct tg_generator {
    const tg_model *model;
    tg_sampler *sampler;   /* not owned */
    tg_detok *detok;
    char **stops;          /* [n_stops] owned copies */
    size_t n_stops;
    int32_t *end_ids;      /* [n_end_ids] */
    size_t n_end_ids;
    int64_t max_tokens;
    bool ignore_eos;
    tg_abort_fn abort;
    void *abort_user;
    tg_stop_text filter;   /* over stops */
    int64_t count;         /* tokens handed out since start */
    tg_gen_stop last;      /* what the last step reported */
    char *buf;             /* the echo, or the end's text: what the last call handed out when it joined pieces */
    size_t buf_len, buf_cap;
};

tg_generator_params tg_generator_default_params(void) {
    tg_generator_params p;
    memset(&p, 0, sizeof p);
    return p;
}

void tg_generator_free(tg_generator *g) {
    if (!g) return;
    tg_stop_text_free(&g->filter);
    for (size_t i = 0; i < g->n_stops; i++) free(g->stops[i]);
    free(g->stops);
    free(g->end_ids);
    free(g->buf);
    tg_detok_free(g->detok);
    free(g);
}

/* A malloc'ed copy of bytes bytes of src; NULL when bytes is 0 or memory runs out. */
static void *copy_of(const void *src, size_t bytes) {
    void *p = bytes ? malloc(bytes) : NULL;
    if (p) memcpy(p, src, bytes);
    return p;
}

tg_generator *tg_generator_new(const tg_model *model, tg_sampler *sampler, const tg_generator_params *p,
                               tg_error *err) {
    if (!model || !sampler || !p || (p->n_stops > 0 && !p->stops) || (p->n_end_ids > 0 && !p->end_ids) ||
        p->max_tokens < 0) {
        tg_fail(err, "tg_generator_new: no model, sampler or parameters, stops or end_ids missing, or max_tokens < 0");
        return NULL;
    }
    tg_generator *g = calloc(1, sizeof *g);
    if (g) g->end_ids = copy_of(p->end_ids, p->n_end_ids * sizeof *p->end_ids);
    if (g && p->n_stops > 0) g->stops = calloc(p->n_stops, sizeof *g->stops);
    bool ok = g && (g->end_ids || p->n_end_ids == 0) && (g->stops || p->n_stops == 0);
    for (size_t i = 0; ok && i < p->n_stops; i++) {
        const char *stop = p->stops[i] ? p->stops[i] : "";
        g->stops[g->n_stops] = copy_of(stop, strlen(stop) + 1);
        ok = g->stops[g->n_stops++] != NULL;
    }
    if (!ok) tg_fail(err, "out of memory");
    else g->detok = tg_detok_new(model, err);
    if (!ok || !g->detok) {
        tg_generator_free(g);
        return NULL;
    }
    g->model = model;
    g->sampler = sampler;
    g->n_end_ids = p->n_end_ids;
    g->max_tokens = p->max_tokens;
    g->ignore_eos = p->ignore_eos;
    g->abort = p->abort;
    g->abort_user = p->abort_user;
    tg_stop_text_init(&g->filter, (const char *const *)g->stops, g->n_stops);
    return g;
}

/* Appends len bytes to g->buf; false when memory runs out. */
static bool buf_add(tg_generator *g, const char *text, size_t len) {
    if (len == 0) return true;
    if (len > SIZE_MAX - g->buf_len || !tg_text_reserve(&g->buf, &g->buf_cap, g->buf_len + len)) return false;
    memcpy(g->buf + g->buf_len, text, len);
    g->buf_len += len;
    return true;
}

bool tg_generator_start(tg_generator *g, const int32_t *ids, size_t n, bool echo, const char **text, size_t *len,
                        tg_error *err) {
    if (text) *text = "";
    if (len) *len = 0;
    g->count = 0;
    g->last = TG_GEN_GOING;
    tg_stop_text_reset(&g->filter);
    g->buf_len = 0;
    bool ok = true;
    if (echo) {
        for (size_t i = 0; i < n; i++) {
            const char *t = NULL;
            size_t l = 0;
            tg_detok_push(g->detok, ids[i], &t, &l);
            ok = ok && buf_add(g, t, l);
        }
        if (text) *text = g->buf ? g->buf : "";
        if (len) *len = ok ? g->buf_len : 0;
    } else {
        tg_detok_skip_prompt(g->detok, ids, n);
    }
    for (size_t i = 0; i < n; i++) tg_sampler_accept(g->sampler, ids[i]); /* the repeat penalty's history */
    return ok || tg_fail(err, "out of memory");
}

static bool is_end(const tg_generator *g, int32_t id) {
    if (g->ignore_eos) return false;
    if (tg_token_is_eos(g->model, id)) return true; /* every EOS id of the model's files */
    for (size_t i = 0; i < g->n_end_ids; i++)
        if (g->end_ids[i] == id) return true;
    return false;
}

/* text[len] through the stop filter into *out; false when memory runs out. Sets *hit when a stop string appeared. */
static bool filter(tg_generator *g, const char *text, size_t len, tg_gen_token *out, bool *hit) {
    out->text = text;
    out->len = len;
    *hit = false;
    if (g->n_stops == 0) return true;
    bool oom = false;
    *hit = tg_stop_text_push(&g->filter, text, len, &out->text, &out->len, &oom);
    return !oom;
}

bool tg_generator_step(tg_generator *g, const float *logits, tg_gen_token *out, tg_error *err) {
    *out = (tg_gen_token){.id = -1, .text = "", .len = 0, .stop = g->last};
    if (g->last != TG_GEN_GOING) return true;
    const int32_t id = tg_sampler_sample(g->sampler, logits);
    if (id < 0) return tg_fail(err, "the model produced no finite logits");
    if (is_end(g, id)) {
        out->stop = g->last = TG_GEN_END;
        return true;
    }
    g->count++;
    out->id = id;
    const char *text = NULL;
    size_t len = 0;
    tg_detok_push(g->detok, id, &text, &len);
    bool hit = false;
    if (!filter(g, text, len, out, &hit)) return tg_fail(err, "out of memory in the stop-string filter");
    if (hit) out->stop = TG_GEN_STOP_STRING;
    else if (g->max_tokens > 0 && g->count >= g->max_tokens) out->stop = TG_GEN_MAX_TOKENS;
    else if (g->abort && g->abort(g->abort_user)) out->stop = TG_GEN_ABORTED;
    g->last = out->stop;
    return true;
}

bool tg_generator_finish(tg_generator *g, tg_gen_token *out, tg_error *err) {
    *out = (tg_gen_token){.id = -1, .text = "", .len = 0, .stop = g->last};
    if (g->filter.stopped) {
        out->stop = TG_GEN_STOP_STRING;
        return true;
    }
    const char *text = NULL;
    size_t len = 0;
    tg_detok_flush(g->detok, &text, &len);
    bool hit = false;
    if (!filter(g, text, len, out, &hit)) return tg_fail(err, "out of memory in the stop-string filter");
    if (hit) {
        out->stop = g->last = TG_GEN_STOP_STRING;
        return true;
    }
    if (g->n_stops == 0) return true;
    /* the released text, then the held-back tail that did not become a stop string, joined in g->buf */
    const char *held = NULL;
    size_t held_len = 0;
    g->buf_len = 0;
    bool ok = buf_add(g, out->text, out->len);
    tg_stop_text_flush(&g->filter, &held, &held_len);
    ok = ok && buf_add(g, held, held_len);
    if (!ok) return tg_fail(err, "out of memory");
    out->text = g->buf ? g->buf : "";
    out->len = g->buf_len;
    return true;
}

int64_t tg_generator_count(const tg_generator *g) { return g ? g->count : 0; }
