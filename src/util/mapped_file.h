/* mapped_file.h — a read-only memory map of a whole file. */
#ifndef TG_UTIL_MAPPED_FILE_H
#define TG_UTIL_MAPPED_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "tinygpt.h"

typedef struct {
    const uint8_t *data; /* NULL for an empty file */
    size_t size;
} tg_mapped_file;

/* Maps path read-only. False (err names the path and the reason) if it cannot be opened, is not a regular file
 * (opened non-blocking, so a FIFO or device is refused at once: tg_file_open_regular), or cannot be mapped. An empty file maps to data == NULL, size == 0. */
bool tg_mapped_file_open(tg_mapped_file *f, const char *path, tg_error *err);
/* Unmaps; safe on a zeroed or already closed struct. */
void tg_mapped_file_close(tg_mapped_file *f);
/* Gives back the whole pages inside [p, p + n) of a read-only private file mapping (MADV_DONTNEED) whose bytes there
 * the caller no longer reads: they stop counting towards the process's memory and, if touched again, are read from
 * the file again. Not for anonymous memory (its pages would read back as zeros). */
void tg_mapped_release(const void *p, size_t n);

#endif
