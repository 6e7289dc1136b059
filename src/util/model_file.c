/* model_file.c — opening the files of a model: non-blocking, regular files only, inside their folder. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* realpath */
#define _DARWIN_C_SOURCE /* the same on macOS, whose headers hide them once _POSIX_C_SOURCE is set */
#include "util/model_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

/* What a non-regular file is, for "not a regular file (a FIFO)". */
static const char *kind_of(mode_t m) {
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a plain file";
}

int tg_file_open_regular(const char *path, size_t *size, bool *missing, tg_error *err) {
    if (missing) *missing = false;
    *size = 0;
    /* O_NONBLOCK: opening a FIFO without a writer (or a tty, or some devices) would otherwise wait forever. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (missing) *missing = e == ENOENT;
        if (e == ENXIO) /* a socket, or a FIFO on some systems */
            return tg_fail(err, "%s: not a regular file", path), -1;
        return tg_fail(err, "%s: cannot open: %s", path, strerror(e)), -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tg_fail(err, "%s: cannot stat: %s", path, strerror(e)), -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        if (S_ISDIR(st.st_mode)) return tg_fail(err, "%s: is a directory", path), -1;
        return tg_fail(err, "%s: not a regular file (%s)", path, kind_of(st.st_mode)), -1;
    }
    if (st.st_size < 0 || (uintmax_t)st.st_size > SIZE_MAX) {
        close(fd);
        return tg_fail(err, "%s: file too large", path), -1;
    }
    *size = (size_t)st.st_size;
    return fd;
}

bool tg_file_read_all(const char *path, size_t max_bytes, char **data, size_t *len, bool *missing, tg_error *err) {
    *data = NULL;
    *len = 0;
    size_t size;
    int fd = tg_file_open_regular(path, &size, missing, err);
    if (fd < 0) return false;
    if (size > max_bytes) {
        close(fd);
        return tg_fail(err, "%s: %zu bytes, over the limit of %zu bytes for this file", path, size, max_bytes);
    }
    /* The size is a hint (a file may change while read): reading goes on to the end of the file, one byte past the
     * limit at most. The buffer always has room for the NUL. */
    size_t cap = size + 2, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return tg_fail(err, "%s: out of memory (%zu bytes)", path, cap);
    }
    for (;;) {
        if (n > max_bytes) {
            free(buf);
            close(fd);
            return tg_fail(err, "%s: over the limit of %zu bytes for this file", path, max_bytes);
        }
        if (n + 1 == cap) {
            size_t ncap = cap > max_bytes / 2 ? max_bytes + 2 : cap * 2;
            char *nb = realloc(buf, ncap);
            if (!nb) {
                free(buf);
                close(fd);
                return tg_fail(err, "%s: out of memory (%zu bytes)", path, ncap);
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return tg_fail(err, "%s: cannot read: %s", path, strerror(e));
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return true;
}

/* Whether real path p lies strictly inside real folder dir (both absolute, without symlinks or "..". */
static bool inside(const char *p, const char *dir) {
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/') return p[0] == '/' && p[1] != '\0';
    return strncmp(p, dir, n) == 0 && p[n] == '/' && p[n + 1] != '\0';
}

/* For a Hugging Face hub snapshot .../models--org--name/snapshots/<revision>: writes .../models--org--name/blobs
 * into out and returns true; false for any other folder. */
static bool hub_blobs_dir(const char *real_dir, char *out, size_t cap) {
    const char *rev = strrchr(real_dir, '/');
    if (!rev || rev == real_dir) return false;
    static const char snap[] = "/snapshots";
    size_t parent_len = (size_t)(rev - real_dir);
    if (parent_len < sizeof snap - 1 || memcmp(rev - (sizeof snap - 1), snap, sizeof snap - 1) != 0) return false;
    size_t repo_len = parent_len - (sizeof snap - 1);
    if (repo_len == 0) return false;
    int k = snprintf(out, cap, "%.*s/blobs", (int)repo_len, real_dir);
    return k > 0 && (size_t)k < cap;
}

bool tg_folder_file(const char *dir, const char *name, const char *what, char *out, size_t cap, bool *missing,
                    tg_error *err) {
    if (missing) *missing = false;
    const char *by = what ? what : dir;
    if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return tg_fail(err, "%s: '%.200s' is not a plain file name inside the folder (absolute paths, '/' and '..' "
                            "are refused)", by, name);
    int k = snprintf(out, cap, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= cap) return tg_fail(err, "%s/%.200s: path too long", dir, name);
    char real_dir[PATH_MAX], real[PATH_MAX];
    if (!realpath(out, real)) {
        int e = errno;
        if (missing) *missing = e == ENOENT;
        return tg_fail(err, "%s: cannot open: %s", out, strerror(e));
    }
    if (!realpath(dir, real_dir)) return tg_fail(err, "%s: cannot open: %s", dir, strerror(errno));
    if (inside(real, real_dir)) return true;
    char blobs[PATH_MAX];
    if (hub_blobs_dir(real_dir, blobs, sizeof blobs) && inside(real, blobs)) return true;
    return tg_fail(err, "%s: a symlink that leaves the model folder (to %.300s); refused", out, real);
}
