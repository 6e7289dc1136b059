/* pages.h — page-granular anonymous memory for large, long-lived buffers (the repacked weights). */
#ifndef TG_UTIL_PAGES_H
#define TG_UTIL_PAGES_H

#include <stddef.h>

/* n zeroed bytes (n > 0) in pages of their own, 2 MiB pages advised where the kernel offers them (MADV_HUGEPAGE);
 * NULL if the memory cannot be had. Session 28, the repacked weights of TinyLlama-1.1B Q8_0 (1.1 GB), one load of
 * `tinygpt sample` each: 0.42-0.78 s with the advice (one run in five 3.0 s: the kernel compacting memory for the
 * pages), 0.8-2.1 s without (the sys time of 270,000 page faults); decoding 2-6 % faster with it. */
void *tg_pages_alloc(size_t n);
/* Frees a tg_pages_alloc buffer of n bytes; NULL does nothing. */
void tg_pages_free(void *p, size_t n);

#endif
