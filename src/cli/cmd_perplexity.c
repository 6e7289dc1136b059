/* cmd_perplexity.c — `tinygpt perplexity MODEL FILE`: teacher-forced evaluation through the same cached decode path
 * that `sample` uses. Token t's distribution is the logits row the session returns for the token before it, against
 * the cache as it stands after tokens < t were appended (quantised, evicted and re-positioned exactly as in
 * generation: the forward pass appends and attends token by token inside a chunk, so chunking changes nothing).
 * Prints perplexity, mean NLL, tokens/s; optionally per-position NLL as CSV, and the KL divergence and top-1
 * agreement against a base cache (fp32 by default) with the same length policy, run in lockstep; optionally the
 * attention-sink meter (where each head's softmax mass goes, attention_meter.h). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/attention_meter.h"
#include "cli/bundled.h"
#include "cli/cache_errors.h"
#include "cli/cli.h"
#include "cli/interrupt.h"
#include "cli/text.h"
#include "util/clock.h"

static const char USAGE[] =
    "usage: tinygpt perplexity [MODEL] FILE [options]\n"
    "\n"
    "Without MODEL, the bundled model " TG_BUNDLED_MODEL " next to the executable.\n"
    "Teacher-forced evaluation of FILE through the KV cache, exactly as `sample` would decode it: the logits for\n"
    "token t are computed against the cache as it stands after tokens < t were appended. Every token after the first\n"
    "is scored. Without a bounded cache a text longer than the context is cut into independent segments of the\n"
    "context length (a fresh cache each; the last logits of a segment score the first token of the next one);\n"
    "with --streaming-llm-window (or --kv-budget) it streams through one cache.\n"
    "\n"
    "  --max-tokens N          use the first N tokens of FILE (default: all); only as much of FILE is read as\n"
    "                          that needs. FILE is read up to " TG_TEXT_FILE_LIMIT_TEXT " (a pipe or device too)\n"
    "  --ids                   FILE holds token ids separated by white space, not text\n"
    "  --csv PATH              per-position lines: index,context,token,nll[,kl,top1] (index = the scored token's\n"
    "                          place in the text, context = tokens before it in the same cache)\n"
    "  --kl-base P             also the mean KL(base || this) and top-1 agreement against a cache of precision P\n"
    "                          (normally fp32) with the same length policy (sinks, window, re-positioning,\n"
    "                          context), run in lockstep over the same tokens\n"
    "  --every K               score only the tokens whose index is a multiple of K (default 1)\n"
    "  --recompute-window W    the slow oracle: each scored token is predicted by re-running its last W tokens\n"
    "                          from an empty cache (sliding window with recomputation); use with --every\n"
    "  --no-context-limit      an unbounded cache holds the whole text, at RoPE positions beyond the training\n"
    "                          context (for the long-context experiment)\n"
    "  --context N             tokens an unbounded cache holds, and so the length of the independent segments,\n"
    "                          instead of the model's context (for a model whose file states more than it was\n"
    "                          trained on)\n"
    "  --chunk N               tokens per session call (default 64; 1 = token by token, same numbers)\n"
    "  --threads N             worker threads, 0 = all cores (default 0)\n"
    "  --attention-stats       the attention-sink meter: per layer and head, the mean share of the softmax mass on\n"
    "                          the first 1 / 4 / 16 tokens the query sees (held sinks first, then the held window,\n"
    "                          oldest first) and on the newest 16, over the queries that see at least 32 tokens\n"
    "                          (attn_summary, attn_head lines after the summary; docs/kvcache.md)\n"
    "  --attention-csv PATH    the meter's per-head numbers as CSV (layer,head,queries,first1,first4,first16,\n"
    "                          newest16); implies --attention-stats\n"
    "  --quiet                 no progress line on stderr\n"
    "\n";

typedef struct {
    const char *model_path, *text_path, *csv_path, *attn_csv_path;
    char model_buf[4200]; /* the bundled model's path when no MODEL is given */
    int64_t max_tokens; /* 0 = all */
    int64_t every;
    int64_t recompute;  /* window of the recomputation oracle, 0 = off */
    int64_t chunk;
    int threads;
    bool ids_file, no_context_limit, quiet, attention;
    bool kl;
    tg_kv_precision base_precision;
    tg_cache_params cache;
} ppl_args;

/* Parses the flags into a; returns TG_EXIT_OK to go on, -1 for --help, or the status to exit with. */
static int parse_ppl_args(int argc, char **argv, ppl_args *a) {
    int64_t max_tokens = 0, every = 1, recompute = 0, chunk = 64, threads = 0, context = 0;
    const char *csv = NULL, *attn_csv = NULL;
    bool ids = false, no_limit = false, quiet = false, attention = false;
    tg_kv_precision base = TG_KV_FP32;
    enum { O_MAX, O_IDS, O_CSV, O_KL, O_EVERY, O_RECOMP, O_NOLIMIT, O_CHUNK, O_THREADS, O_QUIET, O_ATTN, O_ATTN_CSV, O_CONTEXT, O_OWN };
    tg_opt o[O_OWN + TG_CACHE_OPT_COUNT] = {
        [O_MAX] = {.name = "--max-tokens", .kind = TG_OPT_INT, .dest = &max_tokens, .lo = 2, .hi = INT64_MAX},
        [O_IDS] = {.name = "--ids", .kind = TG_OPT_FLAG, .dest = &ids},
        [O_CSV] = {.name = "--csv", .kind = TG_OPT_STRING, .dest = &csv},
        [O_KL] = {.name = "--kl-base", .kind = TG_OPT_PRECISION, .dest = &base},
        [O_EVERY] = {.name = "--every", .kind = TG_OPT_INT, .dest = &every, .lo = 1, .hi = INT64_MAX},
        [O_RECOMP] = {.name = "--recompute-window", .kind = TG_OPT_INT, .dest = &recompute, .lo = 1,
                      .hi = INT32_MAX},
        [O_NOLIMIT] = {.name = "--no-context-limit", .kind = TG_OPT_FLAG, .dest = &no_limit},
        [O_CHUNK] = {.name = "--chunk", .kind = TG_OPT_INT, .dest = &chunk, .lo = 1, .hi = 4096},
        [O_THREADS] = {.name = "--threads", .kind = TG_OPT_INT, .dest = &threads, .lo = 0, .hi = 4096},
        [O_QUIET] = {.name = "--quiet", .kind = TG_OPT_FLAG, .dest = &quiet},
        [O_ATTN] = {.name = "--attention-stats", .kind = TG_OPT_FLAG, .dest = &attention},
        [O_ATTN_CSV] = {.name = "--attention-csv", .kind = TG_OPT_STRING, .dest = &attn_csv},
        [O_CONTEXT] = {.name = "--context", .kind = TG_OPT_INT, .dest = &context, .lo = 1, .hi = INT32_MAX},
    };
    tg_cache_flags cf;
    const char *pos[2];
    size_t n_pos = 0;
    const int parsed = tg_cache_args_parse("perplexity", argc, argv, o, O_OWN, &cf, pos, 2, &n_pos);
    if (parsed != TG_EXIT_OK) return parsed;
    if (n_pos < 1) return tg_usage_error("perplexity", "expected [MODEL] FILE (see tinygpt perplexity --help)");
    a->model_path = tg_model_or_bundled(n_pos == 2 ? pos[0] : NULL, "perplexity", a->model_buf, sizeof a->model_buf);
    if (!a->model_path) return TG_EXIT_ERROR;
    a->text_path = pos[n_pos - 1];
    a->csv_path = csv;
    a->max_tokens = max_tokens;
    a->every = every;
    a->recompute = recompute;
    a->chunk = chunk;
    a->threads = (int)threads;
    a->ids_file = ids;
    a->no_context_limit = no_limit;
    a->quiet = quiet;
    a->attention = attention || attn_csv;
    a->attn_csv_path = attn_csv;
    a->kl = o[O_KL].seen;
    a->base_precision = base;
    if (!tg_cache_flags_params("perplexity", &cf, o + O_OWN, &a->cache)) return TG_EXIT_USAGE;
    if (context > 0) a->cache.context = context;
    if (recompute > 0 && (a->cache.window > 0 || a->cache.budget_bytes > 0))
        return tg_usage_error("perplexity", "--recompute-window re-runs each window from an empty cache: it does not "
                                            "combine with --streaming-llm-window or --kv-budget");
    if (recompute > 0 && a->attention)
        return tg_usage_error("perplexity", "--attention-stats meters one pass over the text: it does not combine "
                                            "with --recompute-window");
    if (recompute > 0 && no_limit)
        return tg_usage_error("perplexity", "--recompute-window and --no-context-limit do not combine: the window "
                                            "must fit the context");
    return TG_EXIT_OK;
}

/* ---- the tokens ------------------------------------------------------------------------------------------------ */

/* Parses white-space separated token ids in [0, vocab) from text[0 .. len) (text[len] is a NUL; a NUL byte before
 * it is not an id); false (message printed) on anything else. */
static bool parse_ids(const char *path, const char *text, size_t len, int32_t vocab, int32_t **ids, size_t *n) {
    size_t cap = 256, count = 0;
    int32_t *out = malloc(cap * sizeof *out);
    const char *p = text;
    while (out) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',') p++;
        if (p == text + len) {
            *ids = out;
            *n = count;
            return true;
        }
        char *end = NULL;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        size_t word = strcspn(p, " \t\r\n,");
        int shown = word > 20 ? 20 : (int)word;
        bool is_integer = end != p && (size_t)(end - p) == word;
        if (!is_integer || errno != 0 || v < 0 || v >= vocab) {
            if (!is_integer)
                tg_runtime_error("%s: entry %zu ('%.*s%s') is not a token id (a decimal integer)", path, count + 1,
                                 shown, p, word > 20 ? "..." : "");
            else
                tg_runtime_error("%s: entry %zu is token id %.*s%s, outside the model's vocabulary [0, %" PRId32 ")",
                                 path, count + 1, shown, p, word > 20 ? "..." : "", vocab);
            free(out);
            return false;
        }
        if (count == cap) {
            int32_t *bigger = realloc(out, 2 * cap * sizeof *out);
            if (!bigger) break;
            out = bigger;
            cap *= 2;
        }
        out[count++] = (int32_t)v;
        p = end;
    }
    free(out);
    tg_runtime_error("out of memory");
    return false;
}

/* Bytes first read from FILE when --max-tokens bounds what is needed (doubled until enough tokens come out), and the
 * tokens that must come out beyond --max-tokens before the rest of the file is left unread: a prefix may tokenise
 * differently from the whole text only near its cut, well within this margin of tokens. */
#define FIRST_READ ((size_t)64 << 10)
#define TOKEN_MARGIN 256

/* The tokens of FILE into *ids / *n_ids: text tokenised, or ids parsed (--ids). With --max-tokens only a prefix is
 * read (64 KiB, doubled while it yields fewer than max_tokens + TOKEN_MARGIN tokens); *whole tells whether the
 * whole file was read, *n_bytes how many bytes were. At most TG_TEXT_FILE_LIMIT bytes are read. False (message
 * printed) on error. */
static bool load_tokens(const ppl_args *a, const tg_model *model, int32_t **ids, size_t *n_ids, bool *whole,
                        size_t *n_bytes) {
    char msg[512];
    tg_text_reader r;
    if (!tg_text_reader_open(&r, a->text_path, TG_TEXT_FILE_LIMIT, msg, sizeof msg)) {
        tg_runtime_error("%s", msg);
        return false;
    }
    const size_t enough = a->max_tokens > 0 ? (size_t)a->max_tokens + TOKEN_MARGIN : SIZE_MAX;
    size_t want = a->max_tokens > 0 ? FIRST_READ : SIZE_MAX;
    bool ok = true;
    *ids = NULL;
    for (;;) {
        if (!tg_text_reader_fill(&r, a->text_path, want, msg, sizeof msg)) {
            tg_runtime_error("%s", msg);
            ok = false;
            break;
        }
        if (a->ids_file) {
            /* before the end of the file, only the ids that a separator ends (the last one may be cut) */
            size_t use = r.len;
            if (!r.eof)
                while (use > 0 && !strchr(" \t\n\r,", r.buf[use - 1])) use--;
            const char saved = r.buf[use];
            r.buf[use] = '\0';
            ok = parse_ids(a->text_path, r.buf, use, tg_vocab_size(model), ids, n_ids);
            r.buf[use] = saved;
        } else {
            tg_error err = {0};
            ok = tg_tokenize(model, r.buf, r.len, tg_model_adds_bos(model), ids, n_ids, &err);
            if (!ok) tg_runtime_error("%s", err.msg);
        }
        if (!ok || r.eof || *n_ids >= enough) break;
        free(*ids);
        *ids = NULL;
        want = want > SIZE_MAX / 2 ? SIZE_MAX : want * 2;
    }
    *whole = r.eof;
    *n_bytes = r.len;
    tg_text_reader_close(&r);
    if (!ok) {
        free(*ids);
        *ids = NULL;
    }
    return ok;
}

/* ---- scoring --------------------------------------------------------------------------------------------------- */

/* Log-sum-exp of logits[n] (terms by expf, which is exact to an ulp and several times faster than exp, summed in
 * double), and the index of the first maximum. */
static double log_sum_exp(const float *logits, int64_t n, int64_t *argmax) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    const float m = logits[best];
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)expf(logits[i] - m);
    if (argmax) *argmax = best;
    return m + log(s);
}

/* KL(P || Q) = sum_i p_i (log p_i - log q_i) of the softmaxes of base (P) and test (Q), given their log-sum-exps. */
static double kl_div(const float *base, double lse_b, const float *test, double lse_t, int64_t n) {
    double kl = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const double lp = (double)base[i] - lse_b, lq = (double)test[i] - lse_t;
        kl += (double)expf((float)lp) * (lp - lq);
    }
    return kl > 0.0 ? kl : 0.0; /* rounding can make a zero divergence slightly negative */
}

/* One evaluation: the tokens, the sessions' settings, the running totals and the outputs. */
typedef struct {
    const ppl_args *a;
    const tg_model *model;
    const int32_t *ids;       /* [n_ids] the text */
    int64_t n_ids;
    int64_t vocab;
    int64_t context;          /* tokens an unbounded cache holds */
    tg_cache_params params;   /* the cache under test */
    float *lt, *lb;           /* [chunk, vocab] logits of the test / base session */
    FILE *csv;
    double sum_nll, sum_nll_base, sum_kl;
    int64_t n_scored, n_agree, to_score;
    int64_t fed;              /* tokens fed to the test session */
    double t_test, t_base;    /* seconds spent in tg_session_eval of the test / base session */
    double t_start, t_progress;
    bool tty;
    tg_cache_report rep, rep_base; /* of the first sessions, for the summary */
    bool have_rep;
    tg_attention_totals attn;      /* --attention-stats: the meter's totals over the test sessions */
} ppl_eval;

/* Scores the token at `index` (given `context` tokens before it in its cache) from its logits rows. */
static bool score(ppl_eval *e, const float *lt, const float *lb, int64_t index, int64_t context) {
    const int32_t target = e->ids[index];
    int64_t top_t = 0, top_b = 0;
    const double lse_t = log_sum_exp(lt, e->vocab, &top_t);
    const double nll = lse_t - (double)lt[target];
    e->sum_nll += nll;
    e->n_scored++;
    double kl = 0.0;
    if (lb) {
        const double lse_b = log_sum_exp(lb, e->vocab, &top_b);
        e->sum_nll_base += lse_b - (double)lb[target];
        kl = kl_div(lb, lse_b, lt, lse_t, e->vocab);
        e->sum_kl += kl;
        e->n_agree += top_t == top_b;
    }
    if (!e->csv) return true;
    int w = lb ? fprintf(e->csv, "%" PRId64 ",%" PRId64 ",%" PRId32 ",%.9g,%.9g,%d\n", index, context, target, nll, kl,
                         top_t == top_b)
               : fprintf(e->csv, "%" PRId64 ",%" PRId64 ",%" PRId32 ",%.9g\n", index, context, target, nll);
    if (w < 0) {
        tg_runtime_error("writing %s: %s", e->a->csv_path, strerror(errno));
        return false;
    }
    return true;
}

static void progress(ppl_eval *e, bool final) {
    if (e->a->quiet) return;
    const double t = tg_monotonic_s();
    if (!final && t - e->t_progress < (e->tty ? 1.0 : 30.0)) return;
    e->t_progress = t;
    const double ppl = e->n_scored ? exp(e->sum_nll / (double)e->n_scored) : 0.0;
    const double el = t - e->t_start;
    fprintf(stderr, "%sperplexity: %" PRId64 "/%" PRId64 " scored, ppl %.4f, %.0f tokens/s, %.0f s%s",
            e->tty ? "\r" : "", e->n_scored, e->to_score, ppl, el > 0 ? (double)e->fed / el : 0.0, el,
            e->tty && !final ? "" : "\n");
    fflush(stderr);
}

/* A session for the test policy, and (with --kl-base) one for the base policy with the test's resolved length
 * policy. NULL on failure (message printed). */
static tg_session *new_session(ppl_eval *e, bool base, const tg_cache_report *test_rep) {
    tg_cache_params p = e->params;
    if (base) {
        p.key_precision = p.value_precision = e->a->base_precision;
        p.quantize_sinks = false;
        p.budget_bytes = 0; /* the test's budget resolved into its window: the same window at the base precision */
        p.window = test_rep->window;
        p.sink = test_rep->window > 0 ? test_rep->sink : -1;
    }
    tg_error err = {0};
    tg_session *s = tg_session_new(e->model, &p, e->a->threads, &err);
    if (!s) {
        tg_cli_word_error(&err, &p);
        tg_runtime_error("%s", err.msg);
    }
    return s;
}

/* Feeds ids[start .. start + n) through fresh sessions, chunk by chunk, scoring each row's next token. With
 * only_last, one call for the whole span and only its last row is scored (the recomputation oracle). */
static bool eval_span(ppl_eval *e, int64_t start, int64_t n, bool only_last) {
    tg_session *st = new_session(e, false, NULL), *sb = NULL;
    if (!st) return false;
    tg_error rerr = {0};
    if (!tg_session_reserve(st, n, &rerr)) { /* the span's cache now: the summary reports it, limits fail here */
        tg_cli_word_error(&rerr, &e->params);
        tg_runtime_error("%s", rerr.msg);
        tg_session_free(st);
        return false;
    }
    tg_cache_report rep;
    tg_session_cache_report(st, &rep);
    tg_error merr = {0};
    if (e->a->attention && !tg_session_meter_attention(st, &merr)) {
        tg_runtime_error("%s", merr.msg);
        tg_session_free(st);
        return false;
    }
    if (e->a->kl) {
        sb = new_session(e, true, &rep);
        if (!sb || !tg_session_reserve(sb, n, &rerr)) {
            if (sb) {
                tg_cli_word_error(&rerr, &e->params);
                tg_runtime_error("%s", rerr.msg);
            }
            tg_session_free(sb);
            tg_session_free(st);
            return false;
        }
    }
    if (!e->have_rep) {
        e->rep = rep;
        if (sb) tg_session_cache_report(sb, &e->rep_base);
        e->have_rep = true;
    }
    bool ok = true;
    tg_error err = {0};
    const int64_t chunk = only_last ? n : e->a->chunk;
    for (int64_t done = 0; done < n && ok && !tg_interrupted();) {
        const int64_t c = n - done < chunk ? n - done : chunk;
        const int32_t *in = e->ids + start + done;
        double t0 = tg_monotonic_s();
        ok = tg_session_eval(st, in, (size_t)c, only_last ? NULL : e->lt, only_last ? e->lt : NULL, &err);
        double t1 = tg_monotonic_s();
        e->t_test += t1 - t0;
        e->fed += c;
        if (ok && sb) {
            ok = tg_session_eval(sb, in, (size_t)c, only_last ? NULL : e->lb, only_last ? e->lb : NULL, &err);
            e->t_base += tg_monotonic_s() - t1;
        }
        if (!ok) {
            tg_cli_word_error(&err, NULL);
            tg_runtime_error("%s", err.msg);
            break;
        }
        for (int64_t r = only_last ? c - 1 : 0; r < c && ok; r++) {
            const int64_t index = start + done + r + 1; /* the token this row predicts */
            if (index % e->a->every != 0) continue;
            const int64_t row = only_last ? 0 : r;
            ok = score(e, e->lt + row * e->vocab, sb ? e->lb + row * e->vocab : NULL, index, index - start);
        }
        done += c;
        progress(e, false);
    }
    tg_attention_stats stats;
    if (e->a->attention && tg_session_attention_stats(st, &stats)) tg_attention_totals_add(&e->attn, &stats);
    tg_session_free(sb);
    tg_session_free(st);
    return ok;
}

/* Runs the evaluation the flags ask for over e->ids. */
static bool evaluate(ppl_eval *e) {
    const ppl_args *a = e->a;
    const int64_t n_inputs = e->n_ids - 1; /* the last token is only a target */
    e->to_score = (e->n_ids - 1) / a->every; /* indices 1 .. n_ids - 1 that are multiples of every */
    if (a->recompute > 0) {
        if (a->recompute > e->context) {
            tg_runtime_error("--recompute-window %" PRId64 " is longer than the context (%" PRId64 " tokens)",
                             a->recompute, e->context);
            return false;
        }
        for (int64_t index = a->every; index < e->n_ids && !tg_interrupted(); index += a->every) {
            const int64_t from = index > a->recompute ? index - a->recompute : 0;
            if (!eval_span(e, from, index - from, true)) return false;
        }
        return true;
    }
    const bool bounded = e->params.window > 0 || e->params.budget_bytes > 0;
    const int64_t span = bounded ? n_inputs : e->context;
    for (int64_t start = 0; start < n_inputs && !tg_interrupted(); start += span) {
        const int64_t n = n_inputs - start < span ? n_inputs - start : span;
        if (!eval_span(e, start, n, false)) return false;
    }
    return true;
}

/* n_bytes > 0: only the file's first n_bytes were read (--max-tokens), giving n_tokens. */
static void print_summary(const ppl_eval *e, size_t n_tokens, size_t n_bytes, double seconds) {
    const ppl_args *a = e->a;
    const bool bounded = e->params.window > 0 || e->params.budget_bytes > 0;
    const double mean = e->n_scored ? e->sum_nll / (double)e->n_scored : NAN;
    printf("model           %s\n", a->model_path);
    if (n_bytes > 0)
        printf("text            %s (%zu tokens in its first %zu bytes, %" PRId64 " used)\n", a->text_path, n_tokens,
               n_bytes, e->n_ids);
    else
        printf("text            %s (%zu tokens, %" PRId64 " used)\n", a->text_path, n_tokens, e->n_ids);
    printf("cache           %s\n", e->rep.policy);
    tg_cache_params bf = e->params;
    bf.key_precision = bf.value_precision = TG_KV_BF16;
    tg_error err = {0};
    printf("cache_bytes     %zu (allocated for %" PRId64 " tokens; bf16: %zu)\n", e->rep.bytes_total,
           e->rep.allocated_for, tg_cache_bytes(e->model, &bf, e->rep.allocated_for, &err));
    if (a->recompute > 0)
        printf("protocol        sliding window with recomputation: each scored token re-runs its last %" PRId64
               " tokens from an empty cache\n", a->recompute);
    else if (bounded)
        printf("protocol        one stream through the bounded cache\n");
    else if (e->n_ids - 1 > e->context)
        printf("protocol        independent segments of %" PRId64 " tokens, a fresh cache each\n", e->context);
    else
        printf("protocol        one stream (the text fits the cache)\n");
    if (a->every > 1) printf("subsample       every %" PRId64 "th token scored\n", a->every);
    if (tg_interrupted())
        printf("interrupted     Ctrl-C after %" PRId64 " of %" PRId64 " tokens: the numbers below are of those\n",
               e->n_scored, e->to_score);
    printf("scored          %" PRId64 "\n", e->n_scored);
    printf("mean_nll        %.6f\n", mean);
    printf("perplexity      %.4f\n", exp(mean));
    if (a->kl && e->n_scored) {
        const double mb = e->sum_nll_base / (double)e->n_scored;
        printf("base            %s\n", e->rep_base.policy);
        printf("base_mean_nll   %.6f\n", mb);
        printf("base_perplexity %.4f\n", exp(mb));
        printf("ppl_increase    %.4f %%\n", 100.0 * (exp(mean - mb) - 1.0));
        printf("kl_mean         %.6g\n", e->sum_kl / (double)e->n_scored);
        printf("top1_agree      %.4f %%\n", 100.0 * (double)e->n_agree / (double)e->n_scored);
    }
    printf("tokens_per_s    %.1f (%" PRId64 " tokens in %.2f s%s)\n", e->t_test > 0 ? (double)e->fed / e->t_test : 0.0,
           e->fed, e->t_test, a->kl ? ", base session not counted" : "");
    printf("seconds         %.2f\n", seconds);
    if (a->attention) tg_attention_totals_print(stdout, &e->attn);
}

int tg_cmd_perplexity(int argc, char **argv) {
    ppl_args a = {0};
    int status = parse_ppl_args(argc, argv, &a);
    if (tg_help_printed(&status, USAGE) || status != TG_EXIT_OK) return status;

    const double t_start = tg_monotonic_s();
    tg_error err = {0};
    tg_model *model = tg_model_load(a.model_path, &err);
    if (!model) return tg_runtime_error("%s", err.msg);
    tg_model_info info;
    tg_model_get_info(model, &info);
    if (!info.has_weights) {
        tg_model_free(model);
        return tg_runtime_error("%s has no weights (a vocab-only file): it can tokenize but not run", a.model_path);
    }
    int32_t *ids = NULL;
    size_t n_ids = 0, n_bytes = 0;
    bool whole = true;
    bool ok = load_tokens(&a, model, &ids, &n_ids, &whole, &n_bytes);
    if (!ok) {
        tg_model_free(model);
        return TG_EXIT_ERROR;
    }
    const size_t n_all = n_ids;
    if (a.max_tokens > 0 && (size_t)a.max_tokens < n_ids) n_ids = (size_t)a.max_tokens;
    if (n_ids < 2) {
        free(ids);
        tg_model_free(model);
        return tg_runtime_error("%s has %zu token%s: at least 2 are needed to score one", a.text_path, n_ids,
                                n_ids == 1 ? "" : "s");
    }

    if ((int64_t)(n_ids - 1) < a.every) {
        free(ids);
        tg_model_free(model);
        return tg_runtime_error("--every %" PRId64 " scores nothing: the %zu tokens used of %s have scored indices 1 "
                                "to %zu; use a smaller --every", a.every, n_ids, a.text_path, n_ids - 1);
    }

    ppl_eval e = {
        .a = &a,
        .model = model,
        .ids = ids,
        .n_ids = (int64_t)n_ids,
        .vocab = tg_vocab_size(model),
        .context = a.cache.context > 0 ? a.cache.context : info.context_length,
        .params = a.cache,
        .tty = isatty(STDERR_FILENO),
    };
    if (a.no_context_limit && (int64_t)n_ids - 1 > e.context) e.params.context = e.context = (int64_t)n_ids - 1;
    const int64_t rows = a.recompute > 0 ? 1 : a.chunk;
    e.lt = malloc((size_t)rows * (size_t)e.vocab * sizeof(float));
    e.lb = a.kl ? malloc((size_t)rows * (size_t)e.vocab * sizeof(float)) : NULL;
    if (!e.lt || (a.kl && !e.lb) ||
        (a.attention && !tg_attention_totals_init(&e.attn, info.n_layers, info.n_heads))) {
        ok = false;
        tg_runtime_error("out of memory");
    }
    if (ok && a.csv_path) {
        e.csv = fopen(a.csv_path, "w");
        if (!e.csv) {
            ok = false;
            tg_runtime_error("%s: %s", a.csv_path, strerror(errno));
        } else {
            fputs(a.kl ? "index,context,token,nll,kl,top1\n" : "index,context,token,nll\n", e.csv);
        }
    }
    FILE *attn_csv = NULL; /* opened before the evaluation, so that a bad path fails before any work */
    if (ok && a.attn_csv_path) {
        attn_csv = fopen(a.attn_csv_path, "w");
        if (!attn_csv) {
            ok = false;
            tg_runtime_error("%s: %s", a.attn_csv_path, strerror(errno));
        }
    }
    if (ok) {
        tg_interrupt_catch();
        e.t_start = e.t_progress = tg_monotonic_s();
        ok = evaluate(&e);
        if (ok) progress(&e, true);
        else if (e.tty && !a.quiet) fputc('\n', stderr);
    }
    if (e.csv && fclose(e.csv) != 0 && ok) {
        ok = false;
        tg_runtime_error("writing %s: %s", a.csv_path, strerror(errno));
    }
    if (ok && e.n_scored == 0 && tg_interrupted()) {
        ok = false;
        tg_runtime_error("interrupted before any token was scored");
    }
    if (attn_csv) {
        const bool wrote = !ok || tg_attention_totals_csv(attn_csv, &e.attn);
        if ((fclose(attn_csv) != 0 || !wrote) && ok) {
            ok = false;
            tg_runtime_error("writing %s: %s", a.attn_csv_path, strerror(errno));
        }
    }
    if (ok) print_summary(&e, n_all, whole ? 0 : n_bytes, tg_monotonic_s() - t_start);
    tg_attention_totals_free(&e.attn);
    free(e.lt);
    free(e.lb);
    free(ids);
    tg_model_free(model);
    if (!ok) return tg_interrupted() ? TG_EXIT_INTERRUPTED : TG_EXIT_ERROR;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (errno == EPIPE) return TG_EXIT_OK;
        return tg_runtime_error("writing to stdout: %s", strerror(errno));
    }
    return tg_interrupted() ? TG_EXIT_INTERRUPTED : TG_EXIT_OK;
}
