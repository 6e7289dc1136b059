/* cmd_tokenize.c — `tinygpt tokenize MODEL TEXT [--bos]`: the token ids of TEXT, space-separated on one line. Works
 * on vocab-only GGUF files. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/bundled.h"
#include "cli/cli.h"

static const char USAGE[] =
    "usage: tinygpt tokenize [MODEL] TEXT [--bos]\n"
    "\n"
    "Prints the token ids of TEXT, space-separated on one line. MODEL may be a vocab-only GGUF file, or a Hugging\n"
    "Face folder of which only tokenizer.json (and tokenizer_config.json) is read; with TEXT alone, the bundled\n"
    "model " TG_BUNDLED_MODEL ".\n"
    "\n"
    "  --bos   put the BOS token first (default: no BOS)\n"
    "  --      ends the options (for a TEXT that starts with '-')\n";

int tg_cmd_tokenize(int argc, char **argv) {
    bool bos = false;
    tg_opt opts[] = {
        {.name = "--bos", .kind = TG_OPT_FLAG, .dest = &bos},
    };
    const char *pos[2];
    size_t n_pos = 0;
    int parsed;
    if (tg_args_parse_done("tokenize", USAGE, argc, argv, opts, sizeof opts / sizeof opts[0], pos, 2, &n_pos, &parsed))
        return parsed;
    if (n_pos < 1) return tg_usage_error("tokenize", "expected [MODEL] TEXT (see tinygpt tokenize --help)");
    char bundled[4200];
    const char *path;
    tg_model *model = tg_load_model_or_bundled(n_pos == 2 ? pos[0] : NULL, "tokenize", TG_NEED_TOKENIZER, &path,
                                               bundled, sizeof bundled);
    if (!model) return TG_EXIT_ERROR;
    const char *text = pos[n_pos - 1];
    tg_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    if (!tg_tokenize(model, text, strlen(text), bos, &ids, &n, &err)) {
        tg_model_free(model);
        return tg_runtime_error("%s", err.msg);
    }
    for (size_t i = 0; i < n; i++) printf(i ? " %" PRId32 : "%" PRId32, ids[i]);
    putchar('\n');
    free(ids);
    tg_model_free(model);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        if (errno == EPIPE) return TG_EXIT_OK;
        return tg_runtime_error("writing to stdout: %s", strerror(errno));
    }
    return TG_EXIT_OK;
}
