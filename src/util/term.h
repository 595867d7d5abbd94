/* The caller's terminal for -t (agentbox run -t, agentbox exec -t): checked
 * to be one, its size, raw mode while the command runs (restored on every
 * way out), and output written to it whole; without -t, the caller's
 * terminals the command was given, restored after it. */
#ifndef AB_TERM_H
#define AB_TERM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
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

/* Without -t the command gets the caller's own stdin, stdout and stderr,
 * so it can change a terminal among them (stty -echo, a resize). The modes
 * and size of each terminal among fds[0..n) (-1: not the caller's), saved
 * before the command and put back after it (only what changed); declare
 * with ab_cleanup_term_keep so every way out of agentbox run restores them
 * (a SIGKILL of agentbox cannot). */
#define AB_TERM_KEEP_MAX 3
struct ab_term_keep {
	int n;
	struct {
		int fd;
		dev_t rdev;
		struct termios modes;
		struct winsize size;
		bool has_size;
	} t[AB_TERM_KEEP_MAX];
};
void ab_term_keep_save(struct ab_term_keep *k, const int *fds, int n);
void ab_term_keep_restore(struct ab_term_keep *k);
#define ab_cleanup_term_keep __attribute__((cleanup(ab_term_keep_restore)))

/* All of p to stdout, waiting while it is full (a non-blocking one);
 * dropped once it is gone. */
void ab_term_write_out(const char *p, size_t n);

#endif
