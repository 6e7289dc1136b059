/* cmd_compare.c — `tinygpt compare MODEL --prompts FILE`: the design note's greedy-prefix-match table. For each
 * prompt, the greedy continuation with an fp32 cache is the reference trajectory; for each cache precision, the
 * table gives how many of its tokens the same greedy decode reproduces before the first divergence, and the mean. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bundled.h"
#include "cli/cache_errors.h"
#include "cli/cli.h"
#include "cli/interrupt.h"
#include "cli/text.h"

static const char USAGE[] =
    "usage: tinygpt compare [MODEL] --prompts FILE [options]\n"
    "\n"
    "Without MODEL, the bundled model " TG_BUNDLED_MODEL " next to the executable.\n"
    "For each prompt (one per line of FILE; empty lines are skipped) the greedy continuation of --tokens tokens\n"
    "with an fp32 cache is the reference. For each precision of --kv-quantize the table gives how many of those\n"
    "tokens the same greedy decode reproduces before the first divergence, and the mean over the prompts. The\n"
    "other cache flags (window, sinks, re-positioning, group, residual) apply to every run, the reference included.\n"
    "Without --kv-residual the KIVI runs keep no full-precision residual (not even int2's default one group), so the\n"
    "table measures what the quantisation itself costs; the header says which residual was used, and a column whose\n"
    "runs never quantised a token (all in the residual and the sinks) is marked so. The end-of-sequence token does\n"
    "not stop a run.\n"
    "\n"
    "  --prompts FILE          the prompts, one per line (at most " TG_TEXT_FILE_LIMIT_TEXT "; the table shows the first\n"
    "                          40 characters of each)\n"
    "  --tokens N              tokens generated per prompt (default 60)\n"
    "  --kv-quantize LIST      comma-separated precisions (default fp16,bf16,int8,int4,int2); an item KEYS/VALUES\n"
    "                          such as int8/int4 sets keys and values apart\n"
    "  --markdown              print the table as Markdown\n"
    "  --threads N             worker threads, 0 = all cores (default 0)\n"
    "\n";

#define MAX_COLUMNS 32
#define PROMPT_CHUNK 64

typedef struct {
    tg_kv_precision k, v;
    char name[24];
} column;

typedef struct {
    const char *model_path, *prompts_path;
    char model_buf[4200]; /* the bundled model's path when no MODEL is given */
    int64_t n_tokens;
    int threads;
    bool markdown;
    column cols[MAX_COLUMNS];
    int n_cols;
    tg_cache_params cache; /* the length policy; precisions are set per column */
    bool residual_given;   /* --kv-residual was passed (otherwise compare's own residual 0) */
} compare_args;

/* Parses "fp16,int8/int4,..." into columns; false (message printed) on a bad item. */
static bool parse_columns(const char *list, compare_args *a) {
    a->n_cols = 0;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char item[32];
        if (n == 0 || n >= sizeof item) {
            tg_usage_error("compare", "--kv-quantize: bad item '%.*s' in '%s'", (int)n, p, list);
            return false;
        }
        memcpy(item, p, n);
        item[n] = '\0';
        if (a->n_cols == MAX_COLUMNS) {
            tg_usage_error("compare", "--kv-quantize: at most %d items", MAX_COLUMNS);
            return false;
        }
        column *c = &a->cols[a->n_cols];
        char *slash = strchr(item, '/');
        if (slash) *slash = '\0';
        if (!tg_kv_precision_parse(item, &c->k) || !tg_kv_precision_parse(slash ? slash + 1 : item, &c->v)) {
            char names[128];
            tg_precision_names(names, sizeof names, " ");
            tg_usage_error("compare", "--kv-quantize: expected %s or KEYS/VALUES, got '%.*s'", names, (int)n, p);
            return false;
        }
        if (c->k == c->v) snprintf(c->name, sizeof c->name, "%s", tg_kv_precision_name(c->k));
        else snprintf(c->name, sizeof c->name, "K %s/V %s", tg_kv_precision_name(c->k), tg_kv_precision_name(c->v));
        a->n_cols++;
        p += n;
        if (*p == ',') p++;
    }
    if (a->n_cols == 0) {
        tg_usage_error("compare", "--kv-quantize: empty list");
        return false;
    }
    return true;
}

static int parse_compare_args(int argc, char **argv, compare_args *a) {
    int64_t tokens = 60, threads = 0;
    const char *prompts = NULL, *list = "fp16,bf16,int8,int4,int2";
    bool markdown = false;
    enum { O_PROMPTS, O_TOKENS, O_LIST, O_MD, O_THREADS, O_OWN };
    /* own options first: this --kv-quantize (a list) shadows the shared single-precision one */
    tg_opt o[O_OWN + TG_CACHE_OPT_COUNT] = {
        [O_PROMPTS] = {.name = "--prompts", .kind = TG_OPT_STRING, .dest = &prompts},
        [O_TOKENS] = {.name = "--tokens", .kind = TG_OPT_INT, .dest = &tokens, .lo = 1, .hi = 1 << 20},
        [O_LIST] = {.name = "--kv-quantize", .kind = TG_OPT_STRING, .dest = &list},
        [O_MD] = {.name = "--markdown", .kind = TG_OPT_FLAG, .dest = &markdown},
        [O_THREADS] = {.name = "--threads", .kind = TG_OPT_INT, .dest = &threads, .lo = 0, .hi = 4096},
    };
    tg_cache_flags cf;
    const char *pos[1];
    size_t n_pos = 0;
    const int parsed = tg_cache_args_parse("compare", argc, argv, o, O_OWN, &cf, pos, 1, &n_pos);
    if (parsed != TG_EXIT_OK) return parsed;
    if (!prompts) return tg_usage_error("compare", "--prompts FILE is required");
    for (size_t i = O_OWN; i < O_OWN + TG_CACHE_OPT_COUNT; i++)
        if (o[i].seen &&
            (strcmp(o[i].name, "--kv-quantize-keys") == 0 || strcmp(o[i].name, "--kv-quantize-values") == 0))
            return tg_usage_error("compare", "%s: give keys and values as an item KEYS/VALUES of --kv-quantize",
                                  o[i].name);
    a->model_path = tg_model_or_bundled(n_pos ? pos[0] : NULL, "compare", a->model_buf, sizeof a->model_buf);
    if (!a->model_path) return TG_EXIT_ERROR;
    a->prompts_path = prompts;
    a->n_tokens = tokens;
    a->threads = (int)threads;
    a->markdown = markdown;
    if (!tg_cache_flags_params("compare", &cf, o + O_OWN, &a->cache)) return TG_EXIT_USAGE;
    for (size_t i = O_OWN; i < O_OWN + TG_CACHE_OPT_COUNT; i++)
        if (o[i].seen && strcmp(o[i].name, "--kv-residual") == 0) a->residual_given = true;
    if (!a->residual_given) a->cache.residual = 0; /* what the quantisation costs, no full-precision residual */
    return parse_columns(list, a) ? TG_EXIT_OK : TG_EXIT_USAGE;
}

/* The prompts: the non-empty lines of the file (a trailing '\r' dropped; a line ends at a NUL byte too), in *lines
 * (malloc'ed array of malloc'ed strings). The file is read up to TG_TEXT_FILE_LIMIT. False (message printed) on
 * error. */
static bool read_prompts(const char *path, char ***lines, size_t *n) {
    char msg[512];
    size_t len = 0;
    char *text = tg_read_text_file(path, TG_TEXT_FILE_LIMIT, &len, msg, sizeof msg);
    if (!text) {
        tg_runtime_error("%s", msg);
        return false;
    }
    char **out = NULL;
    size_t count = 0;
    const bool split = tg_text_lines(text, len, &out, &count);
    free(text);
    if (!split) {
        tg_runtime_error("out of memory");
        return false;
    }
    if (count == 0) {
        tg_text_lines_free(out, count);
        tg_runtime_error("%s: no prompts (one per line)", path);
        return false;
    }
    *lines = out;
    *n = count;
    return true;
}

/* Greedy decode of n_gen tokens after ids[n_ids] with cache params p into out[n_gen]. When ref is non-NULL it stops
 * at the first token that differs from ref and returns how many matched; otherwise returns n_gen. -1 on error
 * (message printed). *quantized (when not NULL): the tokens the cache held in quantised form at the end. */
static int64_t greedy(const tg_model *model, const tg_cache_params *p, int threads, const int32_t *ids, size_t n_ids,
                      int64_t n_gen, const int32_t *ref, int32_t *out, float *logits, tg_sampler *sampler,
                      int64_t *quantized) {
    tg_error err = {0};
    tg_generator_params gp = tg_generator_default_params();
    gp.max_tokens = n_gen;
    gp.ignore_eos = true; /* the reference runs its n_gen tokens whatever they are */
    tg_generator *g = tg_generator_new(model, sampler, &gp, &err);
    tg_session *s = g ? tg_session_new(model, p, threads, &err) : NULL;
    if (!s) {
        tg_generator_free(g);
        tg_cli_word_error(&err, p);
        tg_runtime_error("%s", err.msg);
        return -1;
    }
    for (size_t done = 0; done < n_ids;) {
        size_t c = n_ids - done < PROMPT_CHUNK ? n_ids - done : PROMPT_CHUNK;
        if (!tg_session_eval(s, ids + done, c, NULL, logits, &err)) goto fail;
        done += c;
    }
    if (!tg_generator_start(g, ids, n_ids, false, NULL, NULL, &err)) goto fail;
    int64_t made = 0;
    tg_gen_token t = {.stop = TG_GEN_GOING};
    while (t.stop == TG_GEN_GOING) {
        if (!tg_generator_step(g, logits, &t, &err)) goto fail;
        if (ref && t.id != ref[made]) break;
        out[made++] = t.id;
        if (t.stop != TG_GEN_GOING) break;
        if (tg_session_remaining(s) < 1) {
            snprintf(err.msg, sizeof err.msg,
                     "the context is full after %" PRId64 " tokens; use fewer --tokens or a bounded cache",
                     (int64_t)n_ids + made);
            goto fail;
        }
        if (!tg_session_eval(s, &t.id, 1, NULL, logits, &err)) goto fail;
    }
    if (quantized) {
        tg_cache_report r;
        tg_session_cache_report(s, &r);
        *quantized = r.quantized;
    }
    tg_session_free(s);
    tg_generator_free(g);
    return made;
fail:
    tg_cli_word_error(&err, NULL);
    tg_runtime_error("%s", err.msg);
    tg_session_free(s);
    tg_generator_free(g);
    return -1;
}

static int run_compare(const compare_args *a, const tg_model *model, char **prompts, size_t n_prompts) {
    const int32_t vocab = tg_vocab_size(model);
    int64_t *match = calloc(n_prompts * (size_t)a->n_cols, sizeof *match);
    bool quantized[MAX_COLUMNS] = {false}; /* some run of the column ended with quantised tokens */
    int32_t *ref = malloc((size_t)a->n_tokens * sizeof *ref), *out = malloc((size_t)a->n_tokens * sizeof *out);
    float *logits = malloc((size_t)vocab * sizeof *logits);
    tg_sampler_params sp = tg_sampler_default_params();
    sp.temperature = 0.0f;
    tg_sampler *sampler = tg_sampler_new(&sp, vocab, NULL); /* greedy over a loaded vocabulary: fails only for memory */
    int status = TG_EXIT_OK;
    char ref_policy[256] = "";
    if (!match || !ref || !out || !logits || !sampler) status = tg_runtime_error("out of memory");
    const size_t n_all = n_prompts;
    tg_interrupt_catch();
    for (size_t i = 0; i < n_prompts && status == TG_EXIT_OK; i++) {
        if (tg_interrupted()) { /* Ctrl-C: the table of the prompts measured in full */
            n_prompts = i;
            break;
        }
        int32_t *ids = NULL;
        size_t n_ids = 0;
        tg_error err = {0};
        if (!tg_tokenize(model, prompts[i], strlen(prompts[i]), tg_model_adds_bos(model), &ids, &n_ids, &err)) {
            status = tg_runtime_error("prompt %zu: %s", i + 1, err.msg);
            break;
        }
        tg_cache_params p = a->cache;
        p.key_precision = p.value_precision = TG_KV_FP32;
        if (!ref_policy[0]) {
            tg_session *s = tg_session_new(model, &p, 1, &err);
            if (s) {
                tg_cache_report r;
                tg_session_cache_report(s, &r);
                snprintf(ref_policy, sizeof ref_policy, "%s", r.policy);
            }
            tg_session_free(s);
        }
        if (greedy(model, &p, a->threads, ids, n_ids, a->n_tokens, NULL, ref, logits, sampler, NULL) < 0) {
            status = TG_EXIT_ERROR;
        }
        int c = 0;
        for (; c < a->n_cols && status == TG_EXIT_OK && !tg_interrupted(); c++) {
            p.key_precision = a->cols[c].k;
            p.value_precision = a->cols[c].v;
            int64_t q = 0;
            int64_t m = greedy(model, &p, a->threads, ids, n_ids, a->n_tokens, ref, out, logits, sampler, &q);
            if (m < 0) status = TG_EXIT_ERROR;
            else match[i * (size_t)a->n_cols + (size_t)c] = m;
            if (q > 0) quantized[c] = true;
        }
        free(ids);
        if (status == TG_EXIT_OK && c < a->n_cols) { /* interrupted within this prompt: leave it out */
            n_prompts = i;
            break;
        }
    }
    if (status == TG_EXIT_OK && n_prompts == 0) status = tg_runtime_error("interrupted before a prompt was measured");
    if (status == TG_EXIT_OK) {
        const size_t width = 44;
        if (n_prompts < n_all)
            printf("%sinterrupted: Ctrl-C after %zu of %zu prompts; the table is of those\n", a->markdown ? "" : "# ",
                   n_prompts, n_all);
        printf("%sreference: greedy continuation of %" PRId64 " tokens with %s\n", a->markdown ? "" : "# ",
               a->n_tokens, ref_policy);
        if (a->residual_given)
            printf("%squantised columns: KIVI residual %d (--kv-residual)\n", a->markdown ? "" : "# ", a->cache.residual);
        else
            printf("%squantised columns: no full-precision KIVI residual (compare's default: what the quantisation "
                   "costs; sinks stay full precision)\n", a->markdown ? "" : "# ");
        for (int c = 0; c < a->n_cols; c++)
            if (!quantized[c] && (tg_kv_precision_is_integer(a->cols[c].k) || tg_kv_precision_is_integer(a->cols[c].v)))
                printf("%snote: %s never left the full-precision part (residual and sinks): it measures no "
                       "quantisation\n", a->markdown ? "" : "# ", a->cols[c].name);
        printf("%scells: tokens reproduced before the first divergence (of %" PRId64 ")\n\n",
               a->markdown ? "" : "# ", a->n_tokens);
        if (a->markdown) {
            printf("| prompt |");
            for (int c = 0; c < a->n_cols; c++) printf(" %s |", a->cols[c].name);
            printf("\n|---|");
            for (int c = 0; c < a->n_cols; c++) printf("---:|");
            putchar('\n');
        } else {
            tg_print_padded(stdout, "prompt", width);
            for (int c = 0; c < a->n_cols; c++) printf(" %12s", a->cols[c].name);
            putchar('\n');
        }
        for (size_t i = 0; i < n_prompts; i++) {
            char sp_buf[256];
            tg_text_cell(prompts[i], 40, a->markdown, sp_buf, sizeof sp_buf);
            if (a->markdown) printf("| %s |", sp_buf);
            else tg_print_padded(stdout, sp_buf, width);
            for (int c = 0; c < a->n_cols; c++) {
                int64_t m = match[i * (size_t)a->n_cols + (size_t)c];
                if (a->markdown) printf(" %" PRId64 " |", m);
                else printf(" %12" PRId64, m);
            }
            putchar('\n');
        }
        if (a->markdown) printf("| **mean match** |");
        else tg_print_padded(stdout, "mean match", width);
        for (int c = 0; c < a->n_cols; c++) {
            double sum = 0.0;
            for (size_t i = 0; i < n_prompts; i++) sum += (double)match[i * (size_t)a->n_cols + (size_t)c];
            double pct = 100.0 * sum / ((double)n_prompts * (double)a->n_tokens);
            if (a->markdown) printf(" %.1f %% |", pct);
            else printf(" %10.1f %%", pct);
        }
        putchar('\n');
    }
    tg_sampler_free(sampler);
    free(logits);
    free(out);
    free(ref);
    free(match);
    if (tg_interrupted()) return status == TG_EXIT_OK || n_prompts == 0 ? TG_EXIT_INTERRUPTED : status;
    return status;
}

int tg_cmd_compare(int argc, char **argv) {
    compare_args a = {0};
    int status = parse_compare_args(argc, argv, &a);
    if (status < 0) {
        fputs(USAGE, stdout);
        tg_cache_flags_help(stdout, true); /* compare's own --kv-quantize LIST above takes their place */
        return TG_EXIT_OK;
    }
    if (status != TG_EXIT_OK) return status;
    char **prompts = NULL;
    size_t n_prompts = 0;
    if (!read_prompts(a.prompts_path, &prompts, &n_prompts)) return TG_EXIT_ERROR;
    tg_error err = {0};
    tg_model *model = tg_model_load(a.model_path, &err);
    if (!model) {
        status = tg_runtime_error("%s", err.msg);
    } else {
        tg_model_info info;
        tg_model_get_info(model, &info);
        if (!info.has_weights)
            status = tg_runtime_error("%s has no weights (a vocab-only file): it can tokenize but not run",
                                      a.model_path);
        else
            status = run_compare(&a, model, prompts, n_prompts);
    }
    tg_model_free(model);
    tg_text_lines_free(prompts, n_prompts);
    if (status == TG_EXIT_OK && (fflush(stdout) != 0 || ferror(stdout))) {
        if (errno == EPIPE) return TG_EXIT_OK;
        return tg_runtime_error("writing to stdout: %s", strerror(errno));
    }
    return status;
}
