/* line_input.c — lines of standard input, through libedit's readline interface on a terminal. */
#define _POSIX_C_SOURCE 200809L

#include "cli/line_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <editline/readline.h>

void tg_line_input_open(tg_line_input *in) {
    memset(in, 0, sizeof *in);
    in->tty = isatty(STDIN_FILENO) != 0;
}

const char *tg_line_input_read(tg_line_input *in, const char *prompt) {
    if (in->tty) {
        free(in->line);
        in->line = readline(prompt); /* malloc'ed by libedit, NULL at end of input */
        in->cap = 0;
        if (!in->line) return NULL;
        if (in->line[0]) add_history(in->line);
        return in->line;
    }
    ssize_t n = getline(&in->line, &in->cap, stdin);
    if (n < 0) return NULL;
    while (n > 0 && (in->line[n - 1] == '\n' || in->line[n - 1] == '\r')) in->line[--n] = '\0';
    return in->line;
}

void tg_line_input_close(tg_line_input *in) {
    free(in->line);
    if (in->tty) clear_history();
    memset(in, 0, sizeof *in);
}
