/* greedy_logits.c — tinygpt's greedy choices and their logits along a token sequence that another implementation
 * generated, to compare greedy decoding with llama.cpp's (tools/llamacpp_compare.py) token by token, without going
 * through text. Not part of the library: a tool built by `make tools` (and under the sanitizers by `make unit-tests`).
 * Uses only the public API (include/tinygpt.h), with an fp32 KV cache.
 *
 *   greedy_logits [--ban-eos] [--logits FILE] MODEL IDS_FILE N_PROMPT [THREADS]
 *
 * IDS_FILE: whitespace-separated token ids, the first N_PROMPT of them the prompt (its BOS included, if any), the
 * rest the reference continuation. The prompt is evaluated, then each reference token in turn (teacher forcing);
 * before each, one line on stdout:  K ARGMAX LOGIT_ARGMAX REF LOGIT_REF  (K = 0, 1, ... the index into the
 * continuation; ARGMAX = tinygpt's greedy choice there, the lowest id among equal logits, as its greedy sampler
 * picks). Where ARGMAX == REF at every K up to some point, tinygpt's own greedy decode produces the same tokens up
 * to that point; at the first K where they differ, LOGIT_ARGMAX - LOGIT_REF is the logit gap of that choice.
 * --ban-eos: the model's end-of-sequence ids never win the argmax, as under llama.cpp's --ignore-eos (which sets
 * their logits to -inf); without it they compete like any id (tinygpt's own --ignore-eos only keeps generating).
 * --logits FILE: every position's whole logit vector (vocab floats, K = 0, 1, ...) written to FILE as raw float32,
 * to compare with tools/llamacpp_dump.cpp's logits.f32 (tools/gap_trace.py).
 * Exit 1 with one line on stderr for a bad file or model. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tinygpt.h"

#define MAX_IDS (1 << 20)

static int read_ids(const char *path, int32_t vocab, int32_t **ids, size_t *n) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "greedy_logits: %s: cannot open: %s\n", path, strerror(errno));
        return 0;
    }
    size_t cap = 256, len = 0;
    int32_t *v = malloc(cap * sizeof *v);
    long long x;
    int ok = v != NULL;
    while (ok && fscanf(f, "%lld", &x) == 1) {
        if (x < 0 || x >= vocab || len >= MAX_IDS) {
            fprintf(stderr, "greedy_logits: %s: id %lld out of range [0, %d) or too many ids\n", path, x, vocab);
            ok = 0;
            break;
        }
        if (len == cap) {
            int32_t *w = realloc(v, 2 * cap * sizeof *v);
            if (!w) {
                ok = 0;
                break;
            }
            v = w;
            cap *= 2;
        }
        v[len++] = (int32_t)x;
    }
    if (ok && !feof(f)) {
        fprintf(stderr, "greedy_logits: %s: not a list of token ids\n", path);
        ok = 0;
    }
    fclose(f);
    if (!ok) {
        free(v);
        return 0;
    }
    *ids = v;
    *n = len;
    return 1;
}

int main(int argc, char **argv) {
    int ban_eos = argc > 1 && strcmp(argv[1], "--ban-eos") == 0;
    argc -= ban_eos;
    argv += ban_eos;
    const char *logits_path = NULL;
    if (argc > 2 && strcmp(argv[1], "--logits") == 0) {
        logits_path = argv[2];
        argc -= 2;
        argv += 2;
    }
    if (argc != 4 && argc != 5) {
        fputs("usage: greedy_logits [--ban-eos] [--logits FILE] MODEL IDS_FILE N_PROMPT [THREADS]\n", stderr);
        return 2;
    }
    char *end;
    long n_prompt = strtol(argv[3], &end, 10);
    int threads = argc == 5 ? atoi(argv[4]) : 1;
    if (*end || n_prompt < 1) {
        fprintf(stderr, "greedy_logits: N_PROMPT '%s' is not a positive integer\n", argv[3]);
        return 2;
    }
    tg_error err = {0};
    tg_model *m = tg_model_load(argv[1], &err);
    if (!m) {
        fprintf(stderr, "greedy_logits: %s\n", err.msg);
        return 1;
    }
    int rc = 1;
    int32_t *ids = NULL;
    size_t n = 0;
    tg_session *s = NULL;
    FILE *lf = NULL;
    const int32_t vocab = tg_vocab_size(m);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    if (!logits || !read_ids(argv[2], vocab, &ids, &n)) goto done;
    if (logits_path && !(lf = fopen(logits_path, "wb"))) {
        fprintf(stderr, "greedy_logits: %s: cannot write: %s\n", logits_path, strerror(errno));
        goto done;
    }
    if ((size_t)n_prompt > n) {
        fprintf(stderr, "greedy_logits: %s holds %zu ids, fewer than the prompt's %ld\n", argv[2], n, n_prompt);
        goto done;
    }
    tg_cache_params cp = tg_cache_default_params();
    cp.key_precision = cp.value_precision = TG_KV_FP32;
    s = tg_session_new(m, &cp, threads, &err);
    if (!s || !tg_session_eval(s, ids, (size_t)n_prompt, NULL, logits, &err)) {
        fprintf(stderr, "greedy_logits: %s\n", err.msg);
        goto done;
    }
    for (size_t k = (size_t)n_prompt; k < n; k++) {
        int32_t best = -1;
        for (int32_t v = 0; v < vocab; v++) {
            if (ban_eos && tg_token_is_eos(m, v)) continue;
            if (best < 0 || logits[v] > logits[best]) best = v;
        }
        printf("%zu %" PRId32 " %.9g %" PRId32 " %.9g\n", k - (size_t)n_prompt, best, logits[best], ids[k],
               logits[ids[k]]);
        if (lf && fwrite(logits, sizeof *logits, (size_t)vocab, lf) != (size_t)vocab) {
            fprintf(stderr, "greedy_logits: %s: write failed\n", logits_path);
            goto done;
        }
        if (k + 1 < n && !tg_session_eval(s, &ids[k], 1, NULL, logits, &err)) {
            fprintf(stderr, "greedy_logits: %s\n", err.msg);
            goto done;
        }
    }
    rc = 0;
done:
    if (lf && fclose(lf) != 0 && rc == 0) {
        fprintf(stderr, "greedy_logits: %s: write failed\n", logits_path);
        rc = 1;
    }
    tg_session_free(s);
    free(ids);
    free(logits);
    tg_model_free(m);
    return rc;
}
