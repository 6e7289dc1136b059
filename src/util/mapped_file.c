/* mapped_file.c — a read-only memory map of a whole file. */
#define _POSIX_C_SOURCE 200809L
#include "util/mapped_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

bool tg_mapped_file_open(tg_mapped_file *f, const char *path, tg_error *err) {
    f->data = NULL;
    f->size = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return tg_fail(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tg_fail(err, "%s: cannot stat: %s", path, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return tg_fail(err, "%s: is a directory, expected a file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return true;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return tg_fail(err, "%s: cannot map: %s", path, strerror(e));
    f->data = p;
    f->size = (size_t)st.st_size;
    return true;
}

void tg_mapped_file_close(tg_mapped_file *f) {
    if (f && f->data) munmap((void *)f->data, f->size);
    if (f) {
        f->data = NULL;
        f->size = 0;
    }
}
