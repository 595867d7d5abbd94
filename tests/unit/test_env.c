/* The environment a command gets (ab_env_build) and the secret-name filter
 * (ab_env_name_is_secret). Every test builds from a fake envp, never from
 * the real environment. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "agentbox/agentbox.h"

#define SANDBOX_PATH "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

static char *const fake_env[] = {
	"PATH=/host/bin:/usr/bin",
	"HOME=/root",
	"LANG=C.UTF-8",
	"LC_ALL=C",
	"LC_CTYPE=en_US.UTF-8",
	"TERM=xterm-256color",
	"TZ=Europe/Paris",
	"USER=alice",
	"LOGNAME=alice",
	"SHELL=/bin/bash",
	"EDITOR=vim",
	"DISPLAY=:0",
	"PATHEXT=.exe",
	"HOMEDIR=/home/alice",
	"XLC_ALL=C",
	"lang=lower",
	"FOO_API_KEY=key",
	"AWS_SECRET_ACCESS_KEY=aws",
	"GITHUB_TOKEN=ghp",
	"SSH_AUTH_SOCK=/tmp/agent.sock",
	"DB_PASSWORD=hunter2",
	"MY_SECRET_THING=x",
	"X_CREDENTIALS=c",
	"NOEQUALS",
	"=orphan",
	NULL,
};

static const char *const core_kept[] = {
	"PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ", "USER", "LOGNAME", "SHELL",
};

static const char *const secrets_in_fake_env[] = {
	"FOO_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN",	 "SSH_AUTH_SOCK",
	"DB_PASSWORD", "MY_SECRET_THING",	"X_CREDENTIALS",
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static size_t env_count(char **env)
{
	size_t n = 0;
	while (env[n])
		n++;
	return n;
}

/* The value of name in env, or NULL. */
static const char *env_get(char **env, const char *name)
{
	size_t n = strlen(name);
	for (char **e = env; *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			return *e + n + 1;
	return NULL;
}

/* Every entry is NAME=VALUE with a non-empty name, and no name twice. */
static void assert_well_formed(char **env)
{
	for (size_t i = 0; env[i]; i++) {
		const char *eq = strchr(env[i], '=');
		cr_assert_not_null(eq, "entry '%s' has no '='", env[i]);
		cr_assert_neq(eq, env[i], "entry '%s' has an empty name", env[i]);
		size_t n = (size_t)(eq - env[i]);
		for (size_t j = i + 1; env[j]; j++)
			cr_assert_not(strncmp(env[i], env[j], n + 1) == 0,
				      "name of '%s' appears twice ('%s')", env[i], env[j]);
	}
}

static char **build(const struct ab_config *cfg, char *const *envp)
{
	char **env = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_env_build(cfg, envp, &env, &err), 0, "%s", err.msg);
	cr_assert_not_null(env);
	assert_well_formed(env);
	return env;
}

/* A NULL-terminated heap string vector, as the option parser builds. */
static char **strv(size_t *n, const char *const *items, size_t count)
{
	char **v = calloc(count + 1, sizeof(char *));
	cr_assert_not_null(v);
	for (size_t i = 0; i < count; i++) {
		v[i] = strdup(items[i]);
		cr_assert_not_null(v[i]);
	}
	*n = count;
	return v;
}

/* ---- policies ---- */

Test(env_build, core_keeps_only_core_names)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cr_assert_eq(cfg.env_policy, AB_ENV_CORE);
	char **env = build(&cfg, fake_env);

	cr_assert_eq(env_count(env), N(core_kept), "%zu entries", env_count(env));
	for (size_t i = 0; i < N(core_kept); i++)
		cr_assert_not_null(env_get(env, core_kept[i]), "%s missing", core_kept[i]);
	cr_assert_str_eq(env_get(env, "LANG"), "C.UTF-8");
	cr_assert_str_eq(env_get(env, "LC_ALL"), "C");
	cr_assert_str_eq(env_get(env, "LC_CTYPE"), "en_US.UTF-8");
	cr_assert_str_eq(env_get(env, "TERM"), "xterm-256color");
	cr_assert_str_eq(env_get(env, "TZ"), "Europe/Paris");
	cr_assert_str_eq(env_get(env, "USER"), "alice");
	cr_assert_str_eq(env_get(env, "LOGNAME"), "alice");
	cr_assert_str_eq(env_get(env, "SHELL"), "/bin/bash");

	/* names that merely start or end like a core name are not core */
	cr_assert_null(env_get(env, "PATHEXT"));
	cr_assert_null(env_get(env, "HOMEDIR"));
	cr_assert_null(env_get(env, "XLC_ALL"));
	cr_assert_null(env_get(env, "lang"));
	cr_assert_null(env_get(env, "EDITOR"));
	cr_assert_null(env_get(env, "DISPLAY"));
	for (size_t i = 0; i < N(secrets_in_fake_env); i++)
		cr_assert_null(env_get(env, secrets_in_fake_env[i]));
	ab_env_free(env);
	ab_config_free(&cfg);
}

Test(env_build, home_and_path_are_the_sandbox_ones)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cr_assert_null(cfg.home);
	char **env = build(&cfg, fake_env);
	cr_assert_str_eq(env_get(env, "HOME"), "/home/agent");
	cr_assert_str_eq(env_get(env, "PATH"), SANDBOX_PATH);
	ab_env_free(env);

	cfg.home = strdup("/home/bob");
	env = build(&cfg, fake_env);
	cr_assert_str_eq(env_get(env, "HOME"), "/home/bob");
	cr_assert_str_eq(env_get(env, "PATH"), SANDBOX_PATH);
	ab_env_free(env);

	/* and they are there even when the host had none */
	char *const bare[] = {"LANG=C", NULL};
	const enum ab_env_policy policies[] = {AB_ENV_CORE, AB_ENV_NONE, AB_ENV_ALL};
	for (size_t i = 0; i < N(policies); i++) {
		cfg.env_policy = policies[i];
		env = build(&cfg, bare);
		cr_assert_str_eq(env_get(env, "HOME"), "/home/bob");
		cr_assert_str_eq(env_get(env, "PATH"), SANDBOX_PATH);
		ab_env_free(env);
	}
	ab_config_free(&cfg);
}

Test(env_build, empty_or_null_envp)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	char *const empty[] = {NULL};
	char **env = build(&cfg, empty);
	cr_assert_eq(env_count(env), 2);
	cr_assert_str_eq(env_get(env, "HOME"), "/home/agent");
	cr_assert_str_eq(env_get(env, "PATH"), SANDBOX_PATH);
	ab_env_free(env);

	env = build(&cfg, NULL);
	cr_assert_eq(env_count(env), 2);
	ab_env_free(env);
	ab_config_free(&cfg);
}

Test(env_build, none_keeps_only_home_and_path)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.env_policy = AB_ENV_NONE;
	char **env = build(&cfg, fake_env);
	cr_assert_eq(env_count(env), 2, "%zu entries", env_count(env));
	cr_assert_str_eq(env_get(env, "HOME"), "/home/agent");
	cr_assert_str_eq(env_get(env, "PATH"), SANDBOX_PATH);
	cr_assert_null(env_get(env, "LANG"));
	ab_env_free(env);
	ab_config_free(&cfg);
}

Test(env_build, none_with_pass_env)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.env_policy = AB_ENV_NONE;
	const char *pass[] = {"EDITOR", "GITHUB_TOKEN", "ABSENT"};
	cfg.pass_env = strv(&cfg.n_pass_env, pass, N(pass));
	char **env = build(&cfg, fake_env);
	cr_assert_eq(env_count(env), 4, "%zu entries", env_count(env));
	cr_assert_str_eq(env_get(env, "EDITOR"), "vim");
	cr_assert_str_eq(env_get(env, "GITHUB_TOKEN"), "ghp");
	cr_assert_null(env_get(env, "ABSENT"), "a passed name absent from envp is not made up");
	cr_assert_null(env_get(env, "LANG"));
	ab_env_free(env);
	ab_config_free(&cfg);
}

Test(env_build, all_keeps_ordinary_names_and_drops_secrets)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.env_policy = AB_ENV_ALL;
	char **env = build(&cfg, fake_env);
	cr_assert_str_eq(env_get(env, "EDITOR"), "vim");
	cr_assert_str_eq(env_get(env, "DISPLAY"), ":0");
	cr_assert_str_eq(env_get(env, "PATHEXT"), ".exe");
	cr_assert_str_eq(env_get(env, "HOMEDIR"), "/home/alice");
	cr_assert_str_eq(env_get(env, "lang"), "lower");
	cr_assert_str_eq(env_get(env, "LANG"), "C.UTF-8");
	cr_assert_str_eq(env_get(env, "USER"), "alice");
	for (size_t i = 0; i < N(secrets_in_fake_env); i++)
		cr_assert_null(env_get(env, secrets_in_fake_env[i]), "%s leaked",
			       secrets_in_fake_env[i]);
	cr_assert_str_eq(env_get(env, "HOME"), "/home/agent");
	cr_assert_str_eq(env_get(env, "PATH"), SANDBOX_PATH);
	/* 16 ordinary entries in fake_env (HOME and PATH among them) */
	cr_assert_eq(env_count(env), 16, "%zu entries", env_count(env));
	ab_env_free(env);
	ab_config_free(&cfg);
}

Test(env_build, pass_env_brings_a_secret_through)
{
	const enum ab_env_policy policies[] = {AB_ENV_ALL, AB_ENV_CORE};
	for (size_t i = 0; i < N(policies); i++) {
		struct ab_config cfg;
		ab_config_init(&cfg);
		cfg.env_policy = policies[i];
		const char *pass[] = {"GITHUB_TOKEN", "SSH_AUTH_SOCK"};
		cfg.pass_env = strv(&cfg.n_pass_env, pass, N(pass));
		char **env = build(&cfg, fake_env);
		cr_assert_str_eq(env_get(env, "GITHUB_TOKEN"), "ghp", "policy %d", policies[i]);
		cr_assert_str_eq(env_get(env, "SSH_AUTH_SOCK"), "/tmp/agent.sock");
		/* only the named ones */
		cr_assert_null(env_get(env, "DB_PASSWORD"));
		cr_assert_null(env_get(env, "FOO_API_KEY"));
		ab_env_free(env);
		ab_config_free(&cfg);
	}
}

Test(env_build, pass_env_matches_whole_names)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.env_policy = AB_ENV_ALL;
	const char *pass[] = {"GITHUB", "DB_PASSWORDX"};
	cfg.pass_env = strv(&cfg.n_pass_env, pass, N(pass));
	char **env = build(&cfg, fake_env);
	cr_assert_null(env_get(env, "GITHUB_TOKEN"));
	cr_assert_null(env_get(env, "DB_PASSWORD"));
	ab_env_free(env);
	ab_config_free(&cfg);
}

Test(env_build, set_env_overrides_and_adds)
{
	const enum ab_env_policy policies[] = {AB_ENV_ALL, AB_ENV_CORE, AB_ENV_NONE};
	for (size_t i = 0; i < N(policies); i++) {
		struct ab_config cfg;
		ab_config_init(&cfg);
		cfg.env_policy = policies[i];
		const char *set[] = {"LANG=fr_FR.UTF-8", "NEW_VAR=1", "EQ=a=b",
				     "EMPTY=", "DB_PASSWORD=explicit"};
		cfg.set_env = strv(&cfg.n_set_env, set, N(set));
		char **env = build(&cfg, fake_env);
		cr_assert_str_eq(env_get(env, "LANG"), "fr_FR.UTF-8", "policy %d", policies[i]);
		cr_assert_str_eq(env_get(env, "NEW_VAR"), "1");
		cr_assert_str_eq(env_get(env, "EQ"), "a=b");
		cr_assert_str_eq(env_get(env, "EMPTY"), "");
		/* an explicit value is not filtered as a secret */
		cr_assert_str_eq(env_get(env, "DB_PASSWORD"), "explicit");
		ab_env_free(env);
		ab_config_free(&cfg);
	}
}

Test(env_build, set_env_can_override_home_and_path)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.home = strdup("/home/agent2");
	const char *set[] = {"HOME=/custom", "PATH=/opt/bin"};
	cfg.set_env = strv(&cfg.n_set_env, set, N(set));
	char **env = build(&cfg, fake_env);
	cr_assert_str_eq(env_get(env, "HOME"), "/custom");
	cr_assert_str_eq(env_get(env, "PATH"), "/opt/bin");
	ab_env_free(env);
	ab_config_free(&cfg);
}

Test(env_build, set_env_repeated_name_last_wins)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	const char *set[] = {"X=1", "X=2"};
	cfg.set_env = strv(&cfg.n_set_env, set, N(set));
	char **env = build(&cfg, fake_env);
	cr_assert_str_eq(env_get(env, "X"), "2");
	ab_env_free(env);
	ab_config_free(&cfg);
}

Test(env_build, malformed_entries_are_ignored)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.env_policy = AB_ENV_ALL;
	char *const envp[] = {"NOEQUALS", "=orphan", "=", "OK=1", "ALSO_NO_EQ", NULL};
	char **env = build(&cfg, envp);
	cr_assert_eq(env_count(env), 3, "%zu entries", env_count(env));
	cr_assert_str_eq(env_get(env, "OK"), "1");
	cr_assert_null(env_get(env, "NOEQUALS"));
	cr_assert_null(env_get(env, "ALSO_NO_EQ"));
	for (char **e = env; *e; e++)
		cr_assert_neq((*e)[0], '=', "'%s' kept", *e);
	ab_env_free(env);
	ab_config_free(&cfg);
}

Test(env_build, no_duplicate_names)
{
	const enum ab_env_policy policies[] = {AB_ENV_ALL, AB_ENV_CORE, AB_ENV_NONE};
	char *const envp[] = {"EDITOR=vi", "LANG=C",  "EDITOR=emacs", "HOME=/a",
			      "HOME=/b",   "PATH=/x", "LANG=POSIX",   NULL};
	for (size_t i = 0; i < N(policies); i++) {
		struct ab_config cfg;
		ab_config_init(&cfg);
		cfg.env_policy = policies[i];
		const char *pass[] = {"EDITOR"};
		cfg.pass_env = strv(&cfg.n_pass_env, pass, N(pass));
		const char *set[] = {"EDITOR=nano", "HOME=/c"};
		cfg.set_env = strv(&cfg.n_set_env, set, N(set));
		char **env = build(&cfg, envp); /* asserts no name twice */
		cr_assert_str_eq(env_get(env, "EDITOR"), "nano");
		cr_assert_str_eq(env_get(env, "HOME"), "/c");
		cr_assert_str_eq(env_get(env, "PATH"), SANDBOX_PATH);
		if (policies[i] != AB_ENV_NONE)
			cr_assert_str_eq(env_get(env, "LANG"), "POSIX", "the later value wins");
		ab_env_free(env);
		ab_config_free(&cfg);
	}
}

Test(env_build, output_is_independent_of_input)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.env_policy = AB_ENV_ALL;
	char buf[] = "EDITOR=vim";
	char *const envp[] = {buf, NULL};
	char **env = build(&cfg, envp);
	buf[7] = 'X';
	cr_assert_str_eq(env_get(env, "EDITOR"), "vim", "the result points into envp");
	ab_env_free(env);
	ab_config_free(&cfg);
	ab_env_free(NULL); /* harmless */
}

/* ---- ab_env_name_is_secret ---- */

Test(env_secret, secret_names)
{
	const char *secret[] = {
		"OPENAI_API_KEY",
		"api_key",
		"Api_Key",
		"AWS_SECRET_ACCESS_KEY",
		"GITHUB_TOKEN",
		"github_token",
		"SSH_AUTH_SOCK",
		"DB_PASSWORD",
		"FOO_SECRET_BAR",
		"SECRET_X",
		"secret_x",
		"X_PASSWD",
		"X_CREDENTIAL",
		"X_CREDENTIALS",
		"KEY",
		"TOKEN",
		"PASSWORD",
		"SECRET",
		"MY_PRIVATE_KEY",
		"AWS_ACCESS_KEY_ID",
		"GH_TOKEN",
		"NPM_TOKEN",
		"VAULT_TOKEN",
		"KRB5CCNAME",
		"GPG_AGENT_INFO",
		"AWS_SESSION_TOKEN",
		"GOOGLE_APPLICATION_CREDENTIALS",
		"PGPASSWORD",
		"MYSQL_PWD",
		"OPENAI_API_KEYS",
		"APP_SECRETS",
		"LC_API_KEY",
	};
	for (size_t i = 0; i < N(secret); i++)
		cr_assert(ab_env_name_is_secret(secret[i]), "%s not taken for a secret", secret[i]);
}

Test(env_secret, ordinary_names)
{
	const char *plain[] = {
		"PATH",	  "HOME",      "KEYBOARD", "MONKEY",	 "TOKENIZER_PATH",  "LANG",
		"EDITOR", "SECRETARY", "TERM",	   "LC_ALL",	 "XDG_RUNTIME_DIR", "HOTKEY",
		"",	  "DISPLAY",   "KEYS_DIR", "MYSECRET_X",
	};
	for (size_t i = 0; i < N(plain); i++)
		cr_assert_not(ab_env_name_is_secret(plain[i]), "%s taken for a secret", plain[i]);
}

Test(env_build, core_family_names_that_look_secret_stay_out)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	char *envp[] = {"LC_TIME=C", "LC_API_KEY=sekrit", NULL};
	char **out = NULL;
	struct ab_error err = {0};
	cr_assert_eq(ab_env_build(&cfg, envp, &out, &err), 0);
	bool time = false, key = false;
	for (char **e = out; *e; e++) {
		time |= strcmp(*e, "LC_TIME=C") == 0;
		key |= strncmp(*e, "LC_API_KEY=", 11) == 0;
	}
	cr_assert(time);
	cr_assert_not(key, "a secret-looking LC_* name passed under core");
	ab_env_free(out);
	ab_config_free(&cfg);
}
