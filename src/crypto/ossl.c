/* OpenSSL loaded on demand (ossl.h), as runtime/rt_libs.c loads
 * libmicrohttpd: a table of the functions agentbox calls, filled from the
 * libraries' handles, a message naming the package when one is missing. */
#define AB_OSSL_LOADER
#include "crypto/ossl.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

struct ab_ossl ab_ossl;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* one library: 1 loaded, 0 failed (why says how), -1 not tried */
struct lib {
	int state;
	char why[300];
};

static void load_crypto(struct lib *l)
{
	void *h = dlopen(AB_CRYPTO_SONAME, RTLD_NOW | RTLD_LOCAL);
	l->state = h != NULL;
	if (!h)
		snprintf(l->why, sizeof(l->why), "cannot load %s: %s", AB_CRYPTO_SONAME, dlerror());
#define SYM(f)                                                                                     \
	if (l->state && !(*(void **)&ab_ossl.f = dlsym(h, #f))) {                                  \
		l->state = 0;                                                                      \
		snprintf(l->why, sizeof(l->why), "%s has no %s", AB_CRYPTO_SONAME, #f);            \
	}
	AB_CRYPTO_FUNCS(SYM)
#undef SYM
}

static void load_ssl(struct lib *l)
{
	void *h = dlopen(AB_SSL_SONAME, RTLD_NOW | RTLD_LOCAL);
	l->state = h != NULL;
	if (!h)
		snprintf(l->why, sizeof(l->why), "cannot load %s: %s", AB_SSL_SONAME, dlerror());
#define SYM(f)                                                                                     \
	if (l->state && !(*(void **)&ab_ossl.f = dlsym(h, #f))) {                                  \
		l->state = 0;                                                                      \
		snprintf(l->why, sizeof(l->why), "%s has no %s", AB_SSL_SONAME, #f);               \
	}
	AB_SSL_FUNCS(SYM)
#undef SYM
}

static int load(bool ssl, const char *what, struct ab_error *err)
{
	static struct lib crypto = {.state = -1}, tls = {.state = -1};
	pthread_mutex_lock(&lock);
	if (crypto.state < 0)
		load_crypto(&crypto);
	if (ssl && crypto.state > 0 && tls.state < 0)
		load_ssl(&tls);
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
