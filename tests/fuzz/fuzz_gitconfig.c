/* The reader that decides whether a git config file a command created may
 * stay live on the host (src/layer/protect_gitconfig.c): any bytes are
 * judged, an unsafe file always says why, and nothing in a file hides the
 * lines after it: a file judged safe, followed by a section that sets
 * core.fsmonitor, is never safe. Byte 0 picks .git/config (even) or
 * .gitmodules (odd). */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "layer/protect_quarantine.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0 || size > 65536)
		return 0;
	bool modules = data[0] & 1;
	const char *text = (const char *)data + 1;
	size_t len = size - 1;
	char why[256] = "";
	if (!protect_gitconfig_safe(text, len, modules, why, sizeof(why))) {
		FUZZ_CHECK(why[0] != '\0' && memchr(why, '\0', sizeof(why)));
		return 0;
	}
	FUZZ_CHECK(!memchr(text, '\0', len) && !memchr(text, '\r', len));
	static const char tail[] = "\n[core]\n\tfsmonitor = touch PWNED\n";
	char *more = malloc(len + sizeof(tail));
	FUZZ_CHECK(more);
	memcpy(more, text, len);
	memcpy(more + len, tail, sizeof(tail) - 1);
	why[0] = '\0';
	FUZZ_CHECK(
		!protect_gitconfig_safe(more, len + sizeof(tail) - 1, modules, why, sizeof(why)));
	FUZZ_CHECK(strcmp(why, "sets core.fsmonitor") == 0);
	free(more);
	return 0;
}
