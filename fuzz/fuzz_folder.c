/* fuzz_folder.c — libFuzzer harness for a Hugging Face folder made of hostile files: which of the folder's files
 * exist and what each one is (a regular file, an empty file, a FIFO, a directory, a symlink inside the folder, out
 * of it, into the hub cache's blobs/, dangling, to a device), plus their bytes and an index.json naming shards.
 *
 * Input: parts separated by FUZZ_SEP. Part 0 is the layout, one byte per file of FOLDER_FILES (missing bytes: the
 * file is absent), its value % FOLDER_KINDS the kind of that file; part 1 + i holds file i's bytes. Every run
 * builds the folder in a fresh mkdtemp directory under /tmp (shaped like a hub snapshot,
 * <root>/models--fuzz/snapshots/rev, so that blobs/ links are meaningful), loads it with tg_model_load and removes it
 * again. Checks: the error contract (one non-empty line); the load never blocks (a FIFO opened without O_NONBLOCK
 * would hang the run: libFuzzer's -timeout reports it); a config.json or tokenizer.json that links out of the folder
 * is refused, never followed; no message quotes the bytes of the secret file outside the folder.
 *
 * A blocking open of a FIFO does not hang under libFuzzer: its SIGALRM watchdog (every -timeout/2 + 1 s) interrupts
 * open() with EINTR, so a blocked load returns after ~11 s with "Interrupted system call", below -timeout=20. The
 * harness therefore times the load itself and treats a slow load (or that message) as a broken contract. */
#include "fuzz_common.h"

#include <errno.h>
#include <ftw.h>
#include <sys/stat.h>
#include <time.h>

static const char *const FOLDER_FILES[] = {
    "config.json",          "tokenizer.json",           "tokenizer_config.json",
    "generation_config.json", "special_tokens_map.json", "model.safetensors",
    "model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
};
#define FOLDER_N (sizeof FOLDER_FILES / sizeof FOLDER_FILES[0])

typedef enum {
    KIND_ABSENT,
    KIND_FILE,       /* a regular file with the part's bytes */
    KIND_EMPTY,      /* an empty regular file */
    KIND_FIFO,       /* a FIFO nobody writes to */
    KIND_DIR,        /* an empty directory */
    KIND_LINK_IN,    /* a symlink to real-<name> in the folder, which holds the bytes */
    KIND_LINK_OUT,   /* a symlink to ../../outside-<name> (next to snapshots/), which holds the bytes */
    KIND_LINK_BLOB,  /* a symlink to ../../blobs/<name>, which holds the bytes (the hub cache's layout) */
    KIND_LINK_SECRET,/* a symlink to the secret file outside the folder */
    KIND_DANGLING,   /* a symlink to nothing */
    KIND_LINK_DEV,   /* a symlink to /dev/zero */
    FOLDER_KINDS
} file_kind;

/* A load of these few small files takes milliseconds; one this slow waited on something (a FIFO). */
#define FOLDER_SLOW_SECONDS 5.0

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The bytes of the file outside the folder that no message may quote. */
static const char SECRET[] = "TG-SECRET-7f3a9c: do not echo";

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)ftw;
    if (flag == FTW_DP) rmdir(path);
    else unlink(path);
    return 0;
}

/* Removes the run's folder (also before a broken contract aborts, so that no FIFO or folder is left in /tmp). */
static void remove_root(const char *root) {
    if (nftw(root, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 || access(root, F_OK) == 0) fuzz_die("cleanup", root);
}

/* fuzz_die after removing the run's folder. */
static void folder_die(const char *root, const char *what, const char *detail) {
    remove_root(root);
    fuzz_die(what, detail);
}

/* fuzz_check_error, removing the run's folder first when the contract is broken. */
static void folder_check_error(const char *root, const tg_error *err, const char *call) {
    if (err->msg[0] == '\0' || strchr(err->msg, '\n')) remove_root(root);
    fuzz_check_error(err, call);
}

static void write_at(const char *path, const uint8_t *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) fuzz_die("write", path);
}

static void make_dir(const char *path) {
    if (mkdir(path, 0700) != 0) fuzz_die("mkdir", path);
}

static void make_link(const char *target, const char *path) {
    if (symlink(target, path) != 0) fuzz_die("symlink", path);
}

/* Creates file i of kind k with bytes data[0..n) in snapshot folder dir (repo is its models--fuzz folder). */
static void materialise(const char *repo, const char *dir, size_t i, file_kind k, const uint8_t *data, size_t n) {
    const char *name = FOLDER_FILES[i];
    char path[512], other[512], target[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    switch (k) {
    case KIND_ABSENT: break;
    case KIND_FILE: write_at(path, data, n); break;
    case KIND_EMPTY: write_at(path, data, 0); break;
    case KIND_FIFO:
        if (mkfifo(path, 0600) != 0) fuzz_die("mkfifo", path);
        break;
    case KIND_DIR: make_dir(path); break;
    case KIND_LINK_IN:
        snprintf(other, sizeof other, "%s/real-%s", dir, name);
        write_at(other, data, n);
        snprintf(target, sizeof target, "real-%s", name);
        make_link(target, path);
        break;
    case KIND_LINK_OUT:
        snprintf(other, sizeof other, "%s/outside-%s", repo, name);
        write_at(other, data, n);
        snprintf(target, sizeof target, "../../outside-%s", name);
        make_link(target, path);
        break;
    case KIND_LINK_BLOB:
        snprintf(other, sizeof other, "%s/blobs/%s", repo, name);
        write_at(other, data, n);
        snprintf(target, sizeof target, "../../blobs/%s", name);
        make_link(target, path);
        break;
    case KIND_LINK_SECRET: make_link("../../secret", path); break;
    case KIND_DANGLING: make_link("nothing-here", path); break;
    case KIND_LINK_DEV: make_link("/dev/zero", path); break;
    case FOLDER_KINDS: break;
    }
}

/* True when s ends with tail: an interrupted open() is the whole end of the message, never a quoted name inside it
 * (a tensor name of those words in a header error is no hang). */
static bool ends_with(const char *s, const char *tail) {
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *part[1 + FOLDER_N];
    size_t len[1 + FOLDER_N];
    size_t n_parts = fuzz_split(data, size, part, len, 1 + FOLDER_N);

    char root[64] = "/tmp/tinygpt-fuzz-folder-XXXXXX";
    if (!mkdtemp(root)) fuzz_die("mkdtemp", root);
    char repo[128], dir[192], path[320];
    snprintf(repo, sizeof repo, "%s/models--fuzz", root);
    snprintf(dir, sizeof dir, "%s/snapshots", repo);
    make_dir(repo);
    make_dir(dir);
    snprintf(dir, sizeof dir, "%s/snapshots/rev", repo);
    make_dir(dir);
    snprintf(path, sizeof path, "%s/blobs", repo);
    make_dir(path);
    snprintf(path, sizeof path, "%s/secret", repo);
    write_at(path, (const uint8_t *)SECRET, sizeof SECRET - 1);

    file_kind kind[FOLDER_N];
    for (size_t i = 0; i < FOLDER_N; i++) {
        kind[i] = i < len[0] ? (file_kind)(part[0][i] % FOLDER_KINDS) : KIND_ABSENT;
        const uint8_t *bytes = 1 + i < n_parts ? part[1 + i] : NULL;
        materialise(repo, dir, i, kind[i], bytes, bytes ? len[1 + i] : 0);
    }

    tg_error err = {0};
    double t0 = now_seconds();
    tg_model *m = tg_model_load(dir, &err);
    double took = now_seconds() - t0;
    if (took > FOLDER_SLOW_SECONDS || (!m && ends_with(err.msg, ": cannot open: Interrupted system call"))) {
        char why[600];
        snprintf(why, sizeof why, "took %.1f s (blocked on a file?): %s", took, m ? "loaded" : err.msg);
        folder_die(root, "tg_model_load", why);
    }
    if (m) {
        /* what links out of the folder must not have been read */
        if (kind[0] == KIND_LINK_OUT || kind[0] == KIND_LINK_SECRET || kind[0] == KIND_LINK_DEV)
            folder_die(root, "tg_model_load", "loaded a config.json that links out of the folder");
        if (kind[1] == KIND_LINK_OUT || kind[1] == KIND_LINK_SECRET || kind[1] == KIND_LINK_DEV)
            folder_die(root, "tg_model_load", "loaded a tokenizer.json that links out of the folder");
        int32_t *ids = NULL;
        size_t n = 0;
        static const char text[] = "hello \xE2\x96\x81 world";
        if (tg_tokenize(m, text, sizeof text - 1, tg_model_adds_bos(m), &ids, &n, &err)) {
            for (size_t i = 0; i < n; i++)
                if (ids[i] < 0 || ids[i] >= tg_vocab_size(m))
                    folder_die(root, "tg_tokenize", "id outside the vocabulary");
        } else {
            folder_check_error(root, &err, "tg_tokenize");
        }
        free(ids);
        tg_model_free(m);
    } else {
        folder_check_error(root, &err, "tg_model_load");
        if (strstr(err.msg, "TG-SECRET") && !memmem(data, size, "TG-SECRET", 9))
            folder_die(root, "tg_model_load", "the message quotes the file outside the folder");
    }

    remove_root(root);
    return 0;
}
