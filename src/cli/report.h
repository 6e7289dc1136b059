/* report.h — what the tool prints about a run on stderr: the banner before sampling, the speed and cache lines
 * after it, and the number formats they share with `tinygpt info`. */
#ifndef TG_CLI_REPORT_H
#define TG_CLI_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tinygpt.h"

/* bytes with the binary unit that suits them: "512 B", "4.8 KiB", "1.23 MiB", "2.00 GiB" (decimals for KiB up). */
void tg_fmt_bytes(double bytes, int decimals, char *buf, size_t cap);
/* A parameter count: "950", "27.31M", "1.10B". */
void tg_fmt_count(int64_t n, char *buf, size_t cap);

/* Three lines: the model, the cache policy (r->policy) and the sampling settings (seed included). */
void tg_report_banner(FILE *f, const char *model_path, const tg_model_info *info, const tg_cache_report *r,
                      const tg_sampler_params *sp, int threads);
/* "<what>: N tokens in S s (R tokens/s)". */
void tg_report_speed(FILE *f, const char *what, int64_t n_tokens, double seconds);
/* The two cache lines: tokens stored (and of how many seen, when they differ) and layers; the bytes allocated (for
 * r->capacity tokens) by part, per token, and what bf16 / fp32 storage of as many tokens would need. */
void tg_report_cache(FILE *f, const tg_cache_report *r);

#endif
