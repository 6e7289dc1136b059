/* park.c — parked conversations (park.h). Entries in one array, one per state, each in RAM (the snapshot's bytes)
 * or on disk (its file's name), with its token list in RAM for the prefix match, a tick for least-recently-parked
 * order and its conversation's number (the two states of one conversation share it; after a restart every file is
 * a conversation of its own). The
 * files are written with tg_snapshot_write_file (a temporary file, fsync, rename), so a killed server leaves
 * either no file or a whole one under NAME.tgsnap; a file's name is the FNV-1a hash of its bytes. */
#define _POSIX_C_SOURCE 200809L

#include "serve/park.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"

#define SUFFIX ".tgsnap"
#define TMP_MARK ".tgsnap.tmp."
/* the largest file indexed (a snapshot of a long unbounded cache is far below it) */
#define MAX_FILE ((int64_t)1 << 34)

typedef struct {
    int32_t *ids;  /* [n] the tokens the conversation holds */
    size_t n;
    void *buf;     /* RAM: the snapshot (len bytes); NULL on disk */
    size_t len;
    char *path;    /* disk: its file (len bytes) */
    uint64_t tick; /* when parked: the smallest is evicted first */
    uint64_t conv; /* its conversation (0: none known, a file found at start) */
    bool prompt;   /* the state where the conversation's prompt ended */
    bool paired;   /* the conversation's other state is parked too */
} entry;

struct tg_park {
    tg_park_config cfg;
    char *dir;
    const tg_model *model;
    pthread_mutex_t mu;
    entry *e;
    size_t n, cap;
    uint64_t tick, conv;
    tg_park_stats st;
};

/* What an entry counts against its budget: the snapshot and the token list. */
static int64_t entry_bytes(const entry *x) { return (int64_t)x->len + (int64_t)(x->n * sizeof *x->ids); }

static void entry_free(entry *x) {
    free(x->ids);
    free(x->buf);
    free(x->path);
    memset(x, 0, sizeof *x);
}

/* Removes entry i (its memory; the file, if any, is the caller's business); its conversation's other state, if
 * parked, is alone from then on. */
static void drop(tg_park *p, size_t i) {
    entry *x = &p->e[i];
    if (x->buf) {
        p->st.ram_bytes -= entry_bytes(x);
        p->st.ram_states--;
    } else {
        p->st.disk_bytes -= entry_bytes(x);
        p->st.disk_states--;
    }
    if (x->paired)
        for (size_t k = 0; k < p->n; k++)
            if (k != i && p->e[k].conv == x->conv) p->e[k].paired = false;
    entry_free(x);
    p->e[i] = p->e[--p->n];
}

static bool grow(tg_park *p) {
    if (p->n < p->cap) return true;
    const size_t cap = p->cap ? p->cap * 2 : 64;
    entry *e = realloc(p->e, cap * sizeof *e);
    if (!e) return false;
    p->e = e;
    p->cap = cap;
    return true;
}

static uint64_t fnv1a(const uint8_t *b, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The temporary file a crash would leave: the first `keep` bytes of buf under the writer's temporary name, then
 * SIGKILL (tg_park_config.test_kill_in_write). */
static void die_mid_write(const char *path, const void *buf, size_t len, int64_t keep) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    const int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        const size_t n = (uint64_t)keep < len ? (size_t)keep : len / 2;
        const ssize_t k = write(fd, buf, n);
        (void)k; /* dying either way */
        fsync(fd);
    }
    raise(SIGKILL);
}

/* Moves RAM entry i to a file (or drops it when there is no dir, it exceeds the disk budget or the write fails);
 * evicted: for lack of RAM (counted). */
static void to_disk(tg_park *p, size_t i, bool evicted) {
    entry *x = &p->e[i];
    if (evicted) p->st.ram_evictions++;
    if (!p->dir || (int64_t)x->len + (int64_t)(x->n * sizeof *x->ids) > p->cfg.disk_budget) {
        drop(p, i);
        return;
    }
    const size_t plen = strlen(p->dir) + 32;
    char *path = malloc(plen);
    if (!path) {
        drop(p, i);
        return;
    }
    snprintf(path, plen, "%s/%016llx" SUFFIX, p->dir, (unsigned long long)fnv1a(x->buf, x->len));
    if (p->cfg.test_kill_in_write > 0) die_mid_write(path, x->buf, x->len, p->cfg.test_kill_in_write);
    tg_error err = {0};
    if (!tg_snapshot_write_file(path, x->buf, x->len, &err)) {
        p->st.write_errors++;
        free(path);
        drop(p, i);
        return;
    }
    p->st.ram_bytes -= entry_bytes(x);
    p->st.ram_states--;
    free(x->buf);
    x->buf = NULL;
    x->path = path;
    p->st.disk_bytes += entry_bytes(x);
    p->st.disk_states++;
}

/* The oldest entry in RAM (want_ram) or on disk; -1 when none. */
static ptrdiff_t oldest(const tg_park *p, bool want_ram) {
    ptrdiff_t best = -1;
    for (size_t i = 0; i < p->n; i++)
        if ((p->e[i].buf != NULL) == want_ram && (best < 0 || p->e[i].tick < p->e[best].tick)) best = (ptrdiff_t)i;
    return best;
}

/* Evicts the oldest until both tiers are within their budgets. */
static void enforce(tg_park *p) {
    ptrdiff_t i;
    while (p->st.ram_bytes > p->cfg.ram_budget && (i = oldest(p, true)) >= 0) to_disk(p, (size_t)i, true);
    while (p->st.disk_bytes > p->cfg.disk_budget && (i = oldest(p, false)) >= 0) {
        unlink(p->e[i].path);
        p->st.disk_evictions++;
        drop(p, (size_t)i);
    }
}

/* ---- the directory at start ---------------------------------------------------------------------------------- */

/* The whole file at path (at most MAX_FILE bytes) into *buf; false when it cannot be read. */
static bool read_file(const char *path, void **buf, size_t *len) {
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 || st.st_size > MAX_FILE) {
        close(fd);
        return false;
    }
    const size_t n = (size_t)st.st_size;
    uint8_t *b = malloc(n ? n : 1);
    size_t got = 0;
    while (b && got < n) {
        const ssize_t k = read(fd, b + got, n - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        got += (size_t)k;
    }
    close(fd);
    if (!b || got != n) {
        free(b);
        return false;
    }
    *buf = b;
    *len = n;
    return true;
}

static bool ends_with(const char *s, const char *suffix) {
    const size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

typedef struct {
    char *path;
    struct timespec mtime;
} found;

static int by_mtime(const void *a, const void *b) {
    const found *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec) return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec) return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* Indexes the directory's snapshots, oldest first (so that the newest are evicted last). */
static bool index_dir(tg_park *p, tg_error *err) {
    DIR *d = opendir(p->dir);
    if (!d) return tg_fail(err, "--park-dir %s: %s", p->dir, strerror(errno));
    found *list = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    for (struct dirent *de; ok && (de = readdir(d)) != NULL;) {
        const size_t plen = strlen(p->dir) + strlen(de->d_name) + 2;
        char *path = malloc(plen);
        if (!path) {
            ok = false;
            break;
        }
        snprintf(path, plen, "%s/%s", p->dir, de->d_name);
        struct stat st;
        if (strstr(de->d_name, TMP_MARK)) {
            unlink(path); /* a write that a crash cut short */
            free(path);
            continue;
        }
        if (!ends_with(de->d_name, SUFFIX) || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) {
            free(path);
            continue;
        }
        if (n == cap) {
            found *grown = realloc(list, (cap = cap ? cap * 2 : 64) * sizeof *list);
            if (!grown) {
                free(path);
                ok = false;
                break;
            }
            list = grown;
        }
        list[n++] = (found){path, st.st_mtim};
    }
    closedir(d);
    if (ok && n > 1) qsort(list, n, sizeof *list, by_mtime);
    for (size_t i = 0; i < n; i++) {
        void *buf = NULL;
        size_t len = 0;
        entry x = {0};
        if (ok && read_file(list[i].path, &buf, &len) &&
            tg_snapshot_tokens(buf, len, &x.ids, &x.n, &(tg_error){0}) && grow(p)) {
            x.len = len;
            x.path = list[i].path;
            list[i].path = NULL;
            x.tick = ++p->tick;
            p->e[p->n++] = x;
            p->st.disk_bytes += entry_bytes(&x);
            p->st.disk_states++;
        } else if (ok) {
            free(x.ids);
            p->st.disk_refused++;
        }
        free(buf);
        free(list[i].path);
    }
    free(list);
    if (!ok) return tg_fail(err, "--park-dir %s: out of memory", p->dir);
    enforce(p);
    return true;
}

/* ---- the store ------------------------------------------------------------------------------------------------ */

tg_park *tg_park_new(const tg_park_config *c, const tg_model *model, tg_error *err) {
    tg_park *p = calloc(1, sizeof *p);
    if (!p) {
        tg_fail(err, "out of memory");
        return NULL;
    }
    p->cfg = *c;
    p->model = model;
    pthread_mutex_init(&p->mu, NULL);
    if (c->dir && c->ram_budget > 0) {
        p->dir = strdup(c->dir);
        if (!p->dir) {
            tg_fail(err, "out of memory");
            tg_park_free(p);
            return NULL;
        }
        if (mkdir(p->dir, 0755) != 0 && errno != EEXIST) {
            tg_fail(err, "--park-dir %s: cannot create it: %s", p->dir, strerror(errno));
            tg_park_free(p);
            return NULL;
        }
        if (!index_dir(p, err)) {
            tg_park_free(p);
            return NULL;
        }
    }
    return p;
}

void tg_park_free(tg_park *p) {
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) entry_free(&p->e[i]);
    free(p->e);
    free(p->dir);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

bool tg_park_enabled(const tg_park *p) { return p && p->cfg.ram_budget > 0; }

/* Adds x (its ids and buf filled) to RAM; false when the array cannot grow (x is not freed). */
static bool add(tg_park *p, entry *x) {
    if (!grow(p)) return false;
    x->tick = ++p->tick;
    p->e[p->n++] = *x;
    p->st.ram_bytes += entry_bytes(x);
    p->st.ram_states++;
    return true;
}

/* A malloc'ed copy of ids[n]; NULL when memory runs out. */
static int32_t *copy_ids(const int32_t *ids, size_t n) {
    int32_t *c = malloc((n ? n : 1) * sizeof *c);
    if (c) memcpy(c, ids, n * sizeof *ids);
    return c;
}

void tg_park_put(tg_park *p, const tg_sequence *q, const int32_t *ids, size_t n, void *prompt_snap, size_t prompt_len,
                 size_t n_prompt) {
    if (prompt_snap && (n_prompt == 0 || n_prompt >= n)) { /* no prompt state apart from the end's */
        free(prompt_snap);
        prompt_snap = NULL;
    }
    if (!tg_park_enabled(p) || n == 0) {
        free(prompt_snap);
        return;
    }
    entry end = {0}, pr = {0};
    tg_error err = {0};
    if (!tg_sequence_save(q, ids, n, NULL, &end.buf, &end.len, &err) || !(end.ids = copy_ids(ids, n))) {
        free(end.buf);
        free(prompt_snap);
        return;
    }
    end.n = n;
    if (prompt_snap) {
        pr = (entry){.buf = prompt_snap, .len = prompt_len, .ids = copy_ids(ids, n_prompt), .n = n_prompt,
                     .prompt = true};
        if (!pr.ids) entry_free(&pr);
    }
    pthread_mutex_lock(&p->mu);
    end.conv = pr.conv = ++p->conv;
    end.paired = pr.paired = pr.buf != NULL;
    /* the prompt's state first: of the two, the one evicted first */
    if (pr.buf && !add(p, &pr)) {
        entry_free(&pr);
        end.paired = false;
    }
    if (!add(p, &end)) {
        entry_free(&end);
        if (pr.buf) p->e[p->n - 1].paired = false;
    }
    enforce(p);
    pthread_mutex_unlock(&p->mu);
}

bool tg_park_hold(tg_park *p, int64_t bytes) {
    if (!tg_park_enabled(p) || bytes < 0) return false;
    pthread_mutex_lock(&p->mu);
    const bool ok = bytes <= p->cfg.ram_budget - p->st.held_bytes;
    if (ok) p->st.held_bytes += bytes;
    pthread_mutex_unlock(&p->mu);
    return ok;
}

void tg_park_release(tg_park *p, int64_t bytes) {
    if (!p || bytes <= 0) return;
    pthread_mutex_lock(&p->mu);
    p->st.held_bytes -= bytes;
    pthread_mutex_unlock(&p->mu);
}

/* Whether e's tokens are a strict prefix of ids[n]. */
static bool extends(const entry *x, const int32_t *ids, size_t n) {
    return x->n < n && memcmp(x->ids, ids, x->n * sizeof *ids) == 0;
}

/* Drops the parked state of conversation conv (the other one of a pair that was taken), its file removed. */
static void drop_conv(tg_park *p, uint64_t conv) {
    for (size_t k = 0; k < p->n; k++) {
        if (p->e[k].conv != conv) continue;
        if (!p->e[k].buf) unlink(p->e[k].path);
        drop(p, k);
        return;
    }
}

/* Restores entry i into q, unparking it and its conversation's other state; false when it is refused (another
 * policy: kept; a damaged file: dropped). */
static bool restore(tg_park *p, size_t i, tg_sequence *q) {
    entry *x = &p->e[i];
    tg_error err = {0};
    void *buf = x->buf;
    size_t len = x->len;
    if (!buf && !read_file(x->path, &buf, &len)) {
        p->st.disk_refused++;
        drop(p, i);
        return false;
    }
    const bool ok = tg_sequence_restore(q, buf, len, NULL, NULL, NULL, &err);
    if (buf != x->buf) free(buf);
    if (ok) {
        const uint64_t conv = x->conv;
        const bool paired = x->paired;
        if (!x->buf) unlink(x->path);
        drop(p, i);
        if (paired) drop_conv(p, conv);
        return true;
    }
    if (err.code == TG_ERR_SNAPSHOT_POLICY) return false;
    if (!x->buf) {
        p->st.disk_refused++;
        unlink(x->path);
    }
    drop(p, i);
    return false;
}

/* Orders candidates by their token count, longest first. */
static int longest_first(const void *a, const void *b) {
    const entry *x = *(const entry *const *)a, *y = *(const entry *const *)b;
    return x->n != y->n ? (x->n > y->n ? -1 : 1) : (x->tick > y->tick ? -1 : x->tick < y->tick);
}

size_t tg_park_take(tg_park *p, tg_sequence *q, const int32_t *ids, size_t n) {
    if (!tg_park_enabled(p)) return 0;
    pthread_mutex_lock(&p->mu);
    /* the candidates' ticks, longest first (a restore may move entries in the array; ticks are unique) */
    size_t n_cand = 0;
    uint64_t *ticks = malloc((p->n ? p->n : 1) * sizeof *ticks);
    const entry **cand = malloc((p->n ? p->n : 1) * sizeof *cand);
    if (ticks && cand) {
        for (size_t i = 0; i < p->n; i++)
            if (extends(&p->e[i], ids, n)) cand[n_cand++] = &p->e[i];
        qsort(cand, n_cand, sizeof *cand, longest_first);
        for (size_t k = 0; k < n_cand; k++) ticks[k] = cand[k]->tick;
    }
    size_t got = 0;
    bool got_prompt = false;
    for (size_t k = 0; k < n_cand && !got; k++) {
        for (size_t i = 0; i < p->n; i++) {
            if (p->e[i].tick != ticks[k]) continue;
            const size_t len = p->e[i].n;
            const bool prompt = p->e[i].prompt;
            if (restore(p, i, q)) {
                got = len;
                got_prompt = prompt;
            }
            break;
        }
    }
    free(ticks);
    free(cand);
    if (got) {
        p->st.hits++;
        p->st.prompt_hits += got_prompt;
        p->st.reused_tokens += (int64_t)got;
    } else {
        p->st.misses++;
    }
    pthread_mutex_unlock(&p->mu);
    return got;
}

void tg_park_flush(tg_park *p) {
    if (!p || !p->dir) return;
    pthread_mutex_lock(&p->mu);
    ptrdiff_t i;
    while ((i = oldest(p, true)) >= 0) to_disk(p, (size_t)i, false);
    enforce(p);
    pthread_mutex_unlock(&p->mu);
}

void tg_park_get_stats(tg_park *p, tg_park_stats *s) {
    memset(s, 0, sizeof *s);
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    *s = p->st;
    /* conversations: each by its end's state, or by its prompt's when that is parked alone */
    for (size_t i = 0; i < p->n; i++) {
        if (p->e[i].prompt && p->e[i].paired) continue;
        if (p->e[i].buf) s->ram_count++;
        else s->disk_count++;
    }
    pthread_mutex_unlock(&p->mu);
}
