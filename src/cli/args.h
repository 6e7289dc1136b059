/* args.h — strict command-line parsing for the tinygpt commands: a table of options per command, values checked
 * in full (integers with strtoll and ranges, floats with strtod, byte sizes with K/M/G/T suffixes, KV precisions),
 * and a one-line message on stderr naming the command and the flag for anything wrong. */
#ifndef TG_CLI_ARGS_H
#define TG_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tinygpt.h"

/* Exit statuses of the tool. */
enum { TG_EXIT_OK = 0, TG_EXIT_ERROR = 1, TG_EXIT_USAGE = 2 };

typedef enum {
    TG_OPT_FLAG,      /* no value; dest: bool */
    TG_OPT_INT,       /* integer in [lo, hi]; dest: int64_t */
    TG_OPT_U64,       /* unsigned 64-bit integer (a seed); dest: uint64_t */
    TG_OPT_FLOAT,     /* finite number in [flo, fhi]; dest: double */
    TG_OPT_SIZE,      /* byte count, "65536", "64K", "64M", "1G", "2T" (binary units, optional "iB"/"B"), in
                       * [lo, hi]; dest: int64_t */
    TG_OPT_STRING,    /* any text; dest: const char * (points into argv) */
    TG_OPT_PRECISION, /* fp32 | fp16 | bf16 | int8 | int4 | int2; dest: tg_kv_precision */
    TG_OPT_LIST,      /* repeatable text (--stop A --stop B), at most TG_OPT_LIST_MAX; dest: tg_opt_list */
} tg_opt_kind;

#define TG_OPT_LIST_MAX 16

/* The values of a TG_OPT_LIST option, in the order given (pointers into argv). */
typedef struct {
    const char *items[TG_OPT_LIST_MAX];
    size_t n;
} tg_opt_list;

typedef struct {
    const char *name;  /* with the dashes: "--tokens" */
    const char *alias; /* a short form ("-n") or NULL; messages name the long form */
    tg_opt_kind kind;
    void *dest;        /* written only when the option is given and valid */
    int64_t lo, hi;    /* range of INT and SIZE */
    double flo, fhi;   /* range of FLOAT (fhi may be INFINITY) */
    bool seen;         /* set by the parser when the option was given */
} tg_opt;

typedef enum {
    TG_ARGS_OK,    /* everything parsed */
    TG_ARGS_HELP,  /* --help or -h was given: print usage, exit 0 */
    TG_ARGS_USAGE, /* a message was printed on stderr: exit 2 */
} tg_args_status;

/* Parses argv[0..argc) (the words after the command name) against opts. Options (by name or alias) take their value
 * as the next word or after '=' ("--tokens=5"); a value may start with '-'. Words that do not start with '-' (a lone
 * "-" is a word, e.g. "standard input", and so is every word after a lone "--") are positionals, stored in pos[] in order; more than max_pos of them is a usage error.
 * On TG_ARGS_USAGE one line "tinygpt <cmd>: ..." has been printed on stderr. */
tg_args_status tg_args_parse(const char *cmd, int argc, char **argv, tg_opt *opts, size_t n_opts, const char **pos,
                             size_t max_pos, size_t *n_pos);
/* tg_args_parse as a command's status: TG_EXIT_OK to go on, TG_EXIT_USAGE after a usage error (printed), or -1 for
 * --help (the command prints its usage and exits 0). */
int tg_args_parse_cmd(const char *cmd, int argc, char **argv, tg_opt *opts, size_t n_opts, const char **pos,
                      size_t max_pos, size_t *n_pos);
/* tg_args_parse_cmd for a command without the cache flags: true when the command is done, with its exit status in
 * *status (after --help, printed as `usage` on stdout: TG_EXIT_OK; after a usage error: TG_EXIT_USAGE); false to go
 * on. */
bool tg_args_parse_done(const char *cmd, const char *usage, int argc, char **argv, tg_opt *opts, size_t n_opts,
                        const char **pos, size_t max_pos, size_t *n_pos, int *status);

/* ---- the KV cache flags, shared by the commands that run a session ---------------------------------------------- */

/* Where the cache flags are parsed to. */
typedef struct {
    int64_t sink, window, group, residual, budget, max_memory;
    bool reposition, quantize_sinks;
    const char *rope; /* --streaming-llm-rope */
    const char *device; /* --device */
    const char *rotate; /* --kv-rotate */
    const char *clip;   /* --kv-clip */
    tg_kv_precision both, keys, values, residual_precision;
} tg_cache_flags;

enum { TG_CACHE_OPT_COUNT = 16 };

/* After a command's argument parser: when *status is -1 (--help), prints usage and the cache flags' help on stdout,
 * sets *status to TG_EXIT_OK and returns true (the command is done); otherwise returns false. */
bool tg_help_printed(int *status, const char *usage);
/* Prints the --help text of the cache flags (one paragraph, ends with a newline; the precisions named are the
 * library's) to f; without_precision leaves out --kv-quantize, --kv-quantize-keys and
 * --kv-quantize-values (for a command with its own --kv-quantize). */
void tg_cache_flags_help(FILE *f, bool without_precision);
/* The library's KV precisions' names (tg_kv_precision_count / _name), joined by sep, into buf (cut at size). */
void tg_precision_names(char *buf, size_t size, const char *sep);

/* Fills opts[0 .. TG_CACHE_OPT_COUNT) with the cache options, writing into f (zeroed first). The caller puts them
 * in its own table (after its own options) and parses as usual. */
void tg_cache_flags_options(tg_cache_flags *f, tg_opt *opts);
/* The parse of a command whose table o holds n_before options of its own, then the cache flags (filled here, into
 * *cf): o must have room for n_before + TG_CACHE_OPT_COUNT entries. Returns as tg_args_parse_cmd. */
int tg_cache_args_parse(const char *cmd, int argc, char **argv, tg_opt *o, size_t n_before, tg_cache_flags *cf,
                        const char **pos, size_t max_pos, size_t *n_pos);

/* The cache policy the parsed options ask for into *out: the library's defaults for every option not given (opts is
 * the table filled by tg_cache_flags_options, after tg_args_parse). False, with one usage line on stderr naming
 * `cmd`, when the flags contradict each other (tg_rope_flags). */
bool tg_cache_flags_params(const char *cmd, const tg_cache_flags *f, const tg_opt *opts, tg_cache_params *out);

/* The RoPE positions that --streaming-llm-rope NAME (rope; NULL when not given) and its older alias
 * --streaming-llm-reposition (alias: given) ask for into *out: TG_ROPE_POSITIONS_DEFAULT when neither is given.
 * False, with one usage line on stderr, for a name other than reposition / original, or for the alias with
 * --streaming-llm-rope original. */
bool tg_rope_flags(const char *cmd, const char *rope, bool alias, tg_rope_positions *out);

/* Parses a byte size as TG_OPT_SIZE does ("64M" -> 67108864); false on anything else or overflow. */
bool tg_parse_size(const char *s, int64_t *out);

/* Prints "tinygpt <cmd>: <message>" and a newline on stderr; always returns TG_EXIT_USAGE. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
int tg_usage_error(const char *cmd, const char *fmt, ...);

/* Prints "tinygpt: <message>" and a newline on stderr; always returns TG_EXIT_ERROR. */
#if defined(__GNUC__)
__attribute__((format(printf, 1, 2)))
#endif
int tg_runtime_error(const char *fmt, ...);

#endif
