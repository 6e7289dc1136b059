/* darwin_ext.h — `make check-posix`'s stand-in for the few calls beyond POSIX.1-2008 that tinygpt uses unguarded
 * and macOS declares (with _DARWIN_C_SOURCE, which the files that use them define): with glibc's headers in strict
 * POSIX mode, everything else a file calls must be POSIX or sit behind an #if of its platform. Declarations only
 * (the check is syntax only); the values are macOS's. */
#ifndef TG_TESTS_POSIX_DARWIN_EXT_H
#define TG_TESTS_POSIX_DARWIN_EXT_H

#include <stddef.h>

void *memmem(const void *big, size_t big_len, const void *little, size_t little_len); /* <string.h> */
int madvise(void *addr, size_t len, int advice);                                      /* <sys/mman.h> */
#define MADV_DONTNEED 4
#define MAP_ANONYMOUS 0x1000

#endif
