/* The caller's terminal for -t (agentbox run -t, agentbox exec -t): checked
 * to be one, its size, raw mode while the command runs (restored on every
 * way out), and output written to it whole. */
#ifndef AB_TERM_H
#define AB_TERM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "util/error.h"

/* 0 when stdin is a terminal; else -ENOTTY with the one message -t gives. */
int ab_term_check(struct ab_error *err);

/* The caller's terminal size (of stdin), 24x80 when it says none. */
struct winsize ab_term_size(void);

/* The caller's terminal in raw mode (every key goes to the command's
 * terminal, whose line discipline makes Ctrl-C a SIGINT inside); declare
 * with ab_cleanup_raw_tty so the modes come back on every way out. */
struct ab_raw_tty {
	bool set;
	struct termios saved;
};
int ab_term_raw_enter(struct ab_raw_tty *t, struct ab_error *err);
void ab_term_raw_restore(struct ab_raw_tty *t);
#define ab_cleanup_raw_tty __attribute__((cleanup(ab_term_raw_restore)))

/* All of p to stdout, waiting while it is full (a non-blocking one);
 * dropped once it is gone. */
void ab_term_write_out(const char *p, size_t n);

#endif
