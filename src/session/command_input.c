/* A command's input from the launcher's side: the streamed stdin of a
 * command started with stdin_stream (a pipe whose write end the session
 * keeps) or with a pty (the master the shim made inside and sent out),
 * written as the command reads it, one ab_session_stdin at a time, so the
 * launcher holds at most one request's data per command (backpressure:
 * the caller waits for AB_EVENT_STDIN before it sends more); and a pty's
 * size. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "session/session.h"
#include "util/error.h"
#include "util/util.h"

static struct cmd *by_tag(struct ab_session *s, unsigned long long tag)
{
	for (size_t i = 0; i < s->max; i++)
		if (s->cmds[i].used && s->cmds[i].tag == tag)
			return &s->cmds[i];
	return NULL;
}

/* write(2) without SIGPIPE: a pipe whose reader is gone says EPIPE, and
 * a caller of the library need not ignore the signal. */
static ssize_t write_quiet(int fd, const void *p, size_t n)
{
	sigset_t pipe_set, old, pending;
	sigemptyset(&pipe_set);
	sigaddset(&pipe_set, SIGPIPE);
	sigpending(&pending);
	bool was_pending = sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
	ssize_t w = write(fd, p, n);
	int e = errno;
	if (w < 0 && e == EPIPE && !was_pending) {
		struct timespec zero = {0};
		sigtimedwait(&pipe_set, NULL, &zero); /* the one we caused */
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = e;
	return w;
}

/* Write what the command takes now. Returns 1 when all of it is written
 * (and its eof done), 0 when some waits for room, a negative errno when
 * the stdin is gone. */
static int input_flush(struct cmd *c)
{
	while (c->in_off < c->in_len) {
		ssize_t w = write_quiet(c->in_wr, c->in_buf + c->in_off, c->in_len - c->in_off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && errno == EAGAIN)
			return 0;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		c->in_off += (size_t)w;
	}
	return 1;
}

/* The write is over (r: 1 done, < 0 failed): its buffer freed, and the
 * stdin closed when asked, or when it is gone. */
static void input_done(struct ab_session *s, struct cmd *c, int r)
{
	size_t slot = (size_t)(c - s->cmds);
	if (c->in_watched)
		session_watch_out(s, c->in_wr, slot, K_IN, false);
	c->in_watched = false;
	free(c->in_buf);
	c->in_buf = NULL;
	c->in_len = c->in_off = 0;
	c->in_busy = false;
	if ((r == 1 && c->in_eof_after) || r < 0) {
		ab_close_keep_errno(c->in_wr);
		c->in_wr = -1;
		c->in_closed = true;
	}
}

int ab_session_stdin(struct ab_session *s, unsigned long long tag, const char *data, size_t len,
		     bool eof, struct ab_error *err)
{
	struct cmd *c = by_tag(s, tag);
	if (!c)
		return -ESRCH;
	if (!c->pty && !c->stdin_stream)
		return ab_error_plain(err, EINVAL,
				      "the command was started without a streamed stdin or a pty");
	if (c->in_busy)
		return ab_error_plain(err, EBUSY,
				      "the command's stdin is still being written: wait for the "
				      "previous write's answer");
	if (c->in_closed || c->exited || c->failed)
		return ab_error_plain(err, EPIPE, "the command's stdin is closed");
	/* a pty's end of file is its EOF character: the master stays open */
	bool ctrl_d = eof && c->pty;
	char *buf = malloc(len + 1);
	if (!buf)
		return ab_error_set(err, ENOMEM, "writing the command's stdin");
	if (len)
		memcpy(buf, data, len);
	if (ctrl_d)
		buf[len] = 4; /* VEOF as the pty starts it (the command may change it) */
	c->in_buf = buf;
	c->in_len = len + (ctrl_d ? 1 : 0);
	c->in_off = 0;
	c->in_busy = true;
	c->in_eof_after = eof && !c->pty;
	if (c->in_wr < 0) /* a pty whose master is on its way: written when it comes */
		return 0;
	int r = input_flush(c);
	if (r != 0) {
		input_done(s, c, r);
		return r < 0 ? ab_error_set(err, -r, "writing the command's stdin") : 1;
	}
	if (session_watch_out(s, c->in_wr, (size_t)(c - s->cmds), K_IN, true) == 0)
		c->in_watched = true;
	return 0;
}

void command_input_write(struct ab_session *s, struct cmd *c, ab_event_fn fn, void *arg)
{
	if (!c->in_busy || c->in_wr < 0)
		return;
	int r = input_flush(c);
	if (r == 0)
		return;
	input_done(s, c, r);
	if (!fn)
		return;
	struct ab_error e = {0};
	if (r < 0)
		ab_error_set(&e, -r, "the command's stdin is closed");
	struct ab_event ev = {.kind = AB_EVENT_STDIN, .tag = c->tag, .error = r < 0 ? &e : NULL};
	fn(&ev, arg);
}

int ab_session_resize(struct ab_session *s, unsigned long long tag, unsigned rows, unsigned cols,
		      struct ab_error *err)
{
	struct cmd *c = by_tag(s, tag);
	if (!c)
		return -ESRCH;
	if (!c->pty)
		return ab_error_plain(err, EINVAL, "the command was started without a pty");
	if (rows < 1 || cols < 1 || rows > 65535 || cols > 65535)
		return ab_error_plain(err, EINVAL, "a terminal's rows and cols are 1 to 65535");
	if (c->exited || c->failed || (c->pty_got && c->out_rd < 0))
		return ab_error_plain(err, EPIPE, "the command's terminal is closed");
	c->rows = (unsigned short)rows;
	c->cols = (unsigned short)cols;
	if (!c->pty_got)
		return 0; /* set when its master comes */
	struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
	/* the kernel sends SIGWINCH to the terminal's foreground group */
	if (ioctl(c->out_rd, TIOCSWINSZ, &ws) < 0)
		return ab_error_set(err, errno, "resizing the command's terminal");
	return 0;
}
