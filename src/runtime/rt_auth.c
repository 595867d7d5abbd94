/* The locks of agentbox runtime's doors (rt_auth.h). A client is the uid
 * of the socket at the other end when it is on this host (a loopback
 * peer, found with one exact sock_diag query, as ss(8) asks), else the
 * peer's address: so one local user cannot take every connection slot of
 * a runtime another user runs. */
#include "runtime/rt_auth.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "crypto/ossl.h"
#include "detach/detach.h"
#include "port/port_peer.h"
#include "runtime/rt_server.h"
#include "util/util.h"

/* ---- the token ---- */

static void sha256(const void *d, size_t n, unsigned char out[32])
{
	unsigned int len = 32;
	if (!EVP_Digest(d, n, out, &len, EVP_sha256(), NULL))
		memset(out, 0, 32); /* then nothing matches: see bearer_ok */
}

/* --token-file FILE: a Kubernetes Secret's key mounted as a file (a
 * symlink into ..data, which is followed: the operator names it). */
static int read_token(const char *path, char *tok, size_t *len, struct ab_error *err)
{
	cleanup_fd int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0)
		return ab_error_set(err, errno, "runtime: cannot open --token-file %s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return ab_error_plain(err, EINVAL, "runtime: --token-file %s is not a regular file",
				      path);
	ssize_t n = read(fd, tok, RT_TOKEN_MAX + 1);
	if (n < 0)
		return ab_error_set(err, errno, "runtime: cannot read --token-file %s", path);
	while (n > 0 && (tok[n - 1] == '\n' || tok[n - 1] == '\r' || tok[n - 1] == ' '))
		n--; /* kubectl create secret --from-file keeps a final newline */
	if (n == 0 || n > RT_TOKEN_MAX)
		return ab_error_plain(err, EINVAL,
				      "runtime: --token-file %s: the token must be 1 to %d bytes",
				      path, RT_TOKEN_MAX);
	for (ssize_t i = 0; i < n; i++)
		if (tok[i] <= 0x20 || tok[i] >= 0x7f)
			return ab_error_plain(
				err, EINVAL,
				"runtime: --token-file %s: the token must be printable "
				"ASCII without spaces (byte %zd is not)",
				path, i + 1);
	*len = (size_t)n;
	return 0;
}

/* A new random token (256 bits, hex) in a 0600 file of the caller's
 * runtime directory (agentbox create's: detach_root). */
static int make_token(struct rt_auth *a, char *tok, size_t *len, struct ab_error *err)
{
	unsigned char raw[32];
	char root[4096];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return ab_error_set(err, errno, "runtime: cannot make a token: getrandom");
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(tok + 2 * i, 3, "%02x", raw[i]);
	*len = 2 * sizeof(raw);
	int rc = detach_root(root, sizeof(root), true, err);
	if (rc < 0)
		return rc;
	snprintf(a->file, sizeof(a->file), "%s/runtime-%u.token", root, a->o->port);
	/* a runtime killed on this port left it: the directory is the caller's */
	if (unlink(a->file) < 0 && errno != ENOENT)
		return ab_error_set(err, errno, "runtime: cannot replace %s", a->file);
	cleanup_fd int fd =
		open(a->file, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = ab_error_set(err, errno, "runtime: cannot write the token to %s", a->file);
		a->file[0] = 0;
		return rc;
	}
	tok[*len] = '\n';
	if (write(fd, tok, *len + 1) != (ssize_t)*len + 1) {
		rc = ab_error_set(err, errno ? errno : EIO, "runtime: cannot write %s", a->file);
		unlink(a->file);
		a->file[0] = 0;
		return rc;
	}
	tok[*len] = 0;
	return 0;
}

bool rt_auth_loopback(const char *addr)
{
	struct in_addr a4;
	struct in6_addr a6;
	if (inet_pton(AF_INET, addr, &a4) == 1)
		return (ntohl(a4.s_addr) >> 24) == 127;
	return inet_pton(AF_INET6, addr, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

int rt_auth_open(struct rt_auth *a, const struct ab_runtime_opts *o, struct ab_error *err)
{
	a->o = o; /* the clients and connections counted so far stay */
	a->off = o->no_auth;
	a->file[0] = 0;
	if (o->no_auth) { /* beyond loopback only with --no-auth-on-network (rt_options.c) */
		fprintf(stderr,
			"agentbox: runtime: WARNING: --no-auth: no token is asked; anyone who "
			"can reach %s port %u can run commands in the sandbox\n",
			o->listen, o->port);
		return 0;
	}
	char tok[RT_TOKEN_MAX + 2];
	size_t len = 0;
	int rc = o->token_file ? read_token(o->token_file, tok, &len, err)
			       : make_token(a, tok, &len, err);
	if (rc < 0 || (rc = ab_crypto_load("runtime's token", err)) < 0)
		return rc;
	sha256(tok, len, a->digest);
	explicit_bzero(tok, sizeof(tok));
	if (a->file[0])
		fprintf(stderr,
			"agentbox: runtime: token in %s (send it as Authorization: Bearer "
			"TOKEN)\n",
			a->file);
	return 0;
}

void rt_auth_close(struct rt_auth *a)
{
	if (a->file[0])
		unlink(a->file);
	a->file[0] = 0;
}

bool rt_auth_bearer_ok(const struct rt_auth *a, const char *v, size_t len)
{
	if (a->off)
		return true;
	if (!v || len < 7 || strncasecmp(v, "Bearer ", 7)) /* RFC 6750: the scheme is caseless */
		return false;
	v += 7, len -= 7;
	while (len && *v == ' ')
		v++, len--;
	unsigned char d[32];
	sha256(v, len, d); /* digests: the time does not tell the token's length */
	static const unsigned char zero[32];
	return CRYPTO_memcmp(d, a->digest, 32) == 0 && CRYPTO_memcmp(a->digest, zero, 32) != 0;
}

/* ---- Host, Origin ---- */

/* The address the connection fd came to, as text. */
static bool local_addr(int fd, char *out, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	if (fd < 0 || getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		return false;
	if (ss.ss_family == AF_INET)
		return inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out,
				 (socklen_t)size) != NULL;
	struct in6_addr *a6 = &((struct sockaddr_in6 *)&ss)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a6))
		return inet_ntop(AF_INET, &a6->s6_addr[12], out, (socklen_t)size) != NULL;
	return inet_ntop(AF_INET6, a6, out, (socklen_t)size) != NULL;
}

bool rt_auth_host_ok(const struct rt_auth *a, const char *v, size_t len, int fd)
{
	char host[256], here[INET6_ADDRSTRLEN];
	const char *end;
	if (!v)
		return true;	  /* HTTP/1.0 without Host: no browser sends that */
	if (len && v[0] == '[') { /* [v6]:port */
		end = memchr(v, ']', len);
		if (!end)
			return false;
		v++;
	} else {
		end = memchr(v, ':', len);
		if (!end)
			end = v + len;
	}
	size_t n = (size_t)(end - v);
	if (n && v[n - 1] == '.')
		n--; /* localhost. is localhost */
	if (n == 0 || n >= sizeof(host))
		return false;
	memcpy(host, v, n);
	host[n] = 0;
	if (!strcasecmp(host, "localhost") || rt_auth_loopback(host))
		return true;
	if (strcmp(a->o->listen, "0.0.0.0") && strcmp(a->o->listen, "::") &&
	    !strcasecmp(host, a->o->listen))
		return true;
	if (local_addr(fd, here, sizeof(here)) && !strcasecmp(host, here))
		return true; /* an address, not a name: the pod's IP, as the router dials it */
	for (unsigned i = 0; i < a->o->n_hosts; i++)
		if (!strcasecmp(host, a->o->hosts[i]))
			return true;
	return false;
}

bool rt_auth_origin_ok(const struct rt_auth *a, const char *v, size_t len)
{
	for (unsigned i = 0; i < a->o->n_origins; i++)
		if (strlen(a->o->origins[i]) == len && !strncasecmp(v, a->o->origins[i], len))
			return true;
	return false;
}

/* ---- clients ---- */

/* "uid N" for a peer on this host, else "addr ADDRESS". */
static void client_key(int fd, char *key, size_t size)
{
	struct sockaddr_storage peer, here;
	socklen_t pl = sizeof(peer), hl = sizeof(here);
	char text[INET6_ADDRSTRLEN] = "?";
	if (getpeername(fd, (struct sockaddr *)&peer, &pl) < 0 ||
	    getsockname(fd, (struct sockaddr *)&here, &hl) < 0) {
		snprintf(key, size, "addr ?");
		return;
	}
	const void *addr;
	int fam = AF_INET;
	if (peer.ss_family == AF_INET) {
		addr = &((struct sockaddr_in *)&peer)->sin_addr;
	} else {
		const struct in6_addr *a6 = &((struct sockaddr_in6 *)&peer)->sin6_addr;
		bool v4 = IN6_IS_ADDR_V4MAPPED(a6);
		addr = v4 ? (const void *)&a6->s6_addr[12] : (const void *)a6;
		fam = v4 ? AF_INET : AF_INET6;
	}
	inet_ntop(fam, addr, text, sizeof(text));
	long uid = rt_auth_loopback(text) ? port_peer_uid(-1, fd) : -1;
	if (uid >= 0)
		snprintf(key, size, "uid %ld", uid);
	else
		snprintf(key, size, "addr %s", text);
}

int rt_auth_client_take(struct rt_auth *a, int fd, bool grpc)
{
	char key[64];
	client_key(fd, key, sizeof(key));
	int free_at = -1;
	for (int i = 0; i < RT_CLIENTS_MAX; i++) {
		struct rt_client *c = &a->clients[i];
		if (!c->key[0]) {
			if (free_at < 0)
				free_at = i;
			continue;
		}
		if (strcmp(c->key, key))
			continue;
		unsigned *n = grpc ? &c->grpc : &c->http;
		if (*n >= (grpc ? RT_CLIENT_GRPC : RT_CLIENT_CONNS))
			return -1;
		(*n)++;
		return i;
	}
	if (free_at < 0)
		return -1;
	snprintf(a->clients[free_at].key, sizeof(a->clients[free_at].key), "%s", key);
	*(grpc ? &a->clients[free_at].grpc : &a->clients[free_at].http) = 1;
	return free_at;
}

void rt_auth_client_put(struct rt_auth *a, int client, bool grpc)
{
	if (client < 0 || client >= RT_CLIENTS_MAX)
		return;
	struct rt_client *c = &a->clients[client];
	unsigned *n = grpc ? &c->grpc : &c->http;
	if (*n)
		(*n)--;
	if (!c->http && !c->grpc)
		c->key[0] = 0;
}
