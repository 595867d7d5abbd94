/* libmicrohttpd loaded on demand (rt_mhd.h). */
#define RT_MHD_LOADER
#include "runtime/rt_mhd.h"

#include <dlfcn.h>
#include <stdio.h>

struct rt_mhd rt_mhd;

bool rt_mhd_load(char *why, size_t len)
{
	static int loaded = -1;
	static char err[200];
	if (loaded < 0) {
		void *h = dlopen(RT_MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
		loaded = h != NULL;
		if (!h)
			snprintf(err, sizeof(err),
				 "cannot load %s: %s (install libmicrohttpd12, or the "
				 "distribution's "
				 "libmicrohttpd package)",
				 RT_MHD_SONAME, dlerror());
#define SYM(f)                                                                                     \
	if (loaded && !(*(void **)&rt_mhd.f = dlsym(h, #f))) {                                     \
		loaded = 0;                                                                        \
		snprintf(err, sizeof(err), "%s has no %s", RT_MHD_SONAME, #f);                     \
	}
		RT_MHD_FUNCS(SYM)
#undef SYM
	}
	if (!loaded)
		snprintf(why, len, "%s", err);
	return loaded;
}
