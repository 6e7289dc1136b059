/* interrupt.h — Ctrl-C for the commands that measure (perplexity, compare): the first SIGINT asks the command to
 * stop at the next point where it can report what it measured so far (and exit TG_EXIT_INTERRUPTED); a second one
 * at least half a second later ends the process at once. */
#ifndef TG_CLI_INTERRUPT_H
#define TG_CLI_INTERRUPT_H

#include <stdbool.h>

/* The exit status after an interrupt, as a shell reports a process killed by SIGINT. */
enum { TG_EXIT_INTERRUPTED = 130 };

/* Installs the SIGINT handler. */
void tg_interrupt_catch(void);
/* Whether a SIGINT has arrived since tg_interrupt_catch. */
bool tg_interrupted(void);

#endif
