/* cli.h — the commands of the tinygpt tool. Each takes the words after its name, prints to stdout/stderr and
 * returns the exit status (TG_EXIT_OK, TG_EXIT_ERROR or TG_EXIT_USAGE from args.h). */
#ifndef TG_CLI_CLI_H
#define TG_CLI_CLI_H

/* tinygpt sample [MODEL] --prompt TEXT ...: streams the prompt and a continuation to stdout. */
int tg_cmd_sample(int argc, char **argv);
/* tinygpt chat MODEL ...: a conversation through the model's chat template, the cache kept across turns. */
int tg_cmd_chat(int argc, char **argv);
/* tinygpt tokenize MODEL TEXT [--bos]: prints the token ids on one line. */
int tg_cmd_tokenize(int argc, char **argv);
/* tinygpt info MODEL [--cache-table]: hyper-parameters and KV cache sizes. */
int tg_cmd_info(int argc, char **argv);

/* tinygpt perplexity MODEL FILE ...: teacher-forced perplexity through the KV cache. */
int tg_cmd_perplexity(int argc, char **argv);
/* tinygpt compare MODEL --prompts FILE ...: greedy prefix match of each cache precision against fp32. */
int tg_cmd_compare(int argc, char **argv);
/* tinygpt bench MODEL ...: prompt and generation speed at several cache depths, with the bandwidth roofline. */
int tg_cmd_bench(int argc, char **argv);
/* `tinygpt serve [MODEL]`: the OpenAI-compatible server (cmd_serve.c, src/serve/). */
int tg_cmd_serve(int argc, char **argv);

#endif
