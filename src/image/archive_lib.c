/* libarchive loaded on first use (archive_lib.h), as src/runtime/rt_libs.c
 * loads libmicrohttpd: a table of its functions, filled once. */
#include "image/archive_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static struct archive_lib lib;
static char lib_err[300];
static bool lib_loaded;

static void load_once(void)
{
	void *h = dlopen(ARCHIVE_LIB_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		snprintf(lib_err, sizeof(lib_err),
			 "cannot load %s to unpack the layer: %s (install libarchive13, or the "
			 "distribution's libarchive package)",
			 ARCHIVE_LIB_SONAME, dlerror());
		return;
	}
#define SYM(f)                                                                                     \
	if (!(*(void **)&lib.f = dlsym(h, #f))) {                                                  \
		snprintf(lib_err, sizeof(lib_err),                                                 \
			 "%s has no %s (libarchive 3.0 or later needed)", ARCHIVE_LIB_SONAME, #f); \
		return;                                                                            \
	}
	ARCHIVE_LIB_FUNCS(SYM)
#undef SYM
	lib_loaded = true;
}

const struct archive_lib *archive_lib_load(char *why, size_t len)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, load_once);
	if (!lib_loaded)
		snprintf(why, len, "%s", lib_err);
	return lib_loaded ? &lib : NULL;
}
