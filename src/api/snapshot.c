/* snapshot.c — a session saved to bytes and restored from them (docs/snapshot-format.md): the header (magic,
 * version, payload length, CRC-32 of the payload and of the header), then the sections MODL (the model's shape and
 * fingerprint), PLCY (the resolved cache policy), SESS (position and tokens), KVCS (the cache's state), and the
 * optional SMPL (sampler state) and LOGT (logits after the last token). Everything read is checked against the bytes
 * left before it is used; the checksum is zlib's crc32. The file side (atomic writes) is snapshot_file.c. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "api/sequence_internal.h"
#include "api/session_internal.h"
#include "kernels/tensor.h"
#include "kvcache/snapshot.h"
#include "model/model.h"
#include "sampler/sampler_state.h"
#include "tinygpt.h"
#include "util/bytes.h"
#include "util/error.h"

static const uint8_t MAGIC[8] = {'T', 'G', 'S', 'N', 'A', 'P', 'S', 'H'};
#define HEADER_BYTES 32
#define FORMAT_VERSION 2u

/* Section tags: four ASCII letters read as a little-endian u32. */
#define TAG(a, b, c, d) ((uint32_t)(a) | (uint32_t)(b) << 8 | (uint32_t)(c) << 16 | (uint32_t)(d) << 24)
#define TAG_MODEL TAG('M', 'O', 'D', 'L')
#define TAG_POLICY TAG('P', 'L', 'C', 'Y')
#define TAG_SESSION TAG('S', 'E', 'S', 'S')
#define TAG_CACHE TAG('K', 'V', 'C', 'S')
#define TAG_SAMPLER TAG('S', 'M', 'P', 'L')
#define TAG_LOGITS TAG('L', 'O', 'G', 'T')
#define TAG_APP TAG('A', 'P', 'P', 'X')

static uint32_t crc_of(const uint8_t *p, size_t n) { return (uint32_t)crc32_z(crc32_z(0, Z_NULL, 0), p, n); }

/* ---- the model's fingerprint --------------------------------------------------------------------------------- */

static void w_f32(tg_wbytes *w, float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    tg_w_u32(w, u);
}

static void w_floats(tg_wbytes *w, const float *x, int64_t n) {
    for (int64_t i = 0; x && i < n; i++) w_f32(w, x[i]);
}

/* The shape facts a restore compares one by one (to say what differs). */
static void model_shape(const tg_model *m, int64_t v[6]) {
    const tg_hparams *hp = &m->hp;
    v[0] = hp->n_layers, v[1] = hp->d_model, v[2] = hp->n_heads, v[3] = hp->n_kv_heads, v[4] = hp->head_dim,
    v[5] = hp->vocab_size;
}

/* What identifies a model's computation: its hyper-parameters, RoPE frequencies, layer sharing, weight types, norms,
 * and the first row of an untied embedding table (as the file has it: never repacked). Written (w->p NULL: counted)
 * for the fingerprint's CRC. */
static void model_facts(const tg_model *m, tg_wbytes *w) {
    const tg_hparams *hp = &m->hp;
    tg_w_raw(w, hp->architecture, sizeof hp->architecture);
    const int64_t ints[] = {hp->n_layers, hp->d_model, hp->n_heads, hp->n_kv_heads, hp->head_dim, hp->ffn_dim,
                            hp->vocab_size, hp->context_length, hp->sliding_window, hp->rope_style,
                            hp->tied_embeddings, m->tok_embd.type, m->lm_head.type};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) tg_w_i64(w, ints[i]);
    w_f32(w, hp->rope_theta);
    w_f32(w, hp->norm_eps);
    for (int i = 0; hp->rope_inv_freq && i < hp->head_dim / 2; i++) {
        uint64_t u;
        memcpy(&u, &hp->rope_inv_freq[i], 8);
        tg_w_u64(w, u);
    }
    w_floats(w, m->out_norm, hp->d_model);
    for (int l = 0; l < hp->n_layers; l++) {
        const tg_layer_weights *L = &m->layers[l];
        tg_w_i64(w, hp->kv_source ? hp->kv_source[l] : l);
        tg_w_i64(w, L->wq.type);
        tg_w_i64(w, L->w_down.type);
        w_floats(w, L->attn_norm, hp->d_model);
        w_floats(w, L->ffn_norm, hp->d_model);
    }
    if (!hp->tied_embeddings && m->tok_embd.data) {
        const size_t row = tg_row_bytes(m->tok_embd.type, m->tok_embd.cols);
        tg_w_raw(w, m->tok_embd.data, row < 4096 ? row : 4096);
    }
}

/* CRC-32 of model_facts; 0 when memory runs out (then every model matches: the shape is still compared). */
static uint32_t model_fingerprint(const tg_model *m) {
    tg_wbytes w = {0};
    model_facts(m, &w);
    w.p = malloc(w.n ? w.n : 1);
    if (!w.p) return 0;
    w.n = 0;
    model_facts(m, &w);
    const uint32_t crc = crc_of(w.p, w.n);
    free(w.p);
    return crc;
}

/* ---- writing ------------------------------------------------------------------------------------------------- */

/* Writes a section: tag, body length, body (written by fn twice: counting, then for real). */
typedef struct {
    const tg_model *model;
    tg_kvcache *cache;
    const int32_t *ids;   /* [n_ids] the tokens the cache holds, in order */
    size_t n_ids;
    const tg_sampler *sampler;
    const float *logits;
    const void *app;
    size_t app_len;
    uint32_t fingerprint;
    uint64_t rng[4];      /* the sampler's PRNG state */
    const int32_t *hist;  /* [n_hist] its repeat history, oldest first */
    size_t n_hist;
} save_ctx;

typedef void (*body_fn)(const save_ctx *ctx, tg_wbytes *w);

static void section(tg_wbytes *w, uint32_t tag, body_fn fn, const save_ctx *ctx) {
    tg_wbytes count = {0};
    fn(ctx, &count);
    tg_w_u32(w, tag);
    tg_w_u64(w, count.n);
    fn(ctx, w);
}

static void body_model(const save_ctx *c, tg_wbytes *w) {
    int64_t v[6];
    model_shape(c->model, v);
    for (int i = 0; i < 6; i++) tg_w_i64(w, v[i]);
    tg_w_u32(w, c->fingerprint);
}

static void body_policy(const save_ctx *c, tg_wbytes *w) { tg_kvcache_save_policy(c->cache, w); }

static void body_session(const save_ctx *c, tg_wbytes *w) {
    tg_w_u64(w, c->n_ids);
    for (size_t i = 0; i < c->n_ids; i++) tg_w_u32(w, (uint32_t)c->ids[i]);
}

static void body_cache(const save_ctx *c, tg_wbytes *w) { tg_kvcache_save_state(c->cache, w); }

static void body_sampler(const save_ctx *c, tg_wbytes *w) {
    for (int i = 0; i < 4; i++) tg_w_u64(w, c->rng[i]);
    tg_w_u64(w, c->n_hist);
    for (size_t i = 0; i < c->n_hist; i++) tg_w_u32(w, (uint32_t)c->hist[i]);
}

static void body_logits(const save_ctx *c, tg_wbytes *w) {
    const int32_t V = tg_vocab_size(c->model);
    tg_w_u32(w, (uint32_t)V);
    w_floats(w, c->logits, V);
}

static void body_app(const save_ctx *c, tg_wbytes *w) { tg_w_raw(w, c->app, c->app_len); }

static void payload(const save_ctx *ctx, tg_wbytes *w) {
    section(w, TAG_MODEL, body_model, ctx);
    section(w, TAG_POLICY, body_policy, ctx);
    section(w, TAG_SESSION, body_session, ctx);
    section(w, TAG_CACHE, body_cache, ctx);
    if (ctx->sampler) section(w, TAG_SAMPLER, body_sampler, ctx);
    if (ctx->logits) section(w, TAG_LOGITS, body_logits, ctx);
    if (ctx->app) section(w, TAG_APP, body_app, ctx);
}

/* The snapshot of cache c of model m holding ids[n_ids] (tg_session_save's contract). */
static bool save_core(const tg_model *m, tg_kvcache *c, const int32_t *ids, size_t n_ids,
                      const tg_snapshot_extras *extras, void **buf, size_t *len, tg_error *err) {
    *buf = NULL;
    *len = 0;
    const tg_snapshot_extras none = {0};
    const tg_snapshot_extras *x = extras ? extras : &none;
    const tg_sampler *sampler = x->sampler;
    save_ctx ctx = {m, c, ids, n_ids, sampler, x->logits, x->app, x->app_len, model_fingerprint(m), {0}, NULL, 0};
    int32_t *hist = NULL;
    if (sampler) {
        const size_t cap = tg_sampler_history_cap(sampler);
        hist = cap ? malloc(cap * sizeof *hist) : NULL;
        if (cap && !hist) return tg_fail(err, "out of memory for the sampler's history");
        ctx.n_hist = tg_sampler_get_state(sampler, ctx.rng, hist);
        ctx.hist = hist;
    }
    tg_wbytes w = {0};
    payload(&ctx, &w);
    const size_t n = w.n;
    uint8_t *p = n <= SIZE_MAX - HEADER_BYTES ? malloc(HEADER_BYTES + n) : NULL;
    if (!p) {
        free(hist);
        return tg_fail(err, "out of memory for a snapshot of %zu + %d bytes", n, HEADER_BYTES);
    }
    w = (tg_wbytes){p + HEADER_BYTES, 0};
    payload(&ctx, &w);
    free(hist);
    tg_wbytes h = {p, 0};
    tg_w_raw(&h, MAGIC, sizeof MAGIC);
    tg_w_u32(&h, FORMAT_VERSION);
    tg_w_u32(&h, HEADER_BYTES);
    tg_w_u64(&h, n);
    tg_w_u32(&h, crc_of(p + HEADER_BYTES, n));
    tg_w_u32(&h, crc_of(p, HEADER_BYTES - 4));
    *buf = p;
    *len = HEADER_BYTES + n;
    return true;
}

bool tg_session_save(const tg_session *s, const tg_snapshot_extras *extras, void **buf, size_t *len, tg_error *err) {
    if (!s || !buf || !len) return tg_fail(err, "no session or no buffer to save it into");
    size_t n;
    const int32_t *ids = tg_session_tokens(s, &n);
    return save_core(tg_session_model(s), tg_session_kvcache((tg_session *)s), ids, n, extras, buf, len, err);
}

bool tg_sequence_save(const tg_sequence *q, const int32_t *ids, size_t n, const tg_snapshot_extras *extras,
                      void **buf, size_t *len, tg_error *err) {
    if (!q || !buf || !len || (n && !ids)) return tg_fail(err, "no sequence, tokens or buffer to save it into");
    if ((int64_t)n != tg_sequence_position(q))
        return tg_fail(err, "%zu tokens given for a sequence at position %lld", n, (long long)tg_sequence_position(q));
    return save_core(tg_sequence_model(q), tg_sequence_kvcache((tg_sequence *)q), ids, n, extras, buf, len, err);
}

/* ---- reading ------------------------------------------------------------------------------------------------- */

static bool corrupt(tg_error *err, const char *what) {
    return tg_fail_code(err, TG_ERR_SNAPSHOT_CORRUPT, "not a usable snapshot: %s", what);
}

/* The next section, which must be `tag` (or, when optional, may be absent: *present false): *body = its bytes. */
static bool next_section(tg_rbytes *r, uint32_t tag, bool optional, tg_rbytes *body, bool *present, tg_error *err) {
    if (present) *present = false;
    if (optional && r->off == r->n) return true;
    const size_t at = r->off;
    const uint32_t t = tg_r_u32(r);
    const uint64_t n = tg_r_u64(r);
    if (!r->ok) return corrupt(err, "a section header is cut short");
    if (t != tag) {
        if (optional) {
            r->off = at;
            return true;
        }
        return corrupt(err, "a section is missing or out of order");
    }
    if (n > r->n - r->off) return corrupt(err, "a section is longer than the snapshot");
    *body = (tg_rbytes){r->p + r->off, (size_t)n, 0, true};
    r->off += (size_t)n;
    if (present) *present = true;
    return true;
}

static bool check_model(const tg_model *m, tg_rbytes *b, tg_error *err) {
    int64_t v[6], mine[6];
    for (int i = 0; i < 6; i++) v[i] = tg_r_i64(b);
    const uint32_t fp = tg_r_u32(b);
    if (!b->ok || b->off != b->n) return corrupt(err, "the model section has the wrong length");
    model_shape(m, mine);
    static const char *const names[6] = {"layers", "d_model", "heads", "kv-heads", "head dim", "vocabulary"};
    for (int i = 0; i < 6; i++)
        if (v[i] != mine[i])
            return tg_fail_code(err, TG_ERR_SNAPSHOT_MODEL,
                                "the snapshot was made with another model: %s %" PRId64 " in the snapshot, %" PRId64
                                " in this one", names[i], v[i], mine[i]);
    const uint32_t here = model_fingerprint(m);
    if (fp != here)
        return tg_fail_code(err, TG_ERR_SNAPSHOT_MODEL,
                            "the snapshot was made with another model of the same shape (fingerprint %08" PRIx32
                            ", this model's %08" PRIx32 ")", fp, here);
    return true;
}

/* Reads the header and checks magic, version, length and both checksums: *payload = the payload's bytes. */
static bool read_header(const uint8_t *p, size_t len, tg_rbytes *pay, tg_error *err) {
    if (len < sizeof MAGIC || memcmp(p, MAGIC, sizeof MAGIC) != 0) return corrupt(err, "no snapshot magic");
    if (len < HEADER_BYTES) return corrupt(err, "the header is cut short");
    tg_rbytes h = {p, HEADER_BYTES, sizeof MAGIC, true};
    const uint32_t version = tg_r_u32(&h), hbytes = tg_r_u32(&h);
    const uint64_t n = tg_r_u64(&h);
    const uint32_t crc = tg_r_u32(&h), hcrc = tg_r_u32(&h);
    if (hcrc != crc_of(p, HEADER_BYTES - 4)) return corrupt(err, "the header's checksum does not match");
    if (version != FORMAT_VERSION)
        return tg_fail_code(err, TG_ERR_SNAPSHOT_VERSION,
                            "the snapshot has format version %" PRIu32 "; this library reads version %u", version,
                            FORMAT_VERSION);
    if (hbytes != HEADER_BYTES) return corrupt(err, "unexpected header size");
    if (n != len - HEADER_BYTES)
        return corrupt(err, n > len - HEADER_BYTES ? "it is cut short" : "it has bytes beyond its payload");
    if (crc != crc_of(p + HEADER_BYTES, (size_t)n)) return corrupt(err, "the checksum does not match (damaged)");
    *pay = (tg_rbytes){p + HEADER_BYTES, (size_t)n, 0, true};
    return true;
}

/* What a restore changes besides the cache: the holder's tokens and position (commit; false when memory runs out),
 * or its emptying after a failure (empty). */
typedef struct {
    void *holder;
    bool (*commit)(void *holder, const int32_t *ids, size_t n, tg_error *err);
    void (*empty)(void *holder);
} restore_target;

/* Restores buf[len] into cache c of model m and its holder (tg_session_restore's contract). */
static bool restore_core(const tg_model *m, tg_kvcache *c, const restore_target *t, const void *buf, size_t len,
                         tg_snapshot_restore *out, tg_error *err) {
    tg_snapshot_restore ignore = {0};
    if (!out) out = &ignore;
    out->has_logits = false;
    out->app = NULL;
    out->app_len = 0;
    tg_sampler *sampler = out->sampler;
    float *logits = out->logits;
    tg_rbytes r, model, policy, sess, cache, smpl = {0}, lg = {0}, app = {0};
    bool has_smpl, has_lg, has_app;
    if (!read_header(buf, len, &r, err)) return false;
    if (!next_section(&r, TAG_MODEL, false, &model, NULL, err) ||
        !check_model(m, &model, err))
        return false;
    if (!next_section(&r, TAG_POLICY, false, &policy, NULL, err)) return false;
    if (!tg_kvcache_check_policy(c, &policy, err)) {
        if (err) err->code = policy.ok ? TG_ERR_SNAPSHOT_POLICY : TG_ERR_SNAPSHOT_CORRUPT;
        return false;
    }
    if (policy.off != policy.n) return corrupt(err, "the policy section has the wrong length");
    if (!next_section(&r, TAG_SESSION, false, &sess, NULL, err) ||
        !next_section(&r, TAG_CACHE, false, &cache, NULL, err) ||
        !next_section(&r, TAG_SAMPLER, true, &smpl, &has_smpl, err) ||
        !next_section(&r, TAG_LOGITS, true, &lg, &has_lg, err) ||
        !next_section(&r, TAG_APP, true, &app, &has_app, err))
        return false;
    if (r.off != r.n) return corrupt(err, "unknown sections at its end");

    /* the session's tokens: a count the section's length must match exactly */
    const uint64_t n_ids = tg_r_u64(&sess);
    if (!sess.ok || n_ids > (sess.n - sess.off) / 4 || (sess.n - sess.off) != n_ids * 4)
        return corrupt(err, "the token list does not match its section's length");
    const int32_t V = tg_vocab_size(m);
    /* the sampler's state: the count the section says, ids in the vocabulary (or the unused marker) */
    uint64_t rng[4] = {0};
    uint64_t hist_cap = 0;
    if (has_smpl) {
        for (int i = 0; i < 4; i++) rng[i] = tg_r_u64(&smpl);
        hist_cap = tg_r_u64(&smpl);
        if (!smpl.ok || hist_cap > (smpl.n - smpl.off) / 4 || smpl.n - smpl.off != hist_cap * 4)
            return corrupt(err, "the sampler section has the wrong length");
        if (sampler && tg_sampler_vocab(sampler) != V)
            return tg_fail_code(err, TG_ERR_SNAPSHOT_POLICY, "the sampler's vocabulary (%" PRId32
                                ") is not the model's (%" PRId32 ")", tg_sampler_vocab(sampler), V);
    }
    if (has_lg) {
        const uint32_t lv = tg_r_u32(&lg);
        if (!lg.ok || lv != (uint32_t)V || lg.n - lg.off != (size_t)V * 4)
            return corrupt(err, "the logits section does not match the vocabulary");
    }
    void *app_copy = NULL;
    if (has_app && out->want_app) {
        app_copy = malloc(app.n ? app.n : 1);
        if (!app_copy) return tg_fail(err, "out of memory for %zu bytes of application data", app.n);
        memcpy(app_copy, app.p, app.n);
    }
    int32_t *ids = n_ids ? malloc((size_t)n_ids * sizeof *ids) : NULL;
    if (n_ids && !ids) {
        free(app_copy);
        return tg_fail(err, "out of memory for %" PRIu64 " tokens", n_ids);
    }
    for (uint64_t i = 0; i < n_ids; i++) {
        ids[i] = (int32_t)tg_r_u32(&sess);
        if (ids[i] < 0 || ids[i] >= V) {
            free(ids);
            free(app_copy);
            return corrupt(err, "a token id is outside the vocabulary");
        }
    }
    /* from here on s changes: a failure leaves it empty */
    bool ok = tg_kvcache_load_state(c, &cache, (int64_t)n_ids, err);
    if (!ok && err && err->code == TG_ERR_OTHER) err->code = TG_ERR_SNAPSHOT_CORRUPT;
    if (ok && cache.off != cache.n) ok = corrupt(err, "the cache section is longer than its state");
    if (ok) ok = t->commit(t->holder, ids, (size_t)n_ids, err);
    free(ids);
    if (!ok) {
        free(app_copy);
        t->empty(t->holder);
        return false;
    }
    if (has_smpl && sampler) {
        const size_t n_hist = (size_t)hist_cap;
        int32_t *hist = n_hist ? malloc(n_hist * sizeof *hist) : NULL;
        if (n_hist && !hist) {
            free(app_copy);
            t->empty(t->holder);
            return tg_fail(err, "out of memory for the sampler's history");
        }
        for (size_t i = 0; i < n_hist; i++) hist[i] = (int32_t)tg_r_u32(&smpl); /* ids outside the vocabulary are
                                                                                  * skipped by the sampler */
        tg_sampler_set_state(sampler, rng, hist, n_hist);
        free(hist);
    }
    if (has_lg && logits) {
        for (int32_t i = 0; i < V; i++) {
            const uint32_t u = tg_r_u32(&lg);
            memcpy(&logits[i], &u, 4);
        }
    }
    out->has_logits = has_lg && logits;
    out->app = app_copy;
    out->app_len = app_copy ? app.n : 0;
    return true;
}

static bool session_commit(void *holder, const int32_t *ids, size_t n, tg_error *err) {
    return tg_session_set_history(holder, ids, n, err);
}

static void session_empty(void *holder) { tg_session_reset(holder); }

bool tg_session_restore(tg_session *s, const void *buf, size_t len, tg_snapshot_restore *out, tg_error *err) {
    if (!s || !buf) return tg_fail(err, "no session or no snapshot");
    const restore_target t = {s, session_commit, session_empty};
    return restore_core(tg_session_model(s), tg_session_kvcache(s), &t, buf, len, out, err);
}

/* A sequence restored: its position and, when the caller asked, a copy of the tokens. */
typedef struct {
    tg_sequence *q;
    int32_t **ids;
    size_t *n;
} sequence_holder;

static bool sequence_commit(void *holder, const int32_t *ids, size_t n, tg_error *err) {
    sequence_holder *h = holder;
    if (h->ids) {
        *h->ids = malloc((n ? n : 1) * sizeof **h->ids);
        if (!*h->ids) return tg_fail(err, "out of memory for %zu tokens", n);
        if (n) memcpy(*h->ids, ids, n * sizeof *ids);
    }
    if (h->n) *h->n = n;
    tg_sequence_set_position(h->q, (int64_t)n);
    return true;
}

static void sequence_empty(void *holder) { tg_sequence_empty(((sequence_holder *)holder)->q); }

bool tg_sequence_restore(tg_sequence *q, const void *buf, size_t len, tg_snapshot_restore *out, int32_t **ids,
                         size_t *n, tg_error *err) {
    if (ids) *ids = NULL;
    if (n) *n = 0;
    if (!q || !buf) return tg_fail(err, "no sequence or no snapshot");
    sequence_holder h = {q, ids, n};
    const restore_target t = {&h, sequence_commit, sequence_empty};
    return restore_core(tg_sequence_model(q), tg_sequence_kvcache(q), &t, buf, len, out, err);
}

bool tg_snapshot_tokens(const void *buf, size_t len, int32_t **ids, size_t *n, tg_error *err) {
    if (!buf || !ids || !n) return tg_fail(err, "no snapshot");
    *ids = NULL;
    *n = 0;
    tg_rbytes r, model, policy, sess;
    if (!read_header(buf, len, &r, err) || !next_section(&r, TAG_MODEL, false, &model, NULL, err) ||
        !next_section(&r, TAG_POLICY, false, &policy, NULL, err) ||
        !next_section(&r, TAG_SESSION, false, &sess, NULL, err))
        return false;
    const uint64_t n_ids = tg_r_u64(&sess);
    if (!sess.ok || n_ids > (sess.n - sess.off) / 4 || (sess.n - sess.off) != n_ids * 4)
        return corrupt(err, "the token list does not match its section's length");
    int32_t *out = malloc((n_ids ? (size_t)n_ids : 1) * sizeof *out);
    if (!out) return tg_fail(err, "out of memory for %" PRIu64 " tokens", n_ids);
    for (uint64_t i = 0; i < n_ids; i++) out[i] = (int32_t)tg_r_u32(&sess);
    *ids = out;
    *n = (size_t)n_ids;
    return true;
}
