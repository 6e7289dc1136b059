/* sampling_flags.c — the sampling flags of `sample` and `chat` (sampling_flags.h). */
#define _POSIX_C_SOURCE 200809L
#include "cli/sampling_flags.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

enum { S_TEMP, S_TOPK, S_TOPP, S_SEED, S_REPPEN, S_REPN, S_MINP, S_STOP, S_END };
_Static_assert((int)S_END == (int)TG_SAMPLING_OPT_COUNT, "TG_SAMPLING_OPT_COUNT must count the sampling options");

void tg_sampling_flags_options(tg_sampling_flags *f, tg_opt *opts) {
    const tg_sampler_params d = tg_sampler_default_params();
    memset(f, 0, sizeof *f);
    f->temperature = d.temperature;
    f->top_k = d.top_k;
    f->top_p = d.top_p;
    f->repeat_penalty = d.repeat_penalty;
    f->repeat_last_n = d.repeat_last_n;
    f->min_p = d.min_p;
    memset(opts, 0, TG_SAMPLING_OPT_COUNT * sizeof *opts);
    opts[S_TEMP] = (tg_opt){.name = "--temperature", .kind = TG_OPT_FLOAT, .dest = &f->temperature, .flo = 0,
                            .fhi = 1e4};
    opts[S_TOPK] = (tg_opt){.name = "--top-k", .kind = TG_OPT_INT, .dest = &f->top_k, .lo = 0, .hi = INT32_MAX};
    opts[S_TOPP] = (tg_opt){.name = "--top-p", .kind = TG_OPT_FLOAT, .dest = &f->top_p, .flo = 0, .fhi = 1};
    opts[S_SEED] = (tg_opt){.name = "--seed", .alias = "-s", .kind = TG_OPT_U64, .dest = &f->seed};
    opts[S_REPPEN] = (tg_opt){.name = "--repeat-penalty", .kind = TG_OPT_FLOAT, .dest = &f->repeat_penalty, .flo = 0,
                              .fhi = 1e4};
    opts[S_REPN] = (tg_opt){.name = "--repeat-last-n", .kind = TG_OPT_INT, .dest = &f->repeat_last_n, .lo = 0,
                            .hi = TG_SAMPLER_MAX_LAST_N};
    opts[S_MINP] = (tg_opt){.name = "--min-p", .kind = TG_OPT_FLOAT, .dest = &f->min_p, .flo = 0, .fhi = 1};
    opts[S_STOP] = (tg_opt){.name = "--stop", .kind = TG_OPT_LIST, .dest = &f->stops};
}

/* A seed from the clock and the process id, short enough to retype (the banner prints it). */
static uint64_t clock_seed(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    return s % 1000000000000ull;
}

int tg_sampling_flags_params(const char *cmd, const tg_sampling_flags *f, const tg_opt *opts, tg_sampler_params *sp,
                             bool given[3]) {
    for (size_t i = 0; i < f->stops.n; i++)
        if (!f->stops.items[i][0]) return tg_usage_error(cmd, "--stop: expected a non-empty string");
    *sp = tg_sampler_default_params();
    sp->temperature = (float)f->temperature;
    sp->top_k = (int)f->top_k;
    sp->top_p = (float)f->top_p;
    sp->seed = opts[S_SEED].seen ? f->seed : clock_seed();
    sp->repeat_penalty = (float)f->repeat_penalty;
    sp->repeat_last_n = (int)f->repeat_last_n;
    sp->min_p = (float)f->min_p;
    given[0] = opts[S_TEMP].seen;
    given[1] = opts[S_TOPK].seen;
    given[2] = opts[S_TOPP].seen;
    return TG_EXIT_OK;
}

int tg_sampling_cache_parse(const char *cmd, int argc, char **argv, tg_opt *o, size_t n_own, tg_generate_flags *f) {
    f->n_pos = 0;
    tg_sampling_flags_options(&f->sampling, o + n_own);
    return tg_cache_args_parse(cmd, argc, argv, o, n_own + TG_SAMPLING_OPT_COUNT, &f->cache, f->pos, 1, &f->n_pos);
}
