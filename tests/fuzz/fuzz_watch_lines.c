/* The launcher's half of the watch op (src/watch/watch_lines.c): the
 * event lines a shim inside the sandbox writes (untrusted), split and
 * checked. Every event handed on has a kind the protocol names and paths
 * absolute in the view, without NUL, at most 4095 bytes (overflow none,
 * renamed two); after a malformed line nothing more is handed on and the
 * stream says why. Split invariance: the bytes in one piece or in pieces
 * of every size the first byte picks give the same events.
 *
 * Input: one byte (the piece size, 1 to 256), then the output. */
#include <string.h>

#include "fuzz.h"
#include "watch/watch.h"

struct seen {
	unsigned long long n;
	unsigned long long sum; /* of the kinds and path lengths, to compare runs */
};

static void path_ok(const char *p)
{
	FUZZ_CHECK(p && p[0] == '/');
	size_t n = strlen(p);
	FUZZ_CHECK(n >= 1 && n <= 4095);
}

static void on_event(const struct ab_watch_event *ev, void *arg)
{
	struct seen *s = arg;
	FUZZ_CHECK(strcmp(watch_kind_name(ev->kind), "?") != 0);
	if (ev->kind == AB_WATCH_OVERFLOW) {
		FUZZ_CHECK(!ev->from);
	} else {
		path_ok(ev->path);
		s->sum += strlen(ev->path);
	}
	if (ev->kind == AB_WATCH_RENAMED) {
		path_ok(ev->from);
		s->sum += strlen(ev->from);
	} else {
		FUZZ_CHECK(!ev->from);
	}
	s->n++;
	s->sum += (unsigned)ev->kind * 7919u;
}

static void run(const char *data, size_t size, size_t piece, struct seen *s, struct watch_lines *w)
{
	for (size_t at = 0; at < size; at += piece) {
		size_t n = size - at < piece ? size - at : piece;
		watch_lines_feed(w, data + at, n, on_event, s);
	}
	if (w->failed)
		FUZZ_CHECK(w->err.msg[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t piece = (size_t)data[0] + 1;
	const char *out = (const char *)data + 1;
	size--;
	struct seen whole = {0}, pieces = {0};
	struct watch_lines a = {0}, b = {0};
	run(out, size, size ? size : 1, &whole, &a);
	run(out, size, piece, &pieces, &b);
	FUZZ_CHECK(whole.n == pieces.n && whole.sum == pieces.sum);
	FUZZ_CHECK(a.failed == b.failed && a.events == b.events);
	watch_lines_free(&a);
	watch_lines_free(&b);
	return 0;
}
