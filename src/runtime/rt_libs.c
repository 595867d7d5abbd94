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

/* A library and the functions of it that are used, each with its slot. */
struct lib {
	const char *soname, *use;	      /* use: what needs it, for the message */
	const char *package, *distro_package; /* Debian's, and its name elsewhere */
	const char *const *names;	      /* NULL-ended */
	void **const *slots;
};

#define NAME(f)	    #f,
#define MHD_SLOT(f) (void **)&rt_mhd.f,
#define H2_SLOT(f)  (void **)&rt_h2.f,
static const char *const mhd_names[] = {RT_MHD_FUNCS(NAME) NULL};
static void **const mhd_slots[] = {RT_MHD_FUNCS(MHD_SLOT)};
static const char *const h2_names[] = {RT_H2_FUNCS(NAME) NULL};
static void **const h2_slots[] = {RT_H2_FUNCS(H2_SLOT)};
#undef NAME
#undef MHD_SLOT
#undef H2_SLOT

enum { LIB_MHD, LIB_H2, N_LIBS };

static const struct lib libs[N_LIBS] = {
	[LIB_MHD] = {RT_MHD_SONAME, "", "libmicrohttpd12", "libmicrohttpd", mhd_names, mhd_slots},
	[LIB_H2] = {RT_H2_SONAME, " for --grpc-port", "libnghttp2-14", "libnghttp2", h2_names,
		    h2_slots},
};

/* Loads libs[i] once; false with why it cannot (the same on every call). */
static bool lib_load(int i, char *why, size_t len)
{
	static int state[N_LIBS]; /* 0: not tried yet, 1: loaded, -1: it cannot be */
	static char err[N_LIBS][200];
	const struct lib *l = &libs[i];
	if (!state[i]) {
		void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
		state[i] = h ? 1 : -1;
		if (!h)
			snprintf(err[i], sizeof(err[i]),
				 "cannot load %s%s: %s (install %s, or the distribution's %s "
				 "package)",
				 l->soname, l->use, dlerror(), l->package, l->distro_package);
		for (size_t k = 0; state[i] > 0 && l->names[k]; k++)
			if (!(*l->slots[k] = dlsym(h, l->names[k]))) {
				state[i] = -1;
				snprintf(err[i], sizeof(err[i]), "%s has no %s", l->soname,
					 l->names[k]);
			}
	}
	if (state[i] < 0)
		snprintf(why, len, "%s", err[i]);
	return state[i] > 0;
}

bool rt_mhd_load(char *why, size_t len)
{
	return lib_load(LIB_MHD, why, len);
}

bool rt_h2_load(char *why, size_t len)
{
	return lib_load(LIB_H2, why, len);
}
