/* OpenSSL loaded on demand (ossl.h), as runtime/rt_libs.c loads
 * libmicrohttpd: a table of the functions agentbox calls, filled from the
 * libraries' handles, a message naming the package when one is missing. */
#define AB_OSSL_LOADER
#include "crypto/ossl.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "util/util.h"

struct ab_ossl ab_ossl;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* a function's name and its slot in the table */
struct sym {
	const char *name;
	void **slot;
};
#define AB_OSSL_SYM(f) {#f, (void **)&ab_ossl.f},
static const struct sym crypto_syms[] = {AB_CRYPTO_FUNCS(AB_OSSL_SYM)};
static const struct sym ssl_syms[] = {AB_SSL_FUNCS(AB_OSSL_SYM)};
#undef AB_OSSL_SYM

/* one library: its functions, and 1 loaded, 0 failed (why says how), -1
 * not tried */
struct lib {
	const char *soname;
	const struct sym *syms;
	size_t n;
	int state;
	char why[300];
};

static void load_lib(struct lib *l)
{
	void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
	l->state = h != NULL;
	if (!h)
		snprintf(l->why, sizeof(l->why), "cannot load %s: %s", l->soname, dlerror());
	for (size_t i = 0; l->state && i < l->n; i++)
		if (!(*l->syms[i].slot = dlsym(h, l->syms[i].name))) {
			l->state = 0;
			snprintf(l->why, sizeof(l->why), "%s has no %s", l->soname,
				 l->syms[i].name);
		}
}

static int load(bool ssl, const char *what, struct ab_error *err)
{
	static struct lib crypto = {AB_CRYPTO_SONAME, crypto_syms, AB_ARRAY_SIZE(crypto_syms), -1,
				    ""},
			  tls = {AB_SSL_SONAME, ssl_syms, AB_ARRAY_SIZE(ssl_syms), -1, ""};
	pthread_mutex_lock(&lock);
	if (crypto.state < 0)
		load_lib(&crypto);
	if (ssl && crypto.state > 0 && tls.state < 0)
		load_lib(&tls);
	const struct lib *bad = crypto.state <= 0 ? &crypto : ssl && tls.state <= 0 ? &tls : NULL;
	pthread_mutex_unlock(&lock);
	if (!bad)
		return 0;
	return ab_error_plain(err, ELIBACC,
			      "%s needs OpenSSL %d: %s (install libssl3, or the distribution's "
			      "OpenSSL %d library package)",
			      what, OPENSSL_VERSION_MAJOR, bad->why, OPENSSL_VERSION_MAJOR);
}

int ab_crypto_load(const char *what, struct ab_error *err)
{
	return load(false, what, err);
}

int ab_ssl_load(const char *what, struct ab_error *err)
{
	return load(true, what, err);
}
