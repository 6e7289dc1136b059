/* main.c — the tinygpt tool's entry point: picks the command and hands it the remaining words. */
#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "tinygpt.h"

/* The tool's version: the library's (include/tinygpt.h). */
#define TINYGPT_VERSION TG_VERSION_STRING

static const char USAGE[] =
    "tinygpt — a small inference engine for Llama-family models with a bounded, compressed KV cache\n"
    "\n"
    "usage: tinygpt <command> [arguments]\n"
    "\n"
    "commands:\n"
    "  sample [MODEL] --prompt TEXT   generate a continuation of TEXT (MODEL defaults to the bundled model)\n"
    "  chat [MODEL]                   talk to an instruction-tuned model through its chat template\n"
    "  tokenize [MODEL] TEXT [--bos]  print the token ids of TEXT\n"
    "  info [MODEL] [--cache-table]   print the model's hyper-parameters and KV cache sizes (--json: as JSON)\n"
    "  perplexity [MODEL] FILE        perplexity of FILE through the KV cache (teacher-forced)\n"
    "  compare [MODEL] --prompts FILE greedy prefix match of each cache precision against an fp32 cache\n"
    "  bench [MODEL] [--depth D,...]  prompt and generation speed, peak RSS and the memory-bandwidth roofline\n"
    "  serve [MODEL] [--port N]       an OpenAI-compatible HTTP server: many sessions in one KV budget\n"
    "  help                           print this message\n"
    "  --version                      print the version\n"
    "\n"
    "MODEL is a GGUF file or a Hugging Face folder (config.json, *.safetensors, tokenizer.json); without it, every\n"
    "command uses the bundled model models/tinygpt-flagship.gguf next to the executable.\n"
    "`tinygpt <command> --help` describes a command's options.\n"
    "Exit status: 0 success, 1 error, 2 bad usage.\n";

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(USAGE, stderr);
        return TG_EXIT_USAGE;
    }
    /* A closed stdout (`tinygpt sample | head`) must show up as EPIPE from write, not kill the process. */
    signal(SIGPIPE, SIG_IGN);
    const char *cmd = argv[1];
    int sub_argc = argc - 2;
    char **sub_argv = argv + 2;
    char help[] = "--help";
    char *help_argv[] = {help, NULL};
    if (strcmp(cmd, "help") == 0 && argc >= 3) { /* "tinygpt help sample" = "tinygpt sample --help" */
        cmd = argv[2];
        sub_argc = 1;
        sub_argv = help_argv;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(USAGE, stdout);
        return TG_EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        fputs("tinygpt " TINYGPT_VERSION "\n", stdout);
        return TG_EXIT_OK;
    }
    if (strcmp(cmd, "sample") == 0) return tg_cmd_sample(sub_argc, sub_argv);
    if (strcmp(cmd, "chat") == 0) return tg_cmd_chat(sub_argc, sub_argv);
    if (strcmp(cmd, "tokenize") == 0) return tg_cmd_tokenize(sub_argc, sub_argv);
    if (strcmp(cmd, "info") == 0) return tg_cmd_info(sub_argc, sub_argv);
    if (strcmp(cmd, "perplexity") == 0) return tg_cmd_perplexity(sub_argc, sub_argv);
    if (strcmp(cmd, "compare") == 0) return tg_cmd_compare(sub_argc, sub_argv);
    if (strcmp(cmd, "bench") == 0) return tg_cmd_bench(sub_argc, sub_argv);
    if (strcmp(cmd, "serve") == 0) return tg_cmd_serve(sub_argc, sub_argv);
    (void)tg_runtime_error("unknown command '%s' (see tinygpt --help)", cmd); /* one line: control bytes become '?' */
    return TG_EXIT_USAGE;
}
