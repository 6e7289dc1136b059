/* cmd_info.c — `tinygpt info MODEL [--cache-table]`: the model's hyper-parameters, its KV cache bytes per token at
 * every precision, and optionally the cache-bytes table of the design note (T x precision x policy). */
#define _POSIX_C_SOURCE 200809L /* open_memstream */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bundled.h"
#include "cli/cache_errors.h"
#include "cli/cli.h"
#include "cli/report.h"
#include "cli/report_json.h"

static const char USAGE[] =
    "usage: tinygpt info [MODEL] [--cache-table] [--json]\n"
    "\n"
    "Prints the architecture, parameter count, weight types, context length, layer and head shapes, vocabulary,\n"
    "RoPE theta and scaling, sliding window, tied embeddings, BOS / EOS and the KV cache bytes per token at each\n"
    "precision. A Hugging Face folder needs only config.json: without weights the parameter count is the one its\n"
    "shapes imply, and the files it lacks are listed. Without MODEL, the bundled model " TG_BUNDLED_MODEL ".\n"
    "\n"
    "  --cache-table   also print the KV cache bytes for T = 128 ... 8192 tokens at every precision, unbounded\n"
    "                  and StreamingLLM 4 + 256, with the ratio to an unbounded bf16 cache\n"
    "  --json          the same as one JSON object on stdout: the fields of tinygpt.h's tg_model_info, bos,\n"
    "                  eos_ids, adds_bos, kv_bytes_per_token {precision: bytes} and with --cache-table\n"
    "                  cache_table [{policy, sink, window, precision, tokens, bytes, ratio_to_bf16}]\n";

/* Every precision the library has, in its order: (tg_kv_precision)0 .. N_PRECISIONS - 1. */
#define N_PRECISIONS ((size_t)tg_kv_precision_count())
#define ALL_PRECISIONS(i) ((tg_kv_precision)(i))

static tg_cache_params params_for(tg_kv_precision p, int64_t sink, int64_t window) {
    tg_cache_params c = tg_cache_default_params();
    c.key_precision = p;
    c.value_precision = p;
    c.sink = sink;
    c.window = window;
    return c;
}

/* "KV cache/token" line: bytes of a full-context cache divided by the context, per precision. */
static void print_bytes_per_token(FILE *out, const tg_model *model, const tg_model_info *info) {
    int64_t t = info->context_length;
    if (t <= 0) {
        fprintf(out, "KV cache/token   n/a (no context length)\n");
        return;
    }
    fprintf(out, "KV cache/token  ");
    for (size_t i = 0; i < N_PRECISIONS; i++) {
        tg_cache_params c = params_for(ALL_PRECISIONS(i), 0, 0);
        tg_error err = {0};
        size_t bytes = tg_cache_bytes(model, &c, t, &err);
        if (bytes == 0) {
            tg_cli_word_error(&err, &c);
            fprintf(out, " n/a (%s)\n", err.msg);
            return;
        }
        char buf[32];
        tg_fmt_bytes((double)bytes / (double)t, 1, buf, sizeof buf);
        fprintf(out, "%s %s %s", i ? " ·" : "", tg_kv_precision_name(ALL_PRECISIONS(i)), buf);
    }
    fprintf(out, "  (full context of %" PRId64 " tokens; KIVI defaults: group from the cache's length, no "
                 "residual but one group for int2, sinks fp16)\n", t);
}

/* The design note's table: rows = policy x precision, columns = T, cells = bytes and the ratio to bf16 unbounded. */
static int print_cache_table(FILE *out, const tg_model *model, const tg_model_info *info) {
    static const int64_t TS[] = {128, 256, 512, 1024, 2048, 8192};
    enum { N_T = sizeof TS / sizeof TS[0] };
    const struct {
        const char *name;
        int64_t sink, window;
    } policies[] = {{"unbounded", 0, 0}, {"StreamingLLM 4+256", 4, 256}};
    size_t bf16[N_T];
    tg_error err = {0};
    for (size_t j = 0; j < N_T; j++) {
        tg_cache_params c = params_for(TG_KV_BF16, 0, 0);
        bf16[j] = tg_cache_bytes(model, &c, TS[j], &err);
        if (bf16[j] == 0) {
            tg_cli_word_error(&err, &c);
            return tg_runtime_error("%s", err.msg);
        }
    }
    fprintf(out, "\nKV cache bytes (%d of %d layers hold K/V, %d KV heads x %d dims; KIVI defaults: group from the "
                 "cache's length, no residual but one group for int2, sinks fp16)\n",
           info->n_kv_layers, info->n_layers, info->n_kv_heads, info->head_dim);
    fprintf(out, "x = ratio to an unbounded bf16 cache at the same T; T beyond the context (%d) is extrapolated\n",
           info->context_length);
    fprintf(out, "unbounded = a cache sized for T tokens: one that holds T of a longer context has grown in chunks of "
                 "512+ tokens, so it allocates T rounded up to its chunk\n\n");
    fprintf(out, "%-19s %-5s", "policy", "prec");
    for (size_t j = 0; j < N_T; j++) {
        char head[16];
        snprintf(head, sizeof head, "T=%" PRId64, TS[j]);
        fprintf(out, " %18s", head);
    }
    fputc('\n', out);
    for (size_t pi = 0; pi < sizeof policies / sizeof policies[0]; pi++) {
        for (size_t i = 0; i < N_PRECISIONS; i++) {
            fprintf(out, "%-19s %-5s", policies[pi].name, tg_kv_precision_name(ALL_PRECISIONS(i)));
            for (size_t j = 0; j < N_T; j++) {
                tg_cache_params c = params_for(ALL_PRECISIONS(i), policies[pi].sink, policies[pi].window);
                size_t bytes = tg_cache_bytes(model, &c, TS[j], &err);
                if (bytes == 0) {
                    tg_cli_word_error(&err, &c);
                    fputc('\n', out);
                    return tg_runtime_error("%s", err.msg);
                }
                char b[32], cell[48];
                tg_fmt_bytes((double)bytes, 2, b, sizeof b);
                snprintf(cell, sizeof cell, "%s %5.2fx", b, (double)bytes / (double)bf16[j]);
                fprintf(out, " %18s", cell);
            }
            fputc('\n', out);
        }
    }
    return TG_EXIT_OK;
}

static int print_info(FILE *out, const char *path, const tg_model *model, bool table) {
    tg_model_info in;
    tg_model_get_info(model, &in);
    char count[32];
    tg_fmt_count(in.n_params, count, sizeof count);
    fprintf(out, "model            %s\n", path);
    fprintf(out, "architecture     %s\n", in.architecture);
    if (in.has_weights) {
        fprintf(out, "parameters       %s (%" PRId64 ")\n", count, in.n_params);
        fprintf(out, "weight types     %s\n", in.weight_types);
    } else if (in.n_params > 0) {
        fprintf(out, "parameters       %s (%" PRId64 ", from the shapes config.json implies)\n", count, in.n_params);
        fprintf(out, "weights          none (it can describe, not run)\n");
    } else {
        fprintf(out, "weights          none (vocab-only: it can tokenize, not run)\n");
    }
    if (in.absent[0]) fprintf(out, "absent           %s\n", in.absent);
    fprintf(out, "context length   %d\n", in.context_length);
    fprintf(out, "layers           %d (%d hold their own K/V)\n", in.n_layers, in.n_kv_layers);
    fprintf(out, "heads            %d query, %d KV, head dim %d\n", in.n_heads, in.n_kv_heads, in.head_dim);
    fprintf(out, "d_model          %d\n", in.d_model);
    fprintf(out, "ffn              %d\n", in.ffn_dim);
    fprintf(out, "vocab            %d\n", in.vocab_size);
    fprintf(out, "rope theta       %g\n", (double)in.rope_theta);
    fprintf(out, "rope scaling     %s\n", in.rope_scaling);
    fprintf(out, "norm eps         %g\n", (double)in.norm_eps);
    if (in.layer_pattern[0]) fprintf(out, "layer pattern    %s\n", in.layer_pattern);
    else if (in.sliding_window > 0) fprintf(out, "sliding window   %d\n", in.sliding_window);
    else fprintf(out, "sliding window   none\n");
    if (in.family[0]) fprintf(out, "family           %s\n", in.family);
    fprintf(out, "tied embeddings  %s\n", in.tied_embeddings ? "yes" : "no");
    const int32_t *eos = NULL;
    const size_t n_eos = tg_token_eos_ids(model, &eos);
    fprintf(out, "BOS / EOS        %" PRId32 " / %" PRId32, tg_token_bos(model), n_eos ? eos[0] : tg_token_eos(model));
    for (size_t i = 1; i < n_eos; i++) fprintf(out, ", %" PRId32, eos[i]);
    fprintf(out, "%s\n", tg_model_adds_bos(model) ? " (BOS added to prompts)" : "");
    if (in.n_layers <= 0 || in.n_kv_heads <= 0 || in.head_dim <= 0) return TG_EXIT_OK;
    print_bytes_per_token(out, model, &in);
    return table ? print_cache_table(out, model, &in) : TG_EXIT_OK;
}

/* The cache_table of --json: every policy x precision x T of print_cache_table. */
static json_t *json_cache_table(const tg_model *model, tg_error *err) {
    static const int64_t TS[] = {128, 256, 512, 1024, 2048, 8192};
    const struct {
        const char *name;
        int64_t sink, window;
    } policies[] = {{"unbounded", 0, 0}, {"StreamingLLM 4+256", 4, 256}};
    json_t *rows = json_array();
    for (size_t j = 0; rows && j < sizeof TS / sizeof TS[0]; j++) {
        tg_cache_params b = params_for(TG_KV_BF16, 0, 0);
        const size_t bf16 = tg_cache_bytes(model, &b, TS[j], err);
        for (size_t pi = 0; rows && pi < sizeof policies / sizeof policies[0]; pi++) {
            for (size_t i = 0; rows && i < N_PRECISIONS; i++) {
                tg_cache_params c = params_for(ALL_PRECISIONS(i), policies[pi].sink, policies[pi].window);
                const size_t bytes = bf16 ? tg_cache_bytes(model, &c, TS[j], err) : 0;
                if (bytes == 0) {
                    tg_cli_word_error(err, &c);
                    json_decref(rows);
                    return NULL;
                }
                json_t *row = json_pack("{s:s, s:I, s:I, s:s, s:I, s:I, s:f}", "policy", policies[pi].name, "sink",
                                        (json_int_t)policies[pi].sink, "window", (json_int_t)policies[pi].window,
                                        "precision", tg_kv_precision_name(ALL_PRECISIONS(i)), "tokens",
                                        (json_int_t)TS[j], "bytes", (json_int_t)bytes, "ratio_to_bf16",
                                        (double)bytes / (double)bf16);
                if (!row || json_array_append_new(rows, row) != 0) {
                    json_decref(rows);
                    rows = NULL;
                }
            }
        }
    }
    if (!rows) snprintf(err->msg, sizeof err->msg, "out of memory");
    return rows;
}

/* `info --json`: the object on stdout; TG_EXIT_OK, or the status after one error line (nothing printed). */
static int print_info_json(const char *path, const tg_model *model, bool table) {
    tg_model_info in;
    tg_model_get_info(model, &in);
    json_t *o = json_pack("{s:s}", "model", path), *fields = tg_json_model_info(&in); /* "model" first */
    if (o && (!fields || json_object_update(o, fields) != 0)) {
        json_decref(o);
        o = NULL;
    }
    json_decref(fields);
    const int32_t *eos = NULL;
    const size_t n_eos = tg_token_eos_ids(model, &eos);
    json_t *eos_ids = json_array(), *per_token = json_object();
    for (size_t i = 0; eos_ids && i < n_eos; i++) json_array_append_new(eos_ids, json_integer(eos[i]));
    tg_error err = {0};
    for (size_t i = 0; per_token && in.context_length > 0 && in.n_kv_heads > 0 && i < N_PRECISIONS; i++) {
        tg_cache_params c = params_for(ALL_PRECISIONS(i), 0, 0);
        const size_t bytes = tg_cache_bytes(model, &c, in.context_length, &err);
        json_object_set_new(per_token, tg_kv_precision_name(ALL_PRECISIONS(i)),
                            bytes ? json_real((double)bytes / (double)in.context_length) : json_null());
    }
    json_t *rows = table && in.n_kv_heads > 0 ? json_cache_table(model, &err) : NULL;
    if (table && in.n_kv_heads > 0 && !rows) {
        json_decref(o);
        json_decref(eos_ids);
        json_decref(per_token);
        return tg_runtime_error("%s", err.msg);
    }
    /* json_object_set_new takes each value, also when it fails; with no object they are released here */
    bool ok = o != NULL;
    if (ok) {
        ok = json_object_set_new(o, "bos", json_integer(tg_token_bos(model))) == 0;
        ok = json_object_set_new(o, "eos_ids", eos_ids) == 0 && ok;
        ok = json_object_set_new(o, "adds_bos", json_boolean(tg_model_adds_bos(model))) == 0 && ok;
        ok = json_object_set_new(o, "kv_bytes_per_token", per_token) == 0 && ok;
        if (rows) ok = json_object_set_new(o, "cache_table", rows) == 0 && ok;
    } else {
        json_decref(eos_ids);
        json_decref(per_token);
        json_decref(rows);
    }
    if (!ok) {
        json_decref(o);
        return tg_runtime_error("--json: out of memory, or a model path that is not UTF-8");
    }
    if (!tg_json_print(stdout, o)) return errno == EPIPE ? TG_EXIT_OK : tg_runtime_error("writing to stdout failed");
    return TG_EXIT_OK;
}

int tg_cmd_info(int argc, char **argv) {
    bool table = false, json = false;
    tg_opt opts[] = {
        {.name = "--cache-table", .kind = TG_OPT_FLAG, .dest = &table},
        {.name = "--json", .kind = TG_OPT_FLAG, .dest = &json},
    };
    const char *pos[1];
    size_t n_pos = 0;
    int parsed;
    if (tg_args_parse_done("info", USAGE, argc, argv, opts, sizeof opts / sizeof opts[0], pos, 1, &n_pos, &parsed))
        return parsed;
    char bundled[4200];
    const char *path;
    tg_model *model = tg_load_model_or_bundled(n_pos ? pos[0] : NULL, "info", TG_NEED_CONFIG, &path, bundled,
                                               sizeof bundled);
    if (!model) return TG_EXIT_ERROR;
    if (json) {
        int status = print_info_json(path, model, table);
        tg_model_free(model);
        return status;
    }
    /* everything is computed into a buffer first: a failure leaves nothing on stdout */
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    if (!out) {
        tg_model_free(model);
        return tg_runtime_error("out of memory");
    }
    int status = print_info(out, path, model, table);
    tg_model_free(model);
    if (fclose(out) != 0 && status == TG_EXIT_OK) status = tg_runtime_error("out of memory");
    if (status == TG_EXIT_OK) fwrite(text, 1, len, stdout);
    free(text);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (errno == EPIPE) return TG_EXIT_OK;
        return tg_runtime_error("writing to stdout: %s", strerror(errno));
    }
    return status;
}
