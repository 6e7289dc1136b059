/* args.c — strict command-line parsing: each value is checked in full and against its range, and anything wrong
 * becomes one line on stderr naming the command and the flag. */
#include "cli/args.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Prints "<prefix><message>\n" on stderr as one line: control characters in the message (a newline inside a flag's
 * value or a file name) become '?'; a message longer than 1 KiB is cut. */
static void print_line(const char *prefix, const char *fmt, va_list ap) {
    char buf[1024];
    const int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n >= (int)sizeof buf) {
        /* cut: drop a multi-byte character that the cut left incomplete, so the line stays valid UTF-8 */
        size_t i = sizeof buf - 1;
        while (i > 0 && ((unsigned char)buf[i - 1] & 0xC0) == 0x80) i--;
        const unsigned char lead = i > 0 ? (unsigned char)buf[i - 1] : 0;
        const size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
        if (lead >= 0xC0 && sizeof buf - 1 - (i - 1) < want) buf[i - 1] = '\0';
    }
    for (char *c = buf; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
    fprintf(stderr, "%s%s\n", prefix, buf);
}

int tg_usage_error(const char *cmd, const char *fmt, ...) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "tinygpt %s: ", cmd);
    va_list ap;
    va_start(ap, fmt);
    print_line(prefix, fmt, ap);
    va_end(ap);
    return TG_EXIT_USAGE;
}

int tg_runtime_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    print_line("tinygpt: ", fmt, ap);
    va_end(ap);
    return TG_EXIT_ERROR;
}

/* A value must not start with white space (strtoll/strtod would skip it) and must not be empty. */
static bool plain_start(const char *s) { return s[0] != '\0' && !isspace((unsigned char)s[0]); }

static bool parse_i64(const char *s, int64_t *out) {
    if (!plain_start(s)) return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = (int64_t)v;
    return true;
}

static bool parse_u64(const char *s, uint64_t *out) {
    if (!plain_start(s) || strchr(s, '-')) return false; /* strtoull would wrap "-1" */
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0') return false;
    *out = (uint64_t)v;
    return true;
}

static bool parse_double(const char *s, double *out) {
    if (!plain_start(s)) return false;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v)) return false;
    *out = v;
    return true;
}

bool tg_parse_size(const char *s, int64_t *out) {
    if (!s || !isdigit((unsigned char)s[0])) return false;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || v < 0) return false;
    int shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: break;
    }
    if (shift) {
        end++;
        if (*end == 'i' && toupper((unsigned char)end[1]) == 'B') end += 2;
        else if (toupper((unsigned char)*end) == 'B') end++;
    } else if (toupper((unsigned char)*end) == 'B') {
        end++;
    }
    if (*end != '\0') return false;
    if (v > (INT64_MAX >> shift)) return false;
    *out = (int64_t)v << shift;
    return true;
}

/* What option o expects, as its usage error says it: "a positive integer", "a non-negative integer up to 4096",
 * "an integer from -3 to 3", "a number from 0 to 1", "a size in bytes such as ...", "one of fp32, ...". */
static void describe_value(const tg_opt *o, char *buf, size_t cap) {
    switch (o->kind) {
    case TG_OPT_INT: {
        const char *what = o->lo == 1 ? "a positive integer" : o->lo == 0 ? "a non-negative integer" : NULL;
        if (!what) snprintf(buf, cap, "an integer from %" PRId64 " to %" PRId64, o->lo, o->hi);
        else if (o->hi == INT64_MAX) snprintf(buf, cap, "%s", what);
        else snprintf(buf, cap, "%s up to %" PRId64, what, o->hi);
        break;
    }
    case TG_OPT_U64: snprintf(buf, cap, "a non-negative integer up to %" PRIu64, UINT64_MAX); break;
    case TG_OPT_FLOAT:
        if (!isinf(o->fhi)) snprintf(buf, cap, "a number from %g to %g", o->flo, o->fhi);
        else if (o->flo == 0.0) snprintf(buf, cap, "a non-negative number");
        else snprintf(buf, cap, "a number >= %g", o->flo);
        break;
    case TG_OPT_SIZE:
        snprintf(buf, cap, "a size in bytes such as 65536, 64M or 1G (at least %" PRId64 ")", o->lo);
        break;
    case TG_OPT_PRECISION: {
        char names[128];
        tg_precision_names(names, sizeof names, ", ");
        snprintf(buf, cap, "one of %s", names);
        break;
    }
    case TG_OPT_STRING:
    case TG_OPT_LIST:
    case TG_OPT_FLAG: snprintf(buf, cap, "a value"); break;
    }
}

/* Checks and stores one option value; prints the message and returns false when it is not acceptable. */
static bool take_value(const char *cmd, tg_opt *o, const char *v) {
    bool ok = false;
    switch (o->kind) {
    case TG_OPT_INT:
    case TG_OPT_SIZE: {
        int64_t x;
        ok = (o->kind == TG_OPT_INT ? parse_i64(v, &x) : tg_parse_size(v, &x)) && !(x < o->lo || x > o->hi);
        if (ok) *(int64_t *)o->dest = x;
        break;
    }
    case TG_OPT_U64: /* dest: uint64_t */
        ok = parse_u64(v, o->dest);
        break;
    case TG_OPT_FLOAT: {
        double x;
        ok = parse_double(v, &x) && !(x < o->flo || x > o->fhi);
        if (ok) *(double *)o->dest = x;
        break;
    }
    case TG_OPT_STRING:
        *(const char **)o->dest = v;
        return true;
    case TG_OPT_PRECISION: /* dest: tg_kv_precision */
        ok = tg_kv_precision_parse(v, o->dest);
        break;
    case TG_OPT_LIST: {
        tg_opt_list *l = o->dest;
        if (l->n == TG_OPT_LIST_MAX) {
            tg_usage_error(cmd, "%s: given more than %d times", o->name, TG_OPT_LIST_MAX);
            return false;
        }
        l->items[l->n++] = v;
        return true;
    }
    case TG_OPT_FLAG:
        return false;
    }
    if (!ok) {
        char want[192];
        describe_value(o, want, sizeof want);
        tg_usage_error(cmd, "%s: expected %s, got '%s'", o->name, want, v);
    }
    return ok;
}

int tg_cache_args_parse(const char *cmd, int argc, char **argv, tg_opt *o, size_t n_before, tg_cache_flags *cf,
                        const char **pos, size_t max_pos, size_t *n_pos) {
    tg_cache_flags_options(cf, o + n_before);
    return tg_args_parse_cmd(cmd, argc, argv, o, n_before + TG_CACHE_OPT_COUNT, pos, max_pos, n_pos);
}

bool tg_help_printed(int *status, const char *usage) {
    if (*status >= 0) return false;
    fputs(usage, stdout);
    tg_cache_flags_help(stdout, false);
    *status = TG_EXIT_OK;
    return true;
}

int tg_args_parse_cmd(const char *cmd, int argc, char **argv, tg_opt *opts, size_t n_opts, const char **pos,
                      size_t max_pos, size_t *n_pos) {
    switch (tg_args_parse(cmd, argc, argv, opts, n_opts, pos, max_pos, n_pos)) {
    case TG_ARGS_HELP: return -1;
    case TG_ARGS_USAGE: return TG_EXIT_USAGE;
    case TG_ARGS_OK: break;
    }
    return TG_EXIT_OK;
}

bool tg_args_parse_done(const char *cmd, const char *usage, int argc, char **argv, tg_opt *opts, size_t n_opts,
                        const char **pos, size_t max_pos, size_t *n_pos, int *status) {
    *status = tg_args_parse_cmd(cmd, argc, argv, opts, n_opts, pos, max_pos, n_pos);
    if (*status >= 0) return *status != TG_EXIT_OK;
    fputs(usage, stdout);
    *status = TG_EXIT_OK;
    return true;
}

tg_args_status tg_args_parse(const char *cmd, int argc, char **argv, tg_opt *opts, size_t n_opts, const char **pos,
                             size_t max_pos, size_t *n_pos) {
    *n_pos = 0;
    bool only_positionals = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        bool is_option = !only_positionals && a[0] == '-' && a[1] != '\0';
        if (is_option && strcmp(a, "--") == 0) {
            only_positionals = true;
            continue;
        }
        if (is_option && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)) return TG_ARGS_HELP;
        if (!is_option) {
            if (*n_pos >= max_pos) {
                tg_usage_error(cmd, "unexpected argument '%s' (see tinygpt %s --help)", a, cmd);
                return TG_ARGS_USAGE;
            }
            pos[(*n_pos)++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        tg_opt *o = NULL;
        for (size_t j = 0; j < n_opts; j++) {
            const char *alias = opts[j].alias;
            if ((strlen(opts[j].name) == name_len && strncmp(opts[j].name, a, name_len) == 0) ||
                (alias && strlen(alias) == name_len && strncmp(alias, a, name_len) == 0)) {
                o = &opts[j];
                break;
            }
        }
        if (!o) {
            tg_usage_error(cmd, "unknown option '%.*s' (see tinygpt %s --help)", (int)name_len, a, cmd);
            return TG_ARGS_USAGE;
        }
        if (o->kind == TG_OPT_FLAG) {
            if (eq) {
                tg_usage_error(cmd, "%s: takes no value, got '%s'", o->name, eq + 1);
                return TG_ARGS_USAGE;
            }
            *(bool *)o->dest = true;
            o->seen = true;
            continue;
        }
        const char *v = NULL;
        if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            tg_usage_error(cmd, "%s: missing value", o->name);
            return TG_ARGS_USAGE;
        }
        if (!take_value(cmd, o, v)) return TG_ARGS_USAGE;
        o->seen = true;
    }
    return TG_ARGS_OK;
}

/* ---- the KV cache flags --------------------------------------------------------------------------------------- */

static const char CACHE_FLAGS_HELP[] =
    "KV cache:\n"
    "  --streaming-llm-window M       StreamingLLM: keep the sinks and the last M tokens (bounded memory, no\n"
    "                                 context limit)\n"
    "  --streaming-llm-sink N         StreamingLLM: first tokens always kept (default 4 with a window or budget)\n"
    "  --streaming-llm-rope R         RoPE positions of a bounded cache: reposition (default: the query sees the\n"
    "                                 sinks and the window at their cache slots, as if they were contiguous) or\n"
    "                                 original (keys at their absolute positions: the sinks drift away; the\n"
    "                                 StreamingLLM paper's vanilla scheme)\n"
    "  --streaming-llm-reposition     the same as --streaming-llm-rope reposition (kept for older scripts)\n"
    "  --kv-budget BYTES              choose the largest window whose cache fits BYTES (e.g. 64M, 1G)\n"
    "  --kv-quantize P                storage of keys and values: {precisions} (default fp32)\n"
    "  --kv-quantize-keys P           storage of keys only (overrides --kv-quantize)\n"
    "  --kv-quantize-values P         storage of values only (overrides --kv-quantize)\n"
    "  --kv-group-size G              KIVI key group along time (default: 32, or 16 / 8 for a window or context\n"
    "                                 under 256 / 128 tokens; 0 = one group for the whole history)\n"
    "  --kv-residual R                KIVI newest tokens kept in full precision, a multiple of G (default: none\n"
    "                                 for int8 / int4, every token quantised at once, the newest group's keys on\n"
    "                                 provisional scales; one group for int2. This trades a little accuracy on\n"
    "                                 the newest tokens for a cache smaller than bf16 at every size. KIVI's\n"
    "                                 published setting: --kv-group-size 32 --kv-residual 128\n"
    "                                 --kv-residual-precision fp32)\n"
    "  --kv-residual-precision P      KIVI: storage of the residual and the sinks: fp16 (default), bf16 or fp32\n"
    "  --kv-quantize-sinks            KIVI: quantise the StreamingLLM sinks too (default: kept at the residual\n"
    "                                 precision)\n"
    "  --kv-rotate on|values|off      KIVI: rotate each head's keys and values (on) or values only (Walsh-\n"
    "                                 Hadamard, fixed random signs) before quantising them; the query and the\n"
    "                                 output are rotated to match, so only the quantisation error changes\n"
    "                                 (default: the library's)\n"
    "  --kv-clip on|off               KIVI: fit each group's and token's grid by least squared error, its ends\n"
    "                                 moved inwards by up to 3/16 of the range (values beyond coded at the\n"
    "                                 ends), or span the whole range (off); the same bytes and attention\n"
    "                                 (default: int2 keys and values; not int4, int8)\n"
    "  --max-memory BYTES             refuse a cache whose K/V storage exceeds BYTES (e.g. 512M, 4G) before\n"
    "                                 allocating it: a window's all at once, an unbounded cache's at each chunk\n"
    "                                 it grows by as tokens arrive (default: the machine's physical memory)\n"
    "  --device D                     where the forward pass runs: cpu (default), vulkan or vulkan:N (Vulkan\n"
    "                                 device N; F32 / F16 / BF16 / Q8_0 / Q4_0 / Q4_K / Q5_K / Q6_K weights,\n"
    "                                 fp32 / fp16 and KIVI int8 / int4 / int2 caches so far), auto\n"
    "                                 (Vulkan device 0 when it can run the model, else the CPU)\n";

void tg_precision_names(char *buf, size_t size, const char *sep) {
    size_t used = 0;
    if (size) buf[0] = '\0';
    for (int i = 0; i < tg_kv_precision_count() && used < size; i++) {
        const int m = snprintf(buf + used, size - used, "%s%s", i ? sep : "", tg_kv_precision_name((tg_kv_precision)i));
        if (m > 0) used += (size_t)m;
    }
}

void tg_cache_flags_help(FILE *f, bool without_precision) {
    static const char MARK[] = "{precisions}";
    char names[128];
    tg_precision_names(names, sizeof names, " ");
    for (const char *p = CACHE_FLAGS_HELP; *p;) {
        const char *nl = strchr(p, '\n');
        const size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
        const bool precision = strncmp(p, "  --kv-quantize ", 16) == 0 || strncmp(p, "  --kv-quantize-keys ", 21) == 0 ||
                               strncmp(p, "  --kv-quantize-values ", 23) == 0;
        const char *mark = strstr(p, MARK);
        if (mark && mark < p + n && !(without_precision && precision)) /* the library's precisions for the mark */
            fprintf(f, "%.*s%s%.*s", (int)(mark - p), p, names, (int)(p + n - mark - (sizeof MARK - 1)),
                    mark + sizeof MARK - 1);
        else if (!(without_precision && precision))
            fwrite(p, 1, n, f);
        p += n;
    }
}

enum {
    C_SINK, C_WINDOW, C_REPOS, C_ROPE, C_BUDGET, C_QUANT, C_QKEYS, C_QVALUES, C_GROUP, C_RESIDUAL, C_RPREC, C_QSINKS,
    C_MAXMEM, C_DEVICE, C_ROTATE, C_CLIP, C_END
};
_Static_assert((int)C_END == (int)TG_CACHE_OPT_COUNT, "TG_CACHE_OPT_COUNT must count the cache options");

void tg_cache_flags_options(tg_cache_flags *f, tg_opt *opts) {
    memset(f, 0, sizeof *f);
    memset(opts, 0, TG_CACHE_OPT_COUNT * sizeof *opts);
    opts[C_SINK] = (tg_opt){.name = "--streaming-llm-sink", .kind = TG_OPT_INT, .dest = &f->sink, .lo = 0,
                            .hi = INT32_MAX};
    opts[C_WINDOW] = (tg_opt){.name = "--streaming-llm-window", .kind = TG_OPT_INT, .dest = &f->window, .lo = 1,
                              .hi = INT32_MAX};
    opts[C_REPOS] = (tg_opt){.name = "--streaming-llm-reposition", .kind = TG_OPT_FLAG, .dest = &f->reposition};
    opts[C_ROPE] = (tg_opt){.name = "--streaming-llm-rope", .kind = TG_OPT_STRING, .dest = &f->rope};
    opts[C_BUDGET] = (tg_opt){.name = "--kv-budget", .kind = TG_OPT_SIZE, .dest = &f->budget, .lo = 1,
                              .hi = INT64_MAX};
    opts[C_QUANT] = (tg_opt){.name = "--kv-quantize", .kind = TG_OPT_PRECISION, .dest = &f->both};
    opts[C_QKEYS] = (tg_opt){.name = "--kv-quantize-keys", .kind = TG_OPT_PRECISION, .dest = &f->keys};
    opts[C_QVALUES] = (tg_opt){.name = "--kv-quantize-values", .kind = TG_OPT_PRECISION, .dest = &f->values};
    opts[C_GROUP] = (tg_opt){.name = "--kv-group-size", .kind = TG_OPT_INT, .dest = &f->group, .lo = 0,
                             .hi = 1 << 20};
    opts[C_RESIDUAL] = (tg_opt){.name = "--kv-residual", .kind = TG_OPT_INT, .dest = &f->residual, .lo = 0,
                                .hi = 1 << 20};
    opts[C_RPREC] = (tg_opt){.name = "--kv-residual-precision", .kind = TG_OPT_PRECISION,
                             .dest = &f->residual_precision};
    opts[C_QSINKS] = (tg_opt){.name = "--kv-quantize-sinks", .kind = TG_OPT_FLAG, .dest = &f->quantize_sinks};
    opts[C_MAXMEM] = (tg_opt){.name = "--max-memory", .kind = TG_OPT_SIZE, .dest = &f->max_memory, .lo = 1,
                              .hi = INT64_MAX};
    opts[C_DEVICE] = (tg_opt){.name = "--device", .kind = TG_OPT_STRING, .dest = &f->device};
    opts[C_ROTATE] = (tg_opt){.name = "--kv-rotate", .kind = TG_OPT_STRING, .dest = &f->rotate};
    opts[C_CLIP] = (tg_opt){.name = "--kv-clip", .kind = TG_OPT_STRING, .dest = &f->clip};
}

bool tg_rope_flags(const char *cmd, const char *rope, bool alias, tg_rope_positions *out) {
    *out = alias ? TG_ROPE_POSITIONS_REPOSITION : TG_ROPE_POSITIONS_DEFAULT;
    if (!rope) return true;
    if (strcmp(rope, "reposition") == 0) {
        *out = TG_ROPE_POSITIONS_REPOSITION;
        return true;
    }
    if (strcmp(rope, "original") != 0) {
        tg_usage_error(cmd, "--streaming-llm-rope: expected reposition or original, got '%s'", rope);
        return false;
    }
    if (alias) {
        tg_usage_error(cmd, "--streaming-llm-reposition contradicts --streaming-llm-rope original");
        return false;
    }
    *out = TG_ROPE_POSITIONS_ORIGINAL;
    return true;
}

bool tg_cache_flags_params(const char *cmd, const tg_cache_flags *f, const tg_opt *opts, tg_cache_params *out) {
    tg_cache_params c = tg_cache_default_params();
    if (!tg_rope_flags(cmd, opts[C_ROPE].seen ? f->rope : NULL, f->reposition, &c.rope_positions)) return false;
    if (opts[C_QUANT].seen) c.key_precision = c.value_precision = f->both;
    if (opts[C_QKEYS].seen) c.key_precision = f->keys;
    if (opts[C_QVALUES].seen) c.value_precision = f->values;
    if (opts[C_WINDOW].seen) c.window = f->window;
    if (opts[C_BUDGET].seen) c.budget_bytes = f->budget;
    if (opts[C_SINK].seen) c.sink = f->sink; /* otherwise the library's default: 4 sinks when the cache is bounded */
    if (opts[C_GROUP].seen) c.group_size = (int)f->group;
    if (opts[C_RESIDUAL].seen) c.residual = (int)f->residual;
    c.quantize_sinks = f->quantize_sinks;
    if (opts[C_RPREC].seen) c.residual_precision = f->residual_precision;
    if (opts[C_MAXMEM].seen) c.max_memory = f->max_memory;
    if (opts[C_DEVICE].seen) c.device = f->device;
    if (opts[C_ROTATE].seen) {
        static const char *const names[] = {"on", "off", "values"};
        static const tg_kv_rotate modes[] = {TG_KV_ROTATE_ON, TG_KV_ROTATE_OFF, TG_KV_ROTATE_VALUES};
        size_t i = 0;
        while (i < 3 && strcmp(f->rotate, names[i]) != 0) i++;
        if (i == 3) {
            tg_usage_error(cmd, "--kv-rotate: expected on, values or off, got '%s'", f->rotate);
            return false;
        }
        c.rotate = modes[i];
    }
    if (opts[C_CLIP].seen) {
        if (strcmp(f->clip, "on") != 0 && strcmp(f->clip, "off") != 0) {
            tg_usage_error(cmd, "--kv-clip: expected on or off, got '%s'", f->clip);
            return false;
        }
        c.clip = strcmp(f->clip, "on") == 0 ? TG_KV_CLIP_ON : TG_KV_CLIP_OFF;
    }
    *out = c;
    return true;
}
