/* free_all.h — freeing a destructor's plain heap blocks in one call. */
#ifndef TG_UTIL_FREE_ALL_H
#define TG_UTIL_FREE_ALL_H

#include <stddef.h>
#include <stdlib.h>

/* free() of ptrs[0..n) (NULL entries are fine). */
static inline void tg_free_all(size_t n, void *const *ptrs) {
    for (size_t i = 0; i < n; i++) free(ptrs[i]);
}

/* TG_FREE_ALL(a, b, c): free(a); free(b); free(c); — the arguments are evaluated once each, in any order. */
#define TG_FREE_ALL(...) tg_free_all(sizeof((void *[]){__VA_ARGS__}) / sizeof(void *), (void *[]){__VA_ARGS__})

#endif
