/* bundled.h — the bundled model (models/tinygpt-flagship.gguf next to the executable), the model of every command
 * that is given none. */
#ifndef TG_CLI_BUNDLED_H
#define TG_CLI_BUNDLED_H

#include <stddef.h>

#include "tinygpt.h"

#define TG_BUNDLED_MODEL "models/tinygpt-flagship.gguf"

/* The model `cmd` runs on: `given` when not NULL, else the bundled model found next to the executable (or two
 * levels up, for the build/<variant>/tinygpt binaries), written into buf[cap]. NULL after printing one error line
 * ("no MODEL given and the bundled model ... was not found (looked next to DIR); pass one: tinygpt CMD MODEL ...")
 * when there is none. */
const char *tg_model_or_bundled(const char *given, const char *cmd, char *buf, size_t cap);

/* tg_model_or_bundled, then tg_model_load_for(path, need): the loaded model (the caller frees it) and in *path the
 * path it came from (`given` or buf). NULL after printing one error line, when there is no model or it fails to
 * load; the command then exits with TG_EXIT_ERROR. */
tg_model *tg_load_model_or_bundled(const char *given, const char *cmd, tg_model_need need, const char **path, char *buf,
                                   size_t cap);

#endif
