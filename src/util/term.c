/* The caller's terminal for -t (term.h). */
#include "util/term.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
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

void ab_term_keep_save(struct ab_term_keep *k, const int *fds, int n)
{
	k->n = 0;
	for (int i = 0; i < n && k->n < AB_TERM_KEEP_MAX; i++) {
		struct stat st;
		struct termios modes;
		if (fds[i] < 0 || fstat(fds[i], &st) < 0 || !S_ISCHR(st.st_mode) ||
		    tcgetattr(fds[i], &modes) < 0)
			continue;
		bool seen = false; /* stdin, stdout and stderr are often one terminal */
		for (int j = 0; j < k->n; j++)
			seen |= k->t[j].rdev == st.st_rdev;
		if (seen)
			continue;
		k->t[k->n].fd = fds[i];
		k->t[k->n].rdev = st.st_rdev;
		k->t[k->n].modes = modes;
		k->t[k->n].has_size = ioctl(fds[i], TIOCGWINSZ, &k->t[k->n].size) == 0;
		k->n++;
	}
}

static bool modes_equal(const struct termios *a, const struct termios *b)
{
	return a->c_iflag == b->c_iflag && a->c_oflag == b->c_oflag && a->c_cflag == b->c_cflag &&
	       a->c_lflag == b->c_lflag && memcmp(a->c_cc, b->c_cc, sizeof(a->c_cc)) == 0 &&
	       cfgetispeed(a) == cfgetispeed(b) && cfgetospeed(a) == cfgetospeed(b);
}

void ab_term_keep_restore(struct ab_term_keep *k)
{
	if (k->n == 0)
		return;
	/* as a background job, a change to our terminal would stop us with
	 * SIGTTOU; blocked, the change is made (termios(3), tcsetattr) */
	sigset_t ttou, old;
	sigemptyset(&ttou);
	sigaddset(&ttou, SIGTTOU);
	sigprocmask(SIG_BLOCK, &ttou, &old);
	for (int i = 0; i < k->n; i++) {
		struct termios now;
		struct winsize size;
		int fd = k->t[i].fd;
		if (tcgetattr(fd, &now) == 0 && !modes_equal(&now, &k->t[i].modes))
			tcsetattr(fd, TCSANOW, &k->t[i].modes);
		if (k->t[i].has_size && ioctl(fd, TIOCGWINSZ, &size) == 0 &&
		    (size.ws_row != k->t[i].size.ws_row || size.ws_col != k->t[i].size.ws_col ||
		     size.ws_xpixel != k->t[i].size.ws_xpixel ||
		     size.ws_ypixel != k->t[i].size.ws_ypixel))
			ioctl(fd, TIOCSWINSZ, &k->t[i].size);
	}
	sigprocmask(SIG_SETMASK, &old, NULL);
	k->n = 0;
}
