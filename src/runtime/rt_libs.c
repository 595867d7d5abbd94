/* The libraries agentbox runtime loads on demand with dlopen:
 * libmicrohttpd when the server starts (rt_mhd.h), libnghttp2 when
 * --grpc-port is given (rt_h2.h). */
#define RT_MHD_LOADER
#define RT_H2_LOADER
#include "runtime/rt_mhd.h"
#include "runtime/rt_h2.h"

#include <dlfcn.h>
#include <stdio.h>

struct rt_mhd rt_mhd;
struct rt_h2 rt_h2;

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

bool rt_h2_load(char *why, size_t len)
{
	static int loaded = -1;
	static char err[200];
	if (loaded < 0) {
		void *h = dlopen(RT_H2_SONAME, RTLD_NOW | RTLD_LOCAL);
		loaded = h != NULL;
		if (!h)
			snprintf(
				err, sizeof(err),
				"cannot load %s for --grpc-port: %s (install libnghttp2-14, or the "
				"distribution's libnghttp2 package)",
				RT_H2_SONAME, dlerror());
#define SYM(f)                                                                                     \
	if (loaded && !(*(void **)&rt_h2.f = dlsym(h, #f))) {                                      \
		loaded = 0;                                                                        \
		snprintf(err, sizeof(err), "%s has no %s", RT_H2_SONAME, #f);                      \
	}
		RT_H2_FUNCS(SYM)
#undef SYM
	}
	if (!loaded)
		snprintf(why, len, "%s", err);
	return loaded;
}
