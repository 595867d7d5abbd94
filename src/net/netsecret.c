/* --net secret= and --net ca= (netsecret.h): the secrets read from the
 * caller's environment, their placeholders, the command's environment,
 * and the CA bundle the sandbox trusts. */
#include "net/netsecret.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crypto/ossl.h"
#include "util/error.h"
#include "util/util.h"

#define BUNDLE_MAX (8 << 20)

/* The tools that read a CA bundle from the environment: OpenSSL (Python's
 * ssl, ...), requests, Node, pip, git, curl. */
static const char *const ca_vars[] = {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
				      "PIP_CERT",      "GIT_SSL_CAINFO",     "CURL_CA_BUNDLE"};

void net_secrets_free(struct net_secrets *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++) {
		if (s->v[i].value)
			OPENSSL_cleanse(s->v[i].value, strlen(s->v[i].value));
		free(s->v[i].value);
		free(s->v[i].name);
		netpolicy_free(&s->v[i].where);
	}
	free(s->v);
	net_tls_free(s->tls);
	free(s->bundle);
	free(s->ca);
	free(s);
}

static const char *env_get(char *const *envp, const char *name, size_t n)
{
	for (char *const *e = envp; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

static int add_secret(struct net_secrets *s, const char *spec, char *const *envp,
		      struct ab_error *err)
{
	size_t n = netpolicy_secret_name(spec);
	const char *value = env_get(envp, spec, n);
	if (!value || !*value)
		return ab_error_plain(err, ENOENT,
				      "--net secret=%s: %.*s is %s in agentbox's environment: set "
				      "it there (it never enters the sandbox)",
				      spec, (int)n, spec, value ? "empty" : "not set");
	for (const char *c = value; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return ab_error_plain(err, EINVAL,
					      "--net secret=%s: the value of %.*s has a control "
					      "character: it cannot go in an HTTP header",
					      spec, (int)n, spec);
	for (size_t i = 0; i < s->n; i++)
		if (strlen(s->v[i].name) == n && strncmp(s->v[i].name, spec, n) == 0)
			return ab_error_plain(err, EINVAL,
					      "--net secret=: %.*s is given twice: list all its "
					      "hosts in one secret=%.*s@HOST,HOST",
					      (int)n, spec, (int)n, spec);
	struct net_secret *v = realloc(s->v, (s->n + 1) * sizeof(*v));
	if (!v)
		return ab_error_set(err, ENOMEM, "--net secret=");
	s->v = v;
	struct net_secret *x = &v[s->n];
	memset(x, 0, sizeof(*x));
	netpolicy_init(&x->where);
	s->n++;
	unsigned char rnd[16];
	if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
		return ab_error_set(err, errno ? errno : EIO, "--net secret=: random placeholder");
	int k = snprintf(x->placeholder, sizeof(x->placeholder), "agentbox-secret-");
	for (size_t i = 0; i < sizeof(rnd); i++)
		k += snprintf(x->placeholder + k, sizeof(x->placeholder) - (size_t)k, "%02x",
			      rnd[i]);
	char *allow = NULL;
	if (!(x->name = strndup(spec, n)) || !(x->value = strdup(value)) ||
	    asprintf(&allow, "secret=%s", spec) < 0)
		return ab_error_set(err, ENOMEM, "--net secret=");
	int r = netpolicy_add(&x->where, allow, err);
	free(allow);
	return r;
}

static int read_bundle(struct net_secrets *s, const char *ca_pem, struct ab_error *err)
{
	const char *host = X509_get_default_cert_file();
	cleanup_fd int fd = open(host, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	size_t have = 0, cap = strlen(ca_pem) + 2;
	if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < BUNDLE_MAX)
		cap += (size_t)st.st_size;
	else if (fd >= 0)
		return ab_error_plain(err, EINVAL, "--net secret=: %s is not a CA bundle", host);
	if (!(s->bundle = malloc(cap)))
		return ab_error_set(err, ENOMEM, "--net secret=");
	while (fd >= 0 && have + strlen(ca_pem) + 2 < cap) {
		ssize_t n = read(fd, s->bundle + have, cap - have - strlen(ca_pem) - 2);
		if (n <= 0)
			break;
		have += (size_t)n;
	}
	if (have && s->bundle[have - 1] != '\n')
		s->bundle[have++] = '\n';
	memcpy(s->bundle + have, ca_pem, strlen(ca_pem));
	s->bundle_len = have + strlen(ca_pem);
	return 0;
}

int net_secrets_make_ca(struct net_secrets *s, struct ab_error *err)
{
	char *ca_pem = NULL;
	int r = net_tls_new(s->ca, &s->tls, &ca_pem, err);
	if (r == 0)
		r = read_bundle(s, ca_pem, err);
	free(ca_pem);
	return r;
}

/* allow= with a method or path rule: the proxy terminates TLS too */
static bool has_rules(const char *spec)
{
	if (strncmp(spec, "allow=", 6) != 0)
		return false;
	struct net_policy p;
	netpolicy_init(&p);
	struct ab_error e = {0};
	bool any = false;
	if (netpolicy_add(&p, spec, &e) == 0)
		for (size_t i = 0; i < p.n; i++)
			any |= netrule_restricted(&p.r[i]);
	netpolicy_free(&p);
	return any;
}

int net_secrets_new(const struct ab_config *cfg, char *const *envp, struct net_secrets **out,
		    struct ab_error *err)
{
	*out = NULL;
	const char *ca = NULL;
	bool any = false, rate = false;
	for (size_t i = 0; i < cfg->n_net_rules; i++) {
		const char *r = cfg->net_rules[i];
		any |= strncmp(r, "secret=", 7) == 0 || has_rules(r);
		if (strncmp(r, "rate=", 5) == 0)
			rate = strcmp(r, "rate=none") != 0;
		if (strncmp(r, "ca=", 3) != 0)
			continue;
		if (ca)
			return ab_error_plain(err, EINVAL,
					      "--net ca= is given twice: put the CAs in one PEM "
					      "file");
		ca = r + 3;
	}
	if (!any && !ca)
		return 0;
	if (!any)
		return ab_error_plain(
			err, EINVAL,
			"--net ca=%s: the CAs verify the hosts the proxy terminates "
			"TLS for, and no --net secret= or method/path rule names one: "
			"add one, or leave ca= out",
			ca);
	if (rate)
		return ab_error_plain(
			err, ENOTSUP,
			"--net rate= does not bound the TLS-terminated connections of "
			"--net secret= and method/path rules: use one or the other");
	if (cfg->isolation_missing & AB_MISSING_NAMESPACES)
		return ab_error_plain(err, ENOTSUP,
				      "--net secret= and method/path rules need the sandbox's "
				      "own namespaces");
	struct net_secrets *s = calloc(1, sizeof(*s));
	if (!s)
		return ab_error_set(err, ENOMEM, "--net secret=");
	int r = 0;
	for (size_t i = 0; i < cfg->n_net_rules && r == 0; i++)
		if (strncmp(cfg->net_rules[i], "secret=", 7) == 0)
			r = add_secret(s, cfg->net_rules[i] + 7, envp, err);
	if (r == 0 && ca && !(s->ca = strdup(ca)))
		r = ab_error_set(err, ENOMEM, "--net secret=");
	if (r < 0) {
		net_secrets_free(s);
		return r;
	}
	*out = s;
	return 0;
}

/* Replace NAME's entry in *envp (or add one) with NAME=value. */
static int env_set(char ***envp, const char *name, const char *value)
{
	size_t n = 0, len = strlen(name);
	char *line;
	if (asprintf(&line, "%s=%s", name, value) < 0)
		return -ENOMEM;
	for (; (*envp)[n]; n++)
		if (strncmp((*envp)[n], name, len) == 0 && (*envp)[n][len] == '=') {
			free((*envp)[n]);
			(*envp)[n] = line;
			return 0;
		}
	char **v = realloc(*envp, (n + 2) * sizeof(char *));
	if (!v) {
		free(line);
		return -ENOMEM;
	}
	v[n] = line;
	v[n + 1] = NULL;
	*envp = v;
	return 0;
}

int net_secrets_env(const struct net_secrets *s, char ***envp, struct ab_error *err)
{
	/* another variable that carries a value (GH_TOKEN beside
	 * GITHUB_TOKEN) stays out too */
	size_t k = 0;
	for (size_t i = 0; (*envp)[i]; i++) {
		const char *eq = strchr((*envp)[i], '=');
		bool leak = false;
		for (size_t j = 0; eq && j < s->n && !leak; j++)
			leak = strstr(eq + 1, s->v[j].value) != NULL;
		if (leak) {
			OPENSSL_cleanse((*envp)[i], strlen((*envp)[i]));
			free((*envp)[i]);
		} else {
			(*envp)[k++] = (*envp)[i];
		}
	}
	(*envp)[k] = NULL;
	int r = 0;
	for (size_t i = 0; i < s->n && r == 0; i++)
		r = env_set(envp, s->v[i].name, s->v[i].placeholder);
	for (size_t i = 0; i < AB_ARRAY_SIZE(ca_vars) && r == 0; i++)
		r = env_set(envp, ca_vars[i], NET_CA_BUNDLE);
	return r < 0 ? ab_error_set(err, -r, "building the environment") : 0;
}

int net_secrets_inside(struct net_secrets *s, struct ab_error *err)
{
	/* this process (a copy of the launcher) forgets the values first */
	for (size_t i = 0; i < s->n; i++) {
		OPENSSL_cleanse(s->v[i].value, strlen(s->v[i].value));
		size_t len = strlen(s->v[i].name);
		for (char **e = environ; e && *e; e++)
			if (strncmp(*e, s->v[i].name, len) == 0 && (*e)[len] == '=')
				OPENSSL_cleanse(*e + len + 1, strlen(*e + len + 1));
	}
	net_tls_forget_key(s->tls);
	cleanup_fd int dir = open(NET_CA_DIR, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cleanup_fd int fd =
		dir < 0 ? -1
			: openat(dir, NET_CA_NAME,
				 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
	if (fd < 0 || write(fd, s->bundle, s->bundle_len) != (ssize_t)s->bundle_len)
		return ab_error_set(err, errno ? errno : EIO, "cannot write %s in the sandbox",
				    NET_CA_BUNDLE);
	return 0;
}
