/* The environment a command gets: a policy (core, none, all), a filter for
 * names that look like secrets, explicit pass-throughs and values, and
 * HOME/PATH that work inside the view. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/error.h"
#include "net/netproxy.h"
#include "util/util.h"

#define SANDBOX_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

static const char *const core_names[] = {
	"PATH", "HOME", "LANG", "TERM", "TZ", "USER", "LOGNAME", "SHELL",
};

/* Suffixes (after an underscore, or the whole name) of secret-looking names. */
static const char *const secret_suffixes[] = {
	"KEY",	  "KEYS",	"SECRET",      "SECRETS",	"TOKEN",
	"TOKENS", "CREDENTIAL", "CREDENTIALS", "ACCESS_KEY_ID",
};

/* Well-known names that hold a secret or reach one (an agent socket). */
static const char *const secret_names[] = {
	"SSH_AUTH_SOCK",     "GPG_AGENT_INFO",	   "KRB5CCNAME",   "AWS_SECRET_ACCESS_KEY",
	"AWS_ACCESS_KEY_ID", "AWS_SESSION_TOKEN",  "GITHUB_TOKEN", "GH_TOKEN",
	"NPM_TOKEN",	     "DOCKER_AUTH_CONFIG", "VAULT_TOKEN",  "GOOGLE_APPLICATION_CREDENTIALS",
	"MYSQL_PWD",	     "PGPASSFILE",
};

static bool has_suffix_ci(const char *name, size_t n, const char *suf)
{
	size_t m = strlen(suf);
	if (n < m || strcasecmp(name + n - m, suf) != 0)
		return false;
	return n == m || name[n - m - 1] == '_';
}

bool ab_env_name_is_secret(const char *name)
{
	size_t n = strlen(name);
	for (size_t i = 0; i < AB_ARRAY_SIZE(secret_names); i++)
		if (strcasecmp(name, secret_names[i]) == 0)
			return true;
	for (size_t i = 0; i < AB_ARRAY_SIZE(secret_suffixes); i++)
		if (has_suffix_ci(name, n, secret_suffixes[i]))
			return true;
	/* PGPASSWORD, DB_PASSWORD, SMTP_PASSWD: whatever precedes it */
	if ((n >= 8 && strcasecmp(name + n - 8, "PASSWORD") == 0) ||
	    (n >= 6 && strcasecmp(name + n - 6, "PASSWD") == 0))
		return true;
	/* FOO_SECRET_BAR: "_SECRET_" anywhere, or a leading "SECRET_" */
	for (const char *p = name; (p = strcasestr(p, "SECRET_")); p++)
		if (p == name || p[-1] == '_')
			return true;
	return false;
}

/* For "NAME=value" strings: names too long to check count as secret. */
static bool name_is_secret_n(const char *s, size_t n)
{
	char name[256];
	if (n >= sizeof(name))
		return true;
	memcpy(name, s, n);
	name[n] = '\0';
	return ab_env_name_is_secret(name);
}

static bool is_core_name(const char *name, size_t n)
{
	for (size_t i = 0; i < AB_ARRAY_SIZE(core_names); i++)
		if (strlen(core_names[i]) == n && strncmp(name, core_names[i], n) == 0)
			return true;
	return n >= 3 && strncmp(name, "LC_", 3) == 0;
}

static bool in_list(char *const *list, size_t n_list, const char *name, size_t n)
{
	for (size_t i = 0; i < n_list; i++)
		if (strlen(list[i]) == n && strncmp(list[i], name, n) == 0)
			return true;
	return false;
}

/* Environment being built: later entries of the same name replace earlier. */
struct env_builder {
	char **v;
	size_t n, cap;
};

static int env_put(struct env_builder *b, const char *name, size_t name_len, const char *value)
{
	char *entry;
	if (asprintf(&entry, "%.*s=%s", (int)name_len, name, value) < 0)
		return -ENOMEM;
	for (size_t i = 0; i < b->n; i++) {
		if (strncmp(b->v[i], name, name_len) == 0 && b->v[i][name_len] == '=') {
			free(b->v[i]);
			b->v[i] = entry;
			return 0;
		}
	}
	if (b->n + 2 > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 32;
		char **nv = realloc(b->v, cap * sizeof(char *));
		if (!nv) {
			free(entry);
			return -ENOMEM;
		}
		b->v = nv;
		b->cap = cap;
	}
	b->v[b->n++] = entry;
	b->v[b->n] = NULL;
	return 0;
}

void ab_env_free(char **env)
{
	ab_cleanup_strvp(&env);
}

int ab_env_build(const struct ab_config *cfg, char *const *envp, char ***out, struct ab_error *err)
{
	struct env_builder b = {0};
	int r = 0;

	for (char *const *e = envp; e && *e && r == 0; e++) {
		const char *eq = strchr(*e, '=');
		if (!eq || eq == *e)
			continue;
		size_t n = (size_t)(eq - *e);
		bool passed = in_list(cfg->pass_env, cfg->n_pass_env, *e, n);
		bool keep;
		switch (cfg->env_policy) {
		case AB_ENV_CORE:
			/* LC_* is a family: a secret-looking member stays out */
			keep = passed || (is_core_name(*e, n) && !name_is_secret_n(*e, n));
			break;
		case AB_ENV_ALL:
			keep = passed || !name_is_secret_n(*e, n);
			break;
		default:
			keep = passed;
		}
		if (keep)
			r = env_put(&b, *e, n, eq + 1);
	}
	/* HOME and PATH must work inside the view, whatever the host had */
	if (r == 0)
		r = env_put(&b, "HOME", 4, cfg->home ? cfg->home : "/home/agent");
	if (r == 0)
		r = env_put(&b, "PATH", 4, SANDBOX_PATH);
	for (const char *const *e = net_proxy_env; cfg->net == AB_NET_PROXY && *e && r == 0; e++)
		r = env_put(&b, *e, strcspn(*e, "="), strchr(*e, '=') + 1); /* netsetup.c */
	for (size_t i = 0; i < cfg->n_set_env && r == 0; i++) {
		const char *eq = strchr(cfg->set_env[i], '=');
		r = env_put(&b, cfg->set_env[i], (size_t)(eq - cfg->set_env[i]), eq + 1);
	}
	if (r == 0 && !b.v)
		r = (b.v = calloc(1, sizeof(char *))) ? 0 : -ENOMEM;
	if (r < 0) {
		ab_env_free(b.v);
		return ab_error_set(err, -r, "building the environment");
	}
	*out = b.v;
	return 0;
}
