/* snapshot_file.c — session snapshots as files: written atomically (a temporary file beside the target, written
 * whole, fsync'ed, renamed over it, the directory fsync'ed), read whole with its size checked first. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tinygpt.h"
#include "util/error.h"

/* Writes p[n] to fd whole (retrying short writes and EINTR). */
static bool write_all(int fd, const uint8_t *p, size_t n) {
    while (n > 0) {
        const ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
    }
    return true;
}

/* fsync of the directory that holds path, so that the rename itself survives a crash (best effort: some file
 * systems refuse to open a directory for it). */
static void sync_dir_of(const char *path) {
    char *copy = strdup(path);
    if (!copy) return;
    const int fd = open(dirname(copy), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(copy);
}

bool tg_snapshot_write_file(const char *path, const void *buf, size_t len, tg_error *err) {
    if (!path || !buf) return tg_fail(err, "no snapshot file named");
    const size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp) return tg_fail(err, "%s: out of memory", path);
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        tg_fail(err, "%s: cannot write the snapshot: %s", path, strerror(errno));
        free(tmp);
        return false;
    }
    bool ok = write_all(fd, buf, len);
    int e = ok ? 0 : errno;
    if (ok && fsync(fd) != 0) ok = false, e = errno;
    if (close(fd) != 0 && ok) ok = false, e = errno;
    if (ok && rename(tmp, path) != 0) ok = false, e = errno;
    if (!ok) {
        unlink(tmp);
        tg_fail(err, "%s: cannot write the snapshot: %s", path, strerror(e ? e : EIO));
    } else {
        sync_dir_of(path);
    }
    free(tmp);
    return ok;
}

bool tg_session_save_file(const tg_session *s, const tg_snapshot_extras *extras, const char *path, tg_error *err) {
    if (!path) return tg_fail(err, "no snapshot file named");
    void *buf;
    size_t len;
    if (!tg_session_save(s, extras, &buf, &len, err)) return false;
    const bool ok = tg_snapshot_write_file(path, buf, len, err);
    free(buf);
    return ok;
}

bool tg_session_restore_file(tg_session *s, const char *path, tg_snapshot_restore *out, tg_error *err) {
    if (out) out->has_logits = false, out->app = NULL, out->app_len = 0;
    if (!path) return tg_fail(err, "no snapshot file named");
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tg_fail(err, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return tg_fail_code(err, TG_ERR_SNAPSHOT_CORRUPT, "%s: not a regular file", path);
    }
    const size_t len = (size_t)st.st_size;
    uint8_t *buf = malloc(len ? len : 1);
    if (!buf) {
        close(fd);
        return tg_fail(err, "%s: out of memory for %zu bytes", path, len);
    }
    size_t got = 0;
    while (got < len) {
        const ssize_t k = read(fd, buf + got, len - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    bool ok = tg_session_restore(s, buf, got, out, err);
    free(buf);
    if (!ok && err) {
        char msg[sizeof err->msg];
        memcpy(msg, err->msg, sizeof msg);
        tg_fail_code(err, err->code, "%s: %.400s", path, msg);
    }
    return ok;
}
