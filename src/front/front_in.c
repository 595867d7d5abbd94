/* The requests of a JSON-lines front on their way in (front_in.h). */
#include "front/front_in.h"

#include <string.h>

static bool held(const struct front_in_fns *fns, void *arg)
{
	return fns->hold && fns->hold(arg);
}

void front_in_take(char *buf, size_t *len, bool *discarding, bool eof, size_t max,
		   size_t complete_max, const struct front_in_fns *fns, void *arg)
{
	size_t start = 0;
	while (!held(fns, arg)) {
		char *nl = memchr(buf + start, '\n', *len - start);
		if (!nl)
			break;
		size_t n = (size_t)(nl - (buf + start));
		if (*discarding)
			*discarding = false;
		else if (n > complete_max)
			fns->too_long(arg, buf + start, n);
		else
			fns->line(arg, buf + start, n);
		start += n + 1;
	}
	memmove(buf, buf + start, *len - start);
	*len -= start;
	if (*len > max) {
		if (!*discarding)
			fns->too_long(arg, buf, *len);
		*discarding = true;
		*len = 0;
	}
	if (eof && *len && !*discarding && !held(fns, arg)) {
		/* a last line without its newline */
		fns->line(arg, buf, *len);
		*len = 0;
	}
}
