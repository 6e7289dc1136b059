/* model_file.h — opening the files of a model without trusting them: a model path or any file of a Hugging Face
 * folder is opened non-blocking and must be a regular file (a FIFO or device never blocks the loader), and a file
 * of a folder must resolve inside that folder (a symlink elsewhere is refused by name, never read). Every reader of
 * a model file (GGUF, safetensors, config/tokenizer JSON) opens it through here. */
#ifndef TG_UTIL_MODEL_FILE_H
#define TG_UTIL_MODEL_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "tinygpt.h"

/* The largest JSON file of a folder that is read (tokenizer.json of large vocabularies is tens of MB). */
#define TG_JSON_MAX_BYTES ((size_t)256 << 20)

/* Opens path read-only with O_NONBLOCK and checks with fstat that it is a regular file. Returns the descriptor
 * (the file's size in *size) or -1 with err naming the path: "cannot open: <reason>", "is a directory",
 * "not a regular file (a FIFO)" (or a character device, block device, socket). When missing is not NULL it is set
 * to whether the path does not exist (ENOENT), so that an optional file can be skipped. */
int tg_file_open_regular(const char *path, size_t *size, bool *missing, tg_error *err);

/* Reads the whole regular file path (opened as above) into *data (malloc'd, NUL-terminated, *len bytes without the
 * NUL). A file over max_bytes is refused naming the limit. False with err naming the path; *missing as above. */
bool tg_file_read_all(const char *path, size_t max_bytes, char **data, size_t *len, bool *missing, tg_error *err);

/* Builds the path of file `name` of folder `dir` into out[cap] and checks that it stays in the folder: name must
 * be a plain file name (not empty, no '/', not "." or ".."), and the path's real location (symlinks followed) must
 * lie inside the folder's real location — or, for a Hugging Face hub snapshot (a folder inside ".../snapshots/"),
 * inside the repository's "blobs" folder, where the hub's symlinks point. `what` names the referrer in messages
 * (e.g. the index.json that named the file) or is NULL. A path that does not exist sets *missing (when not NULL)
 * and fails with "cannot open". False with err naming the file; nothing of the file is read. */
bool tg_folder_file(const char *dir, const char *name, const char *what, char *out, size_t cap, bool *missing,
                    tg_error *err);

#endif
