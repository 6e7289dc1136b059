/* sampling_flags.h — the sampling flags shared by `sample` and `chat`: --temperature, --top-k, --top-p, --seed/-s,
 * --repeat-penalty, --repeat-last-n, --min-p and --stop, one option table with one set of ranges and defaults (each
 * command's --help describes them in its own terms). */
#ifndef TG_CLI_SAMPLING_FLAGS_H
#define TG_CLI_SAMPLING_FLAGS_H

#include <stdbool.h>

#include "cli/args.h"

/* Where the sampling flags are parsed to. */
typedef struct {
    double temperature, top_p, repeat_penalty, min_p;
    int64_t top_k, repeat_last_n;
    uint64_t seed;
    tg_opt_list stops;
} tg_sampling_flags;

enum { TG_SAMPLING_OPT_COUNT = 8 };

/* Fills opts[0 .. TG_SAMPLING_OPT_COUNT) with the sampling options, writing into f (set to the defaults of
 * tg_sampler_default_params first). The caller puts them in its own table and parses as usual. */
void tg_sampling_flags_options(tg_sampling_flags *f, tg_opt *opts);

/* What tg_sampling_cache_parse fills: the sampling and cache flags and the command's one optional MODEL argument. */
typedef struct {
    tg_sampling_flags sampling;
    tg_cache_flags cache;
    const char *pos[1]; /* MODEL, when n_pos is 1 */
    size_t n_pos;
} tg_generate_flags;

/* The parse of a command that takes its own options o[0 .. n_own), then the sampling flags and the cache flags at
 * o + n_own, and at most one positional argument, all into *f: o must have room for n_own + TG_SAMPLING_OPT_COUNT +
 * TG_CACHE_OPT_COUNT entries. Returns as tg_args_parse_cmd. */
int tg_sampling_cache_parse(const char *cmd, int argc, char **argv, tg_opt *o, size_t n_own, tg_generate_flags *f);

/* After tg_args_parse: the sampler settings (the seed from the clock when --seed was not given) into *sp, and in
 * given[3] whether --temperature, --top-k and --top-p were given (a model's generation defaults apply to the others).
 * TG_EXIT_OK, or TG_EXIT_USAGE after one line naming cmd (an empty --stop). */
int tg_sampling_flags_params(const char *cmd, const tg_sampling_flags *f, const tg_opt *opts, tg_sampler_params *sp,
                             bool given[3]);

#endif
