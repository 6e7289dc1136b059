/* pages.c — page-granular anonymous memory (pages.h). */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS, madvise */
#define _DARWIN_C_SOURCE /* the same on macOS, whose headers hide them once _POSIX_C_SOURCE is set */
#include "util/pages.h"

#include <sys/mman.h>

void *tg_pages_alloc(size_t n) {
    if (n == 0) return NULL;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n, MADV_HUGEPAGE); /* advice: refused, the buffer works in small pages */
#endif
    return p;
}

void tg_pages_free(void *p, size_t n) {
    if (p) munmap(p, n);
}
