/* op_check.c — each operation of tinygpt's forward pass fed with llama.cpp's own input to it and compared with
 * llama.cpp's own output of it, layer by layer, for one llama.cpp graph dumped by tools/llamacpp_dump.cpp (one
 * position or one prompt batch: its STEP directory). An operation that computes the same function as llama.cpp's
 * differs from it by float rounding only (relative differences near 1e-7); one that computes another function
 * stands out however small its effect downstream. Not part of the library: a diagnostic built by `make tools`, on
 * the library's internal kernels (the ones the forward pass calls, on the calling thread).
 *
 *   op_check MODEL DUMP_DIR POS0 [IDS]
 *
 * DUMP_DIR: the NNN-NAME.f32 files of one graph; POS0: the position of its first token (0 for the prompt batch, N
 * for continuation step K = N - N_PROMPT + 1); IDS: the graph's token ids, comma-separated (checks the embedding rows). The attention is checked on the prompt batch only (POS0 = 0: its
 * graph holds every key and value the queries see): a fresh fp32 tinygpt cache is given llama.cpp's K and V rows
 * (before RoPE) and asked for the attention of llama.cpp's queries (before RoPE), against llama.cpp's kqv_out.
 * Per operation one line: its name, the largest |tinygpt - llama.cpp| over the tensor, that relative to the
 * tensor's largest magnitude, and for matrix products the same for the exact product (tg_matvec_ref, double
 * accumulation) of llama.cpp's input — which engine is nearer the exact result. Exit 1 with one line on stderr for
 * a missing file or a shape that does not match the model. */
#define _POSIX_C_SOURCE 200809L

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cache_shape.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kvcache/kvcache.h"
#include "model/model.h"
#include "tinygpt.h"

typedef struct {
    float *v;
    long long ne[4];
    long long n;
} dumped;

/* The `which`-th (0 = first) tensor named `name` in the graph's order; exits when absent. */
static dumped load(const char *dir, const char *name, int which) {
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "op_check: %s: cannot open\n", dir);
        exit(1);
    }
    char best[512] = "";
    int best_seq = -1, found = 0;
    /* the files' sequence numbers give the order; collect the matches sorted by it */
    int seqs[64], ns = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int seq;
        char nm[400];
        if (sscanf(e->d_name, "%d-%399[^\n]", &seq, nm) != 2) continue;
        size_t l = strlen(nm);
        if (l < 4 || strcmp(nm + l - 4, ".f32") != 0) continue;
        nm[l - 4] = 0;
        if (strcmp(nm, name) == 0 && ns < 64) seqs[ns++] = seq;
    }
    closedir(d);
    for (int i = 0; i < ns; i++)
        for (int j = i + 1; j < ns; j++)
            if (seqs[j] < seqs[i]) {
                int t = seqs[i];
                seqs[i] = seqs[j];
                seqs[j] = t;
            }
    if (which < ns) {
        best_seq = seqs[which];
        found = 1;
    }
    if (!found) {
        fprintf(stderr, "op_check: %s: no tensor '%s' (#%d)\n", dir, name, which);
        exit(1);
    }
    snprintf(best, sizeof best, "%s/%03d-%s.f32", dir, best_seq, name);
    FILE *f = fopen(best, "rb");
    if (!f) {
        fprintf(stderr, "op_check: %s: cannot open\n", best);
        exit(1);
    }
    dumped t = {0};
    char nm[400];
    if (fscanf(f, "%399s %lld %lld %lld %lld", nm, &t.ne[0], &t.ne[1], &t.ne[2], &t.ne[3]) != 5 || fgetc(f) != '\n') {
        fprintf(stderr, "op_check: %s: bad header\n", best);
        exit(1);
    }
    t.n = t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3];
    t.v = malloc((size_t)t.n * sizeof(float));
    if (!t.v || fread(t.v, sizeof(float), (size_t)t.n, f) != (size_t)t.n) {
        fprintf(stderr, "op_check: %s: short file\n", best);
        exit(1);
    }
    fclose(f);
    return t;
}

static void need(const dumped *t, long long n, const char *what) {
    if (t->n != n) {
        fprintf(stderr, "op_check: %s holds %lld floats, the model implies %lld\n", what, t->n, n);
        exit(1);
    }
}

static void report(const char *what, const float *ours, const float *theirs, long long n, const float *exact) {
    double dmax = 0, amax = 0, emax = 0, eours = 0;
    for (long long i = 0; i < n; i++) {
        const double d = fabs((double)ours[i] - theirs[i]);
        if (d > dmax) dmax = d;
        if (fabs(theirs[i]) > amax) amax = fabs(theirs[i]);
        if (exact) {
            const double e = fabs((double)exact[i] - theirs[i]), eo = fabs((double)exact[i] - ours[i]);
            if (e > emax) emax = e;
            if (eo > eours) eours = eo;
        }
    }
    printf("%-22s max|tg - llama| %.3g (rel %.3g)", what, dmax, amax > 0 ? dmax / amax : 0.0);
    if (exact) printf("   max|exact - llama| %.3g  max|exact - tg| %.3g", emax, eours);
    printf("\n");
}

/* y[n, rows] = x[n, cols] W^T as the forward pass computes it, and exactly (double) into ex. */
static void product(const tg_tensor *w, const float *x, long long n, float *y, float *ex) {
    void *scratch = malloc(tg_act_scratch_bytes(n, w->cols) + 64);
    tg_act a = tg_act_prepare(w->type, x, n, w->cols, scratch);
    tg_matmul_rows(w, &a, 0, w->rows, y, (size_t)w->rows);
    for (long long t = 0; t < n; t++) tg_matvec_ref(w, x + t * w->cols, ex + t * w->rows);
    free(scratch);
}

/* Our output of an operation over every row of `in` (dumped-shaped, owned by the caller), compared on the rows
 * llama.cpp kept (`out` may hold only the last rows). */
static dumped ours_like(const dumped *in, int64_t in_cols, int64_t out_cols) {
    dumped y = {0};
    const long long n = in->n / in_cols;
    y.ne[0] = out_cols;
    y.ne[1] = n;
    y.ne[2] = y.ne[3] = 1;
    y.n = n * out_cols;
    y.v = malloc((size_t)y.n * sizeof(float));
    if (!y.v) exit(1);
    return y;
}

static void compare_last(const char *what, const dumped *ours, const dumped *theirs, int64_t cols, const float *ex) {
    const long long n = theirs->n / cols;
    if (theirs->n % cols || ours->n < theirs->n) {
        fprintf(stderr, "op_check: %s: llama.cpp's %lld floats against our %lld\n", what, theirs->n, ours->n);
        exit(1);
    }
    report(what, ours->v + (ours->n - n * cols), theirs->v, n * cols, ex ? ex + (ours->n - n * cols) : NULL);
}

/* How many activation codes (and block scales) differ between x and x2 [n, cols], both quantised for weights of
 * `type` as the forward pass quantises them: where two inputs that differ by float rounding only are rounded to
 * different 8-bit codes. Prints nothing for float-activation types. */
static void count_codes(const tg_tensor *w, const float *x, const float *x2, long long n) {
    const size_t sb = tg_act_scratch_bytes(n, w->cols);
    void *s1 = malloc(sb + 64), *s2 = malloc(sb + 64);
    tg_act a = tg_act_prepare(w->type, x, n, w->cols, s1), b = tg_act_prepare(w->type, x2, n, w->cols, s2);
    long long codes = 0, scales = 0, nc = 0, nsc = 0;
    if (a.xk && b.xk) {
        const long long nb = n * (w->cols / TG_Q8K_ELEMS);
        for (long long i = 0; i < nb; i++) {
            scales += a.xk[i].d != b.xk[i].d;
            for (int j = 0; j < TG_Q8K_ELEMS; j++) codes += a.xk[i].q[j] != b.xk[i].q[j];
        }
        nc = nb * TG_Q8K_ELEMS;
        nsc = nb;
    } else if (a.xq && b.xq) {
        const long long nb = n * (w->cols / TG_QK);
        for (long long i = 0; i < nb; i++) {
            scales += a.xq[i].d != b.xq[i].d;
            for (int j = 0; j < TG_QK; j++) codes += a.xq[i].q[j] != b.xq[i].q[j];
        }
        nc = nb * TG_QK;
        nsc = nb;
    }
    if (nc) printf("%-22s   its input quantised: %lld of %lld codes and %lld of %lld scales differ\n", "", codes, nc,
                   scales, nsc);
    free(s1);
    free(s2);
}

/* theirs_in: llama.cpp's own input to the product (NULL when `in` is it): the codes of both are compared. */
static dumped check_product(const char *what, const tg_tensor *w, const dumped *in, const dumped *out,
                            const dumped *theirs_in) {
    dumped y = ours_like(in, w->cols, w->rows);
    float *ex = malloc((size_t)y.n * sizeof(float));
    product(w, in->v, y.ne[1], y.v, ex);
    char label[64];
    snprintf(label, sizeof label, "%s [%s]", what, tg_dtype_name(w->type));
    compare_last(label, &y, out, w->rows, ex);
    if (theirs_in && theirs_in != in) {
        const long long n = (theirs_in->n < in->n ? theirs_in->n : in->n) / w->cols;
        count_codes(w, in->v + (in->n - n * w->cols), theirs_in->v + (theirs_in->n - n * w->cols), n);
    }
    free(ex);
    return y;
}

static dumped check_norm(const char *what, const float *weight, const dumped *in, const dumped *out, int64_t d,
                         float eps) {
    dumped y = ours_like(in, d, d);
    for (long long t = 0; t < y.ne[1]; t++) tg_rmsnorm(y.v + t * d, in->v + t * d, weight, d, eps);
    compare_last(what, &y, out, d, NULL);
    return y;
}

static dumped check_add(const char *what, const dumped *a, const dumped *b, const dumped *out, int64_t d) {
    const dumped *big = a->n >= b->n ? a : b, *small = a->n >= b->n ? b : a;
    dumped y = ours_like(small, d, d);
    for (long long i = 0; i < y.n; i++) y.v[i] = big->v[big->n - y.n + i] + small->v[i];
    compare_last(what, &y, out, d, NULL);
    return y;
}

int main(int argc, char **argv) {
    const bool chain = argc > 2 && strcmp(argv[1], "--chain") == 0;
    const char *chain_logits = chain ? argv[2] : NULL;
    argc -= 2 * chain;
    argv += 2 * chain;
    if (argc != 4 && argc != 5) {
        fputs("usage: op_check [--chain LOGITS_OUT] MODEL DUMP_DIR POS0 [IDS]\n", stderr);
        return 2;
    }
    const char *dir = argv[2];
    const long long pos0 = atoll(argv[3]);
    tg_error err = {0};
    tg_model *m = tg_model_load(argv[1], &err);
    if (!m) {
        fprintf(stderr, "op_check: %s\n", err.msg);
        return 1;
    }
    const tg_hparams *hp = &m->hp;
    const int64_t d = hp->d_model, D = hp->head_dim, qd = (int64_t)hp->n_heads * D, kvd = (int64_t)hp->n_kv_heads * D;
    dumped embd = load(dir, "embd", 0);
    const long long n = embd.n / d;
    printf("%s: %lld tokens from position %lld\n", dir, n, pos0);
    char nm[64];
    if (argc == 5) {
        float *e = malloc((size_t)embd.n * sizeof(float));
        const char *p = argv[4];
        for (long long t = 0; t < n; t++) {
            char *end;
            const long id = strtol(p, &end, 10);
            if (end == p || id < 0 || id >= hp->vocab_size) {
                fprintf(stderr, "op_check: IDS '%s': not %lld token ids\n", argv[4], n);
                return 1;
            }
            tg_tensor_get_row(&m->tok_embd, id, e + t * d);
            p = *end == ',' ? end + 1 : end;
        }
        char label[64];
        snprintf(label, sizeof label, "embedding [%s]", tg_dtype_name(m->tok_embd.type));
        report(label, e, embd.v, embd.n, NULL);
        free(e);
    }
    /* chain: each operation's input is our own output of the previous one (tinygpt's forward pass, traced); else
     * llama.cpp's (each operation alone) */
#define PICK(ours, theirs) (chain ? &(ours) : &(theirs))
    dumped inp = embd;
    for (int l = 0; l < hp->n_layers; l++) {
        const tg_layer_weights *w = &m->layers[l];
        printf("-- layer %d\n", l);
        snprintf(nm, sizeof nm, "attn_norm-%d", l);
        dumped an = load(dir, nm, 0);
        dumped our_an = check_norm("attn_norm", w->attn_norm, &inp, &an, d, hp->norm_eps);
        snprintf(nm, sizeof nm, "Qcur-%d", l);
        dumped q = load(dir, nm, 0), qrope = load(dir, nm, 2);
        snprintf(nm, sizeof nm, "Kcur-%d", l);
        dumped k = load(dir, nm, 0), krope = load(dir, nm, 2);
        snprintf(nm, sizeof nm, "Vcur-%d", l);
        dumped v = load(dir, nm, 0);
        dumped our_q = check_product("wq", &w->wq, PICK(our_an, an), &q, &an);
        dumped our_k = check_product("wk", &w->wk, PICK(our_an, an), &k, &an);
        dumped our_v = check_product("wv", &w->wv, PICK(our_an, an), &v, &an);
        const dumped *qi = PICK(our_q, q), *ki = PICK(our_k, k), *vi = PICK(our_v, v);
        /* RoPE alone: the unrotated rows through tinygpt's rotation */
        {
            float *qr = malloc((size_t)(n * qd) * sizeof(float)), *kr = malloc((size_t)(n * kvd) * sizeof(float));
            memcpy(qr, qi->v, (size_t)(n * qd) * sizeof(float));
            memcpy(kr, ki->v, (size_t)(n * kvd) * sizeof(float));
            for (long long t = 0; t < n; t++) {
                tg_rope(qr + t * qd, hp->n_heads, (int)D, pos0 + t, hp->rope_theta, hp->rope_style);
                tg_rope(kr + t * kvd, hp->n_kv_heads, (int)D, pos0 + t, hp->rope_theta, hp->rope_style);
            }
            need(&qrope, n * qd, "Qcur (rope)");
            need(&krope, n * kvd, "Kcur (rope)");
            report("rope q", qr, qrope.v, n * qd, NULL);
            report("rope k", kr, krope.v, n * kvd, NULL);
            free(qr);
            free(kr);
        }
        snprintf(nm, sizeof nm, "kqv_out-%d", l);
        dumped ko = load(dir, nm, 0);
        need(&ko, n * qd, "kqv_out");
        dumped our_ko = ours_like(&ko, qd, qd);
        memcpy(our_ko.v, ko.v, (size_t)ko.n * sizeof(float));
        if (pos0 == 0) {
            tg_cache_params cp = tg_cache_default_params();
            cp.key_precision = cp.value_precision = TG_KV_FP32;
            tg_kvcache *c = tg_model_kvcache_new(m, &cp, &err);
            if (!c) {
                fprintf(stderr, "op_check: %s\n", err.msg);
                return 1;
            }
            const int gq = hp->n_heads / hp->n_kv_heads;
            float *qq = malloc((size_t)qd * sizeof(float));
            float *parts = malloc((size_t)TG_ATTN_MAX_SPLITS * tg_kvcache_part_floats(c) * sizeof(float));
            float *work = malloc(tg_kvcache_work_floats(c) * sizeof(float));
            for (long long t = 0; t < n; t++)
                for (int ll = 0; ll < hp->n_layers; ll++) tg_kvcache_append(c, ll, t, ki->v + t * kvd, vi->v + t * kvd);
            for (long long t = 0; t < n; t++) {
                tg_kvcache_query(c, l, t, qi->v + t * qd, qq);
                const int ns = tg_kvcache_attend_splits(c, l, t);
                for (int h = 0; h < hp->n_kv_heads; h++) {
                    for (int s = 0; s < ns; s++)
                        tg_kvcache_attend_piece(c, l, t, qq, h, s, ns, parts + (size_t)s * tg_kvcache_part_floats(c),
                                                work);
                    tg_kvcache_attend_combine(c, parts, ns, our_ko.v + t * qd + (int64_t)h * gq * D);
                }
            }
            report("attention (kqv_out)", our_ko.v, ko.v, n * qd, NULL);
            free(qq);
            free(parts);
            free(work);
            tg_kvcache_free(c);
        } else if (chain) {
            fprintf(stderr, "op_check: --chain needs the prompt batch (POS0 0): the attention needs every key\n");
            return 1;
        }
        snprintf(nm, sizeof nm, "attn_out-%d", l);
        dumped ao = load(dir, nm, 0);
        dumped our_ao = check_product("wo", &w->wo, PICK(our_ko, ko), &ao, &ko);
        snprintf(nm, sizeof nm, "ffn_inp-%d", l);
        dumped fi = load(dir, nm, 0);
        dumped our_fi = check_add("residual (ffn_inp)", PICK(our_ao, ao), &inp, &fi, d);
        snprintf(nm, sizeof nm, "ffn_norm-%d", l);
        dumped fn = load(dir, nm, 0);
        dumped our_fn = check_norm("ffn_norm", w->ffn_norm, PICK(our_fi, fi), &fn, d, hp->norm_eps);
        snprintf(nm, sizeof nm, "ffn_gate-%d", l);
        dumped g = load(dir, nm, 0);
        snprintf(nm, sizeof nm, "ffn_up-%d", l);
        dumped u = load(dir, nm, 0);
        snprintf(nm, sizeof nm, "ffn_swiglu-%d", l);
        dumped sw = load(dir, nm, 0);
        dumped our_g = check_product("w_gate", &w->w_gate, PICK(our_fn, fn), &g, &fn);
        dumped our_u = check_product("w_up", &w->w_up, PICK(our_fn, fn), &u, &fn);
        dumped our_sw = ours_like(PICK(our_g, g), hp->ffn_dim, hp->ffn_dim);
        memcpy(our_sw.v, PICK(our_g, g)->v, (size_t)our_sw.n * sizeof(float));
        tg_swiglu(our_sw.v, PICK(our_u, u)->v, our_sw.n);
        compare_last("swiglu", &our_sw, &sw, hp->ffn_dim, NULL);
        snprintf(nm, sizeof nm, "ffn_out-%d", l);
        dumped fo = load(dir, nm, 0);
        dumped our_fo = check_product("w_down", &w->w_down, PICK(our_sw, sw), &fo, &sw);
        snprintf(nm, sizeof nm, "l_out-%d", l);
        dumped lo = load(dir, nm, 0);
        dumped our_lo = check_add("residual (l_out)", PICK(our_fo, fo), PICK(our_fi, fi), &lo, d);
        inp = *PICK(our_lo, lo);
    }
    printf("-- output\n");
    dumped rn = load(dir, "result_norm", 0), ro = load(dir, "result_output", 0);
    dumped our_rn = check_norm("output_norm", m->out_norm, &inp, &rn, d, hp->norm_eps);
    dumped our_ro = check_product("lm_head", &m->lm_head, PICK(our_rn, rn), &ro, &rn);
    if (chain) { /* our logits of the last token: equal to the engine's (greedy_logits --logits) if the trace is it */
        FILE *f = fopen(chain_logits, "wb");
        if (!f || fwrite(our_ro.v + our_ro.n - hp->vocab_size, sizeof(float), (size_t)hp->vocab_size, f) !=
                      (size_t)hp->vocab_size || fclose(f) != 0) {
            fprintf(stderr, "op_check: %s: cannot write\n", chain_logits);
            return 1;
        }
    }
#undef PICK
    tg_model_free(m);
    return 0;
}
