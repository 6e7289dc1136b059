/* pages.h — page-granular anonymous memory for large, long-lived buffers (the repacked weights). */
#ifndef TG_UTIL_PAGES_H
#define TG_UTIL_PAGES_H

#include <stddef.h>

/* n zeroed bytes (n > 0) in pages of their own, 2 MiB pages advised where the kernel offers them (MADV_HUGEPAGE);
 * NULL if the memory cannot be had. Large pages spare a gigabyte of weights hundreds of thousands of page faults at
 * load and TLB misses while decoding (docs/PERFORMANCE.md, Session 28). */
void *tg_pages_alloc(size_t n);
/* Frees a tg_pages_alloc buffer of n bytes; NULL does nothing. */
void tg_pages_free(void *p, size_t n);

#endif
