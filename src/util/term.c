/* The caller's terminal for -t (term.h). */
#include "util/term.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

int ab_term_check(struct ab_error *err)
{
	if (isatty(STDIN_FILENO))
		return 0;
	return ab_error_plain(err, ENOTTY,
			      "-t: stdin is not a terminal, so there is no terminal to relay; "
			      "run from a terminal, or without -t");
}

struct winsize ab_term_size(void)
{
	struct winsize ws = {0};
	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) < 0 || !ws.ws_row || !ws.ws_col)
		ws = (struct winsize){.ws_row = 24, .ws_col = 80};
	return ws;
}

void ab_term_raw_restore(struct ab_raw_tty *t)
{
	if (t->set)
		tcsetattr(STDIN_FILENO, TCSADRAIN, &t->saved);
	t->set = false;
}

int ab_term_raw_enter(struct ab_raw_tty *t, struct ab_error *err)
{
	if (tcgetattr(STDIN_FILENO, &t->saved) < 0)
		return ab_error_set(err, errno, "-t: cannot read the terminal's modes");
	struct termios raw = t->saved;
	cfmakeraw(&raw);
	if (tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) < 0)
		return ab_error_set(err, errno, "-t: cannot put the terminal in raw mode");
	t->set = true;
	return 0;
}

void ab_term_write_out(const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(STDOUT_FILENO, p, n);
		if (w < 0 && errno == EAGAIN) {
			poll(&(struct pollfd){.fd = STDOUT_FILENO, .events = POLLOUT}, 1, 1000);
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}
