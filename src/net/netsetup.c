/* The proxy's policy from the configuration and from a session's
 * {"op":"net"}, the reports of what it allowed and denied, the sandbox
 * side's listening socket, and the environment that points tools at it. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/error.h"
#include "net/netproxy.h"
#include "net/netproxy_int.h"
#include "net/netreport.h"
#include "util/sync.h"
#include "util/util.h"

#define P_STR(x)  #x
#define P_NUM(x)  P_STR(x)
#define PROXY_URL "http://127.0.0.1:" P_NUM(NET_PROXY_PORT)
#define NO_PROXY  "localhost,127.0.0.1,::1"

/* curl reads only the lower-case http_proxy (a CGI could set HTTP_PROXY);
 * pip (requests), git and npm read either; npm's own config names, and
 * NODE_USE_ENV_PROXY for Node's fetch (Node 24+). */
const char *const net_proxy_env[] = {
	"http_proxy=" PROXY_URL,
	"https_proxy=" PROXY_URL,
	"HTTP_PROXY=" PROXY_URL,
	"HTTPS_PROXY=" PROXY_URL,
	"all_proxy=socks5h://127.0.0.1:" P_NUM(NET_PROXY_PORT),
	"ALL_PROXY=socks5h://127.0.0.1:" P_NUM(NET_PROXY_PORT),
	"no_proxy=" NO_PROXY,
	"NO_PROXY=" NO_PROXY,
	"npm_config_proxy=" PROXY_URL,
	"npm_config_https_proxy=" PROXY_URL,
	"PIP_PROXY=" PROXY_URL,
	"NODE_USE_ENV_PROXY=1",
	NULL,
};

int netproxy_listen_inside(int sync_fd, struct ab_error *err)
{
	cleanup_fd int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ab_error_set(err, errno, "cannot make the network proxy's socket");
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_port = htons(NET_PROXY_PORT),
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 128) < 0)
		return ab_error_set(err, errno,
				    "cannot listen on 127.0.0.1:%d in the sandbox for the proxy",
				    NET_PROXY_PORT);
	int r = sync_send_fd(sync_fd, SYNC_NET_LISTENER, fd);
	return r < 0 ? ab_error_set(err, -r, "cannot pass the proxy's socket out") : 0;
}

/* ---- the policy ---- */

static void strv_free(char **v)
{
	for (char **s = v; s && *s; s++)
		free(*s);
	free(v);
}

void netproxy_rules_free(struct netproxy *p)
{
	strv_free(p->allow);
	strv_free(p->deny);
	strv_free(p->implicit);
	p->allow = p->deny = p->implicit = NULL;
	netpolicy_free(&p->pol);
}

static int strv_push(char ***v, size_t *n, const char *s, size_t len)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(char *));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	if (!(nv[*n] = strndup(s, len)))
		return -ENOMEM;
	nv[++*n] = NULL;
	return 0;
}

/* Split "allow=a,b" into its patterns onto v. */
static int split_into(char ***v, size_t *n, const char *list)
{
	for (const char *s = list; *s;) {
		size_t len = strcspn(s, ","), seg = 0;
		while (s[len] == ',' && netrule_is_method(s + seg, len - seg)) { /* "GET,HEAD:h" */
			seg = len + 1;
			len = seg + strcspn(s + seg, ",");
		}
		if (len && strv_push(v, n, s, len) < 0)
			return -ENOMEM;
		s += len + (s[len] == ',');
	}
	return 0;
}

/* pol from the limits in base and the two lists; all checked first. */
static int build(struct net_policy *pol, const struct net_policy *base, char *const *allow,
		 char *const *deny, char *const *implicit, struct ab_error *err)
{
	netpolicy_init(pol);
	pol->max_conns = base->max_conns;
	pol->rate = base->rate;
	char spec[NET_HOST_MAX + NET_PATH_MAX + 128];
	int r = 0;
	for (char *const *a = allow; a && *a && r == 0; a++) {
		snprintf(spec, sizeof(spec), "allow=%s", *a);
		r = netpolicy_add(pol, spec, err);
	}
	for (char *const *a = implicit; a && *a && r == 0; a++) {
		snprintf(spec, sizeof(spec), "allow=%s", *a);
		size_t before = pol->n;
		r = netpolicy_add(pol, spec, err);
		for (size_t i = before; i < pol->n; i++)
			pol->r[i].implicit = true;
	}
	for (char *const *d = deny; d && *d && r == 0; d++) {
		snprintf(spec, sizeof(spec), "deny=%s", *d);
		r = netpolicy_add(pol, spec, err);
	}
	if (r < 0)
		netpolicy_free(pol);
	return r;
}

int netproxy_policy_from_config(struct netproxy *p, const struct ab_config *cfg,
				struct ab_error *err)
{
	struct net_policy base;
	netpolicy_init(&base);
	size_t na = 0, nd = 0, ni = 0;
	int r = 0;
	for (size_t i = 0; i < cfg->n_net_rules && r == 0; i++) {
		const char *s = cfg->net_rules[i];
		if (strncmp(s, "allow=", 6) == 0)
			r = split_into(&p->allow, &na, s + 6);
		else if (strncmp(s, "deny=", 5) == 0)
			r = split_into(&p->deny, &nd, s + 5);
		else if (strncmp(s, "secret=", 7) == 0 && strchr(s, '@'))
			r = split_into(&p->implicit, &ni, strchr(s, '@') + 1);
		else
			r = netpolicy_add(&base, s, err) < 0 ? -EINVAL : 0;
	}
	if (r == -ENOMEM)
		return ab_error_set(err, ENOMEM, "reading the network policy");
	if (r < 0)
		return r;
	return build(&p->pol, &base, p->allow, p->deny, p->implicit, err);
}

static int copy_list(char ***out, char *const *v, size_t n)
{
	size_t k = 0;
	*out = NULL;
	for (size_t i = 0; i < n; i++)
		if (strv_push(out, &k, v[i], strlen(v[i])) < 0)
			return -ENOMEM;
	if (!*out && !(*out = calloc(1, sizeof(char *))))
		return -ENOMEM;
	return 0;
}

int netproxy_set_rules(struct netproxy *p, char *const *allow, size_t n_allow, char *const *deny,
		       size_t n_deny, struct ab_error *err)
{
	char **na = NULL, **nd = NULL;
	struct net_policy pol;
	int r = 0;
	if ((allow && copy_list(&na, allow, n_allow) < 0) ||
	    (deny && copy_list(&nd, deny, n_deny) < 0))
		r = ab_error_set(err, ENOMEM, "changing the network policy");
	if (r == 0)
		r = build(&pol, &p->pol, allow ? na : p->allow, deny ? nd : p->deny, p->implicit,
			  err);
	if (r < 0) {
		strv_free(na);
		strv_free(nd);
		return r;
	}
	netpolicy_free(&p->pol);
	p->pol = pol;
	if (allow) {
		strv_free(p->allow);
		p->allow = na;
	}
	if (deny) {
		strv_free(p->deny);
		p->deny = nd;
	}
	return 0;
}

size_t netproxy_rules(const struct netproxy *p, bool deny, const char **out, size_t max)
{
	size_t n = 0;
	for (char **s = deny ? p->deny : p->allow; s && *s && n < max; s++)
		out[n++] = *s;
	return n;
}

/* ---- reports ---- */

#define REPORT_MAX 256 /* distinct host:port pairs kept each way */

void net_report_add(struct ab_net_report *r, bool allowed, const char *host, unsigned port,
		    const char *why)
{
	struct ab_net_conn **v = allowed ? &r->allowed : &r->denied;
	size_t *n = allowed ? &r->n_allowed : &r->n_denied;
	r->on = true;
	for (size_t i = 0; i < *n; i++)
		if ((*v)[i].port == port && strcmp((*v)[i].host, host) == 0) {
			(*v)[i].count++;
			return;
		}
	if (*n >= REPORT_MAX) {
		r->dropped++;
		return;
	}
	struct ab_net_conn *nv = realloc(*v, (*n + 1) * sizeof(**v));
	if (!nv) {
		r->dropped++;
		return;
	}
	*v = nv;
	struct ab_net_conn *e = &nv[(*n)++];
	memset(e, 0, sizeof(*e));
	snprintf(e->host, sizeof(e->host), "%s", host);
	e->port = port;
	e->count = 1;
	if (why)
		snprintf(e->why, sizeof(e->why), "%s", why);
}

int net_report_copy(struct ab_net_report *dst, const struct ab_net_report *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->on = src->on;
	dst->dropped = src->dropped;
	memcpy(dst->failed, src->failed, sizeof(dst->failed));
	if (src->n_allowed && !(dst->allowed = malloc(src->n_allowed * sizeof(*dst->allowed))))
		return -ENOMEM;
	if (src->n_denied && !(dst->denied = malloc(src->n_denied * sizeof(*dst->denied)))) {
		net_report_free(dst);
		return -ENOMEM;
	}
	if (src->n_allowed)
		memcpy(dst->allowed, src->allowed, src->n_allowed * sizeof(*dst->allowed));
	if (src->n_denied)
		memcpy(dst->denied, src->denied, src->n_denied * sizeof(*dst->denied));
	dst->n_allowed = src->n_allowed;
	dst->n_denied = src->n_denied;
	return 0;
}

void net_report_free(struct ab_net_report *r)
{
	free(r->allowed);
	free(r->denied);
	memset(r, 0, sizeof(*r));
}

/* ---- the result's "network" ---- */

static json_object *conns_json(const struct ab_net_conn *v, size_t n, bool why)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_new_object();
		json_object_object_add(e, "host", json_object_new_string(v[i].host));
		json_object_object_add(e, "port", json_object_new_int((int)v[i].port));
		json_object_object_add(e, "count", json_object_new_int64((int64_t)v[i].count));
		if (why)
			json_object_object_add(e, "reason", json_object_new_string(v[i].why));
		json_object_array_add(a, e);
	}
	return a;
}

json_object *ab_net_report_json(const struct ab_net_report *r)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "allowed", conns_json(r->allowed, r->n_allowed, false));
	json_object_object_add(o, "denied", conns_json(r->denied, r->n_denied, true));
	if (r->dropped)
		json_object_object_add(o, "unlisted", json_object_new_int64((int64_t)r->dropped));
	if (r->failed[0])
		json_object_object_add(o, "error", json_object_new_string(r->failed));
	return o;
}

void ab_net_report_print_denials(const struct ab_net_report *r, FILE *f)
{
	if (!r->n_denied)
		return;
	fputs("agentbox: network denied:", f);
	for (size_t i = 0; i < r->n_denied && i < 8; i++)
		fprintf(f, "%s %s:%u (%s, %lu)", i ? "," : "", r->denied[i].host, r->denied[i].port,
			r->denied[i].why, r->denied[i].count);
	if (r->n_denied > 8)
		fprintf(f, ", and %zu more", r->n_denied - 8);
	fputc('\n', f);
}

/* ---- whose connection ---- */

/* The inode of the sandbox's socket connected from port to the proxy, from
 * the sandbox's own TCP table (its network namespace, seen through its
 * init); 0 when not found. */
static unsigned long client_inode(pid_t init, unsigned port)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/net/tcp", (int)init);
	FILE *f = fopen(path, "re");
	if (!f)
		return 0;
	unsigned long inode = 0;
	/* bounded: a sandbox with many sockets must not stall the loop */
	for (int n = 0; !inode && n < 8192 && fgets(line, sizeof(line), f); n++) {
		unsigned laddr, lport, raddr, rport;
		unsigned long ino;
		if (sscanf(line, " %*d: %x:%x %x:%x %*x %*x:%*x %*x:%*x %*x %*u %*u %lu", &laddr,
			   &lport, &raddr, &rport, &ino) == 5 &&
		    lport == port && rport == NET_PROXY_PORT)
			inode = ino;
	}
	fclose(f);
	return inode;
}

static bool holds_socket(pid_t pid, const char *want, size_t *budget)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return false;
	bool found = false;
	for (struct dirent *de; !found && *budget && (de = readdir(d));) {
		char target[64];
		if (de->d_name[0] == '.')
			continue;
		(*budget)--;
		ssize_t n = readlinkat(dirfd(d), de->d_name, target, sizeof(target) - 1);
		found = n > 0 && (size_t)n == strlen(want) && memcmp(target, want, (size_t)n) == 0;
	}
	closedir(d);
	return found;
}

pid_t netproxy_peer_pid(pid_t init, unsigned client_port)
{
	unsigned long inode = client_inode(init, client_port);
	if (!inode)
		return 0;
	char want[48];
	snprintf(want, sizeof(want), "socket:[%lu]", inode);
	/* the init's descendants, breadth first, through .../children */
	enum { MAX_PIDS = 1024 };
	pid_t *q = malloc(MAX_PIDS * sizeof(*q));
	if (!q)
		return 0;
	/* fds looked at, at most: a few ms, whatever the sandbox holds; past
	 * that the connection counts for the session only */
	size_t head = 0, tail = 0, budget = 4096;
	q[tail++] = init;
	pid_t found = 0;
	while (head < tail && !found && budget) {
		pid_t pid = q[head++];
		if (pid != init && holds_socket(pid, want, &budget)) {
			found = pid;
			break;
		}
		char path[80];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
		FILE *f = fopen(path, "re");
		for (int c; f && tail < MAX_PIDS && fscanf(f, "%d", &c) == 1;)
			q[tail++] = (pid_t)c;
		if (f)
			fclose(f);
	}
	free(q);
	return found;
}
