/* mapped_file.c — a read-only memory map of a whole file. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* madvise */
#define _DARWIN_C_SOURCE /* the same on macOS, whose headers hide them once _POSIX_C_SOURCE is set */
#include "util/mapped_file.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "util/error.h"
#include "util/model_file.h"

bool tg_mapped_file_open(tg_mapped_file *f, const char *path, tg_error *err) {
    f->data = NULL;
    f->size = 0;
    size_t size;
    int fd = tg_file_open_regular(path, &size, NULL, err);
    if (fd < 0) return false;
    if (size == 0) {
        close(fd);
        return true;
    }
    void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return tg_fail(err, "%s: cannot map: %s", path, strerror(e));
    f->data = p;
    f->size = size;
    return true;
}

void tg_mapped_file_close(tg_mapped_file *f) {
    if (f && f->data) munmap((void *)f->data, f->size);
    if (f) {
        f->data = NULL;
        f->size = 0;
    }
}

void tg_mapped_release(const void *p, size_t n) {
    const long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || !p) return;
    const uintptr_t ps = (uintptr_t)page, a = ((uintptr_t)p + ps - 1) / ps * ps, e = ((uintptr_t)p + n) / ps * ps;
    if (e > a) (void)madvise((void *)a, e - a, MADV_DONTNEED); /* advice: its failure changes nothing read */
}
