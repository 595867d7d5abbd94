/* Preloaded (LD_PRELOAD) into agentbox by tests/image: dlopen of libarchive
 * fails as on a host without libarchive13, every other dlopen is the real
 * one, so the message --image gives then is tested. */
#include <dlfcn.h>
#include <stdbool.h>
#include <string.h>

static __thread bool failed;

void *dlopen(const char *file, int flags)
{
	static void *(*real)(const char *, int);
	if (file && strstr(file, "libarchive")) {
		failed = true;
		return NULL;
	}
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "dlopen");
	return real(file, flags);
}

char *dlerror(void)
{
	static char *(*real)(void);
	if (failed) {
		failed = false;
		return "libarchive.so.13: cannot open shared object file: No such file or "
		       "directory (tests/helpers/no_libarchive.c)";
	}
	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "dlerror");
	return real();
}
