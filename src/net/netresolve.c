/* The proxy's resolver (netresolve.h). */
#include "net/netresolve.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "util/error.h"

struct net_resolver {
	pthread_mutex_t lock;
	int refs;    /* the owner, and each running lookup */
	int running; /* lookups */
	int efd;
	struct net_lookup *done;
};

int net_resolver_new(struct net_resolver **out, struct ab_error *err)
{
	struct net_resolver *r = calloc(1, sizeof(*r));
	if (!r)
		return ab_error_set(err, ENOMEM, "starting the proxy's resolver");
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd < 0) {
		int e = errno;
		free(r);
		return ab_error_set(err, e, "starting the proxy's resolver");
	}
	pthread_mutex_init(&r->lock, NULL);
	r->refs = 1;
	*out = r;
	return 0;
}

void net_lookup_free(struct net_lookup *l)
{
	while (l) {
		struct net_lookup *next = l->next;
		if (l->ai)
			freeaddrinfo(l->ai);
		free(l);
		l = next;
	}
}

static void unref(struct net_resolver *r)
{
	pthread_mutex_lock(&r->lock);
	bool last = --r->refs == 0;
	pthread_mutex_unlock(&r->lock);
	if (!last)
		return;
	net_lookup_free(r->done);
	close(r->efd);
	pthread_mutex_destroy(&r->lock);
	free(r);
}

void net_resolver_free(struct net_resolver *r)
{
	if (r)
		unref(r);
}

int net_resolver_fd(const struct net_resolver *r)
{
	return r->efd;
}

struct job {
	struct net_resolver *r;
	struct net_lookup *l;
};

static void *lookup_thread(void *arg)
{
	struct job *j = arg;
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
	j->l->rc = getaddrinfo(j->l->host, NULL, &hints, &j->l->ai);
	struct net_resolver *r = j->r;
	pthread_mutex_lock(&r->lock);
	j->l->next = r->done;
	r->done = j->l;
	r->running--;
	pthread_mutex_unlock(&r->lock);
	uint64_t one = 1;
	(void)!write(r->efd, &one, sizeof(one));
	free(j);
	unref(r);
	return NULL;
}

int net_resolver_start(struct net_resolver *r, uint64_t conn_id, const char *host)
{
	pthread_mutex_lock(&r->lock);
	bool full = r->running >= NET_RESOLVE_MAX;
	if (!full) {
		r->running++;
		r->refs++;
	}
	pthread_mutex_unlock(&r->lock);
	if (full)
		return -EAGAIN;
	struct job *j = calloc(1, sizeof(*j));
	struct net_lookup *l = calloc(1, sizeof(*l));
	int rc = -ENOMEM;
	if (j && l) {
		j->r = r;
		j->l = l;
		l->conn_id = conn_id;
		strncpy(l->host, host, sizeof(l->host) - 1);
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, 256 * 1024);
		/* the launcher's signals stay with its main thread */
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_BLOCK, &all, &old);
		pthread_t t;
		rc = -pthread_create(&t, &attr, lookup_thread, j);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		pthread_attr_destroy(&attr);
		if (rc == 0)
			return 0;
	}
	free(j);
	free(l);
	pthread_mutex_lock(&r->lock);
	r->running--;
	r->refs--;
	pthread_mutex_unlock(&r->lock);
	return rc;
}

struct net_lookup *net_resolver_take(struct net_resolver *r)
{
	uint64_t n;
	(void)!read(r->efd, &n, sizeof(n));
	pthread_mutex_lock(&r->lock);
	struct net_lookup *l = r->done;
	r->done = NULL;
	pthread_mutex_unlock(&r->lock);
	return l;
}
