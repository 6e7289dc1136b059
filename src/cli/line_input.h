/* line_input.h — the user's lines for `tinygpt chat`: on a terminal through libedit (line editing and history, the
 * prompt on the terminal), otherwise plain lines of standard input (a script). */
#ifndef TG_CLI_LINE_INPUT_H
#define TG_CLI_LINE_INPUT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    bool tty;   /* standard input is a terminal: libedit reads the lines */
    char *line; /* the last line read (owned here) */
    size_t cap;
} tg_line_input;

/* Starts reading standard input (tty decides libedit or plain lines). */
void tg_line_input_open(tg_line_input *in);
/* The next line without its newline (and trailing '\r'), valid until the next call; NULL at the end of the input.
 * On a terminal `prompt` is shown and non-empty lines join the history. */
const char *tg_line_input_read(tg_line_input *in, const char *prompt);
void tg_line_input_close(tg_line_input *in);

#endif
