/* fuzz_common.h — helpers shared by the libFuzzer harnesses: writing an input to a file the readers can open,
 * splitting an input into parts, checking the one-line error contract, and validating UTF-8.
 *
 * The harnesses keep a little state in statics (a scratch folder, models loaded once): libFuzzer calls
 * LLVMFuzzerTestOneInput repeatedly in one process and offers no context pointer, so this is the one place in the
 * project where static mutable state is the norm. Library code never sees it. */
#ifndef TG_FUZZ_COMMON_H
#define TG_FUZZ_COMMON_H

#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tinygpt.h"

/* The separator between the parts of a multi-file input (also in fuzz/dict/parts.dict). */
#define FUZZ_SEP "\n@@TG-PART@@\n"
#define FUZZ_SEP_LEN (sizeof FUZZ_SEP - 1)

/* Aborts (a crash libFuzzer records) with a message: used for broken contracts, not for rejected input. */
static inline void fuzz_die(const char *what, const char *detail) {
    fprintf(stderr, "fuzz contract broken: %s: %s\n", what, detail ? detail : "");
    abort();
}

/* The contract of every failing call: a non-empty, one-line message. */
static inline void fuzz_check_error(const tg_error *err, const char *call) {
    if (err->msg[0] == '\0') fuzz_die(call, "failed with an empty message");
    if (strchr(err->msg, '\n')) fuzz_die(call, err->msg);
}

static char fuzz_scratch[256];

/* Removes the scratch folder and the files in it (at exit). */
static inline void fuzz_scratch_remove(void) {
    DIR *d = opendir(fuzz_scratch);
    if (!d) return;
    struct dirent *e;
    char path[512];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", fuzz_scratch, e->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(fuzz_scratch);
}

/* A fresh scratch folder (under /dev/shm when it exists, so that writes stay in memory), removed at exit; aborts on
 * failure. */
static inline const char *fuzz_scratch_dir(void) {
    if (fuzz_scratch[0]) return fuzz_scratch;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_scratch, sizeof fuzz_scratch, "%s/tinygpt-fuzz-XXXXXX", base);
    if (!mkdtemp(fuzz_scratch)) fuzz_die("mkdtemp", fuzz_scratch);
    atexit(fuzz_scratch_remove);
    return fuzz_scratch;
}

/* Writes n bytes to dir/name (replacing it); exits on failure. */
static inline void fuzz_write_file(const char *dir, const char *name, const uint8_t *data, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) fuzz_die("write", path);
}

/* Removes dir/name if present. */
static inline void fuzz_remove_file(const char *dir, const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
}

/* Splits data at FUZZ_SEP into at most max parts (the last takes the rest); returns the number of parts (>= 1). */
static inline size_t fuzz_split(const uint8_t *data, size_t size, const uint8_t **part, size_t *len, size_t max) {
    size_t n = 0;
    while (n + 1 < max) {
        const uint8_t *sep = memmem(data, size, FUZZ_SEP, FUZZ_SEP_LEN);
        if (!sep) break;
        part[n] = data;
        len[n] = (size_t)(sep - data);
        n++;
        size -= len[n - 1] + FUZZ_SEP_LEN;
        data = sep + FUZZ_SEP_LEN;
    }
    part[n] = data;
    len[n] = size;
    return n + 1;
}

/* Whether s[0..n) is valid UTF-8 (no overlongs, no surrogates, at most U+10FFFF). */
static inline bool fuzz_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            len = 2;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (n - i < len) return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
        if (overlong || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
        i += len;
    }
    return true;
}

/* The folder with the harnesses' fixed data (vocabularies, small models): $TG_FUZZ_DATA, else fuzz/data relative
 * to the working directory (fuzz/run.sh runs from the repository root). */
static inline const char *fuzz_data_dir(void) {
    const char *d = getenv("TG_FUZZ_DATA");
    return d && *d ? d : "fuzz/data";
}

/* The harnesses' tiny model, fuzz/data/tiny.gguf (or $TG_FUZZ_DATA/tiny.gguf); a load failure aborts. */
static inline tg_model *fuzz_load_tiny_model(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tiny.gguf", fuzz_data_dir());
    tg_error err = {0};
    tg_model *m = tg_model_load(path, &err);
    if (!m) fuzz_die("loading the tiny model", err.msg);
    return m;
}

#endif
