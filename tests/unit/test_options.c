/* Options of `agentbox run` (ab_config_parse_run), the small parsers behind
 * them (sizes, ids, view paths) and the host-side checks of
 * ab_config_finish() that need no privilege. */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "view/idmap.h"
#include "view/config.h"
#include "cli/options.h"
#include "util/parse.h"
#include "util/util.h"

/* argv for `agentbox run ...`: the first element must be "run". */
#define ARGV(...) ((const char *[]){__VA_ARGS__, NULL})

static int parse(struct ab_config *cfg, bool *help, struct ab_error *err, const char **argv)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	/* with '+' in the optstring getopt_long never permutes argv */
	return ab_config_parse_run(cfg, argc, (char **)argv, help, err);
}

/* Parsing argv succeeds; the config is left for the caller to check. */
#define PARSE_OK(cfg, ...)                                                                         \
	do {                                                                                       \
		bool help_ = true;                                                                 \
		struct ab_error err_ = {0};                                                        \
		int r_ = parse((cfg), &help_, &err_, ARGV(__VA_ARGS__));                           \
		cr_assert_eq(r_, 0, "parse failed (%d): %s", r_, err_.msg);                        \
		cr_assert_not(help_);                                                              \
	} while (0)

/* Parsing argv fails with a negative value and a message containing needle. */
static void expect_fail(const char *needle, const char **argv)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	struct ab_error err = {0};
	bool help = false;
	int r = parse(&cfg, &help, &err, argv);
	cr_assert_lt(r, 0, "expected '%s ...' to fail", argv[1] ? argv[1] : "");
	cr_assert_gt(err.code, 0);
	cr_assert_eq(r, -err.code);
	cr_assert_not_null(strstr(err.msg, needle), "message '%s' does not contain '%s'", err.msg,
			   needle);
	ab_config_free(&cfg);
}

#define PARSE_FAILS(needle, ...) expect_fail((needle), ARGV(__VA_ARGS__))

static void assert_argv(const struct ab_config *cfg, const char **want)
{
	size_t n = 0;
	while (want[n])
		n++;
	cr_assert_eq(cfg->argc, n, "argc is %zu, expected %zu", cfg->argc, n);
	cr_assert_not_null(cfg->argv);
	for (size_t i = 0; i < n; i++)
		cr_assert_str_eq(cfg->argv[i], want[i]);
	cr_assert_null(cfg->argv[n], "argv is not NULL-terminated");
}

/* ---- the command ---- */

Test(parse_run, command_after_double_dash)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--net", "host", "--", "ls", "-l", "--net", "/");
	assert_argv(&cfg, ARGV("ls", "-l", "--net", "/"));
	cr_assert_eq(cfg.net, AB_NET_HOST);
	ab_config_free(&cfg);
}

Test(parse_run, command_without_double_dash_keeps_its_options)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "ls", "-l");
	assert_argv(&cfg, ARGV("ls", "-l"));
	ab_config_free(&cfg);

	/* options after the command name are the command's, even ours */
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--hostname", "box", "make", "--net", "bad", "-c", "x", "--help");
	assert_argv(&cfg, ARGV("make", "--net", "bad", "-c", "x", "--help"));
	cr_assert_str_eq(cfg.hostname, "box");
	cr_assert_eq(cfg.net, AB_NET_NONE);
	ab_config_free(&cfg);
}

Test(parse_run, dash_dash_protects_a_command_starting_with_dash)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--", "-c", "x");
	assert_argv(&cfg, ARGV("-c", "x"));
	ab_config_free(&cfg);
}

Test(parse_run, protect_created)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cr_assert_eq(cfg.protect_created, AB_PROTECT_CREATED_QUARANTINE, "the default");
	PARSE_OK(&cfg, "run", "--protect-created", "report", "--", "true");
	cr_assert_eq(cfg.protect_created, AB_PROTECT_CREATED_REPORT);
	ab_config_free(&cfg);
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--protect-created", "report", "--protect-created", "quarantine",
		 "--", "true");
	cr_assert_eq(cfg.protect_created, AB_PROTECT_CREATED_QUARANTINE);
	ab_config_free(&cfg);
	PARSE_FAILS("--protect-created: 'off' is not one of quarantine, report", "run",
		    "--protect-created", "off", "--", "true");
}

Test(parse_run, shell_string)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "-c", "echo hi");
	assert_argv(&cfg, ARGV("/bin/sh", "-c", "--", "echo hi"));
	ab_config_free(&cfg);

	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "-c", "echo hi", "--");
	assert_argv(&cfg, ARGV("/bin/sh", "-c", "--", "echo hi"));
	ab_config_free(&cfg);

	/* a string starting with '-' is the shell's command, not its options */
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "-c", "-i; --net host");
	assert_argv(&cfg, ARGV("/bin/sh", "-c", "--", "-i; --net host"));
	ab_config_free(&cfg);
}

Test(parse_run, shell_string_with_extra_arguments_is_an_error)
{
	PARSE_FAILS("-c", "run", "-c", "echo hi", "extra");
	PARSE_FAILS("'extra'", "run", "-c", "echo hi", "--", "extra");
}

Test(parse_run, shell_string_without_value_is_an_error)
{
	PARSE_FAILS("'-c'", "run", "-c");
}

Test(parse_run, no_command_is_an_error)
{
	PARSE_FAILS("no command", "run");
	PARSE_FAILS("no command", "run", "--net", "host");
	PARSE_FAILS("no command", "run", "--net", "host", "--");
}

Test(parse_run, empty_command_name_is_an_error)
{
	PARSE_FAILS("empty", "run", "--", "");
}

Test(parse_run, unknown_option_is_named)
{
	PARSE_FAILS("--bogus", "run", "--bogus", "--", "ls");
	PARSE_FAILS("-x", "run", "-x", "ls");
}

Test(parse_run, missing_value_names_the_option)
{
	PARSE_FAILS("--workspace", "run", "--workspace");
	PARSE_FAILS("needs a value", "run", "--workspace");
	PARSE_FAILS("--hostname", "run", "--hostname");
}

Test(parse_run, help)
{
	const char *forms[][3] = {{"run", "--help", NULL}, {"run", "-h", NULL}};
	for (size_t i = 0; i < 2; i++) {
		struct ab_config cfg;
		ab_config_init(&cfg);
		struct ab_error err = {0};
		bool help = false;
		cr_assert_eq(parse(&cfg, &help, &err, forms[i]), 0, "%s: %s", forms[i][1], err.msg);
		cr_assert(help, "%s did not set help", forms[i][1]);
		ab_config_free(&cfg);
	}

	/* help is cleared by a parse that does not ask for it */
	struct ab_config cfg;
	ab_config_init(&cfg);
	struct ab_error err = {0};
	bool help = true;
	cr_assert_eq(parse(&cfg, &help, &err, ARGV("run", "true")), 0);
	cr_assert_not(help);
	ab_config_free(&cfg);
}

/* ---- values ---- */

Test(parse_run, net)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cr_assert_eq(cfg.net, AB_NET_NONE);
	PARSE_OK(&cfg, "run", "--net", "host", "true");
	cr_assert_eq(cfg.net, AB_NET_HOST);
	ab_config_free(&cfg);

	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--net", "host", "--net=none", "true");
	cr_assert_eq(cfg.net, AB_NET_NONE);
	ab_config_free(&cfg);

	PARSE_FAILS("--net", "run", "--net", "bad", "true");
	PARSE_FAILS("'bad'", "run", "--net", "bad", "true");
}

Test(parse_run, env_policy)
{
	static const struct {
		const char *arg;
		enum ab_env_policy want;
	} cases[] = {
		{"all", AB_ENV_ALL},
		{"none", AB_ENV_NONE},
		{"core", AB_ENV_CORE},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ab_config cfg;
		ab_config_init(&cfg);
		/* start from a policy other than the wanted one */
		cfg.env_policy = cases[i].want == AB_ENV_ALL ? AB_ENV_NONE : AB_ENV_ALL;
		PARSE_OK(&cfg, "run", "--env-policy", cases[i].arg, "true");
		cr_assert_eq(cfg.env_policy, cases[i].want, "--env-policy %s", cases[i].arg);
		ab_config_free(&cfg);
	}
	PARSE_FAILS("--env-policy", "run", "--env-policy", "bad", "true");
	PARSE_FAILS("'bad'", "run", "--env-policy", "bad", "true");
}

Test(parse_run, env_name_value)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--env", "FOO=bar", "--env", "_X1=a=b", "--env", "EMPTY=", "true");
	cr_assert_eq(cfg.n_set_env, 3);
	cr_assert_str_eq(cfg.set_env[0], "FOO=bar");
	cr_assert_str_eq(cfg.set_env[1], "_X1=a=b");
	cr_assert_str_eq(cfg.set_env[2], "EMPTY=");
	cr_assert_null(cfg.set_env[3]);
	ab_config_free(&cfg);

	PARSE_FAILS("--env", "run", "--env", "=x", "true");
	PARSE_FAILS("--env", "run", "--env", "1A=b", "true");
	PARSE_FAILS("--env", "run", "--env", "NOEQ", "true");
	PARSE_FAILS("--env", "run", "--env", "A-B=c", "true");
	PARSE_FAILS("'NOEQ'", "run", "--env", "NOEQ", "true");
}

Test(parse_run, pass_env)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--pass-env", "GITHUB_TOKEN", "--pass-env", "_a1", "true");
	cr_assert_eq(cfg.n_pass_env, 2);
	cr_assert_str_eq(cfg.pass_env[0], "GITHUB_TOKEN");
	cr_assert_str_eq(cfg.pass_env[1], "_a1");
	cr_assert_null(cfg.pass_env[2]);
	ab_config_free(&cfg);

	PARSE_FAILS("--pass-env", "run", "--pass-env", "1BAD", "true");
	PARSE_FAILS("--pass-env", "run", "--pass-env", "A=B", "true");
	PARSE_FAILS("--pass-env", "run", "--pass-env", "", "true");
	PARSE_FAILS("'A-B'", "run", "--pass-env", "A-B", "true");
}

Test(parse_run, ids)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cr_assert_not(cfg.uid_set || cfg.gid_set || cfg.host_uid_set || cfg.host_gid_set);
	PARSE_OK(&cfg, "run", "--uid", "0", "--gid", "4294967294", "--host-uid", "1001",
		 "--host-gid", "65534", "true");
	cr_assert(cfg.uid_set);
	cr_assert_eq(cfg.uid, 0);
	cr_assert(cfg.gid_set);
	cr_assert_eq(cfg.gid, 4294967294u);
	cr_assert(cfg.host_uid_set);
	cr_assert_eq(cfg.host_uid, 1001);
	cr_assert(cfg.host_gid_set);
	cr_assert_eq(cfg.host_gid, 65534);
	ab_config_free(&cfg);

	const char *opts[] = {"--uid", "--gid", "--host-uid", "--host-gid"};
	const char *bad[] = {"-1", "abc", "4294967295", "12x", "", " 1", "99999999999999999999"};
	for (size_t i = 0; i < 4; i++)
		for (size_t j = 0; j < sizeof(bad) / sizeof(bad[0]); j++)
			PARSE_FAILS(opts[i], "run", opts[i], bad[j], "true");
}

Test(parse_run, hostname)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--hostname", "build-1.example", "true");
	cr_assert_str_eq(cfg.hostname, "build-1.example");
	ab_config_free(&cfg);

	char longest[65];
	memset(longest, 'a', 64);
	longest[64] = '\0';
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--hostname", longest, "true");
	cr_assert_str_eq(cfg.hostname, longest);
	ab_config_free(&cfg);

	char too_long[66];
	memset(too_long, 'a', 65);
	too_long[65] = '\0';
	PARSE_FAILS("--hostname", "run", "--hostname", too_long, "true");
	PARSE_FAILS("--hostname", "run", "--hostname", "-bad", "true");
	PARSE_FAILS("--hostname", "run", "--hostname", "a b", "true");
	PARSE_FAILS("--hostname", "run", "--hostname", "", "true");
	PARSE_FAILS("--hostname", "run", "--hostname", ".x", "true");
	PARSE_FAILS("--hostname", "run", "--hostname", "a/b", "true");
}

Test(parse_run, bind_forms)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--ro-bind", "/srv/data", "--bind", "/srv/out:/out", "--ro-bind",
		 "rel/dir", "--bind", "rel:/mnt/rel", "--tmpfs", "/scratch", "true");
	cr_assert_eq(cfg.n_mounts, 5);

	cr_assert_eq(cfg.mounts[0].kind, AB_MOUNT_RO_BIND);
	cr_assert_str_eq(cfg.mounts[0].src, "/srv/data");
	cr_assert_str_eq(cfg.mounts[0].dst, "/srv/data");

	cr_assert_eq(cfg.mounts[1].kind, AB_MOUNT_BIND);
	cr_assert_str_eq(cfg.mounts[1].src, "/srv/out");
	cr_assert_str_eq(cfg.mounts[1].dst, "/out");

	/* a relative source without DST is resolved later: no DST yet */
	cr_assert_eq(cfg.mounts[2].kind, AB_MOUNT_RO_BIND);
	cr_assert_str_eq(cfg.mounts[2].src, "rel/dir");
	cr_assert_null(cfg.mounts[2].dst);

	cr_assert_eq(cfg.mounts[3].kind, AB_MOUNT_BIND);
	cr_assert_str_eq(cfg.mounts[3].src, "rel");
	cr_assert_str_eq(cfg.mounts[3].dst, "/mnt/rel");

	cr_assert_eq(cfg.mounts[4].kind, AB_MOUNT_TMPFS);
	cr_assert_null(cfg.mounts[4].src);
	cr_assert_str_eq(cfg.mounts[4].dst, "/scratch");
	ab_config_free(&cfg);

	/* the last ':' splits, so SRC may hold one */
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--bind", "/a:b:/c", "true");
	cr_assert_eq(cfg.n_mounts, 1);
	cr_assert_str_eq(cfg.mounts[0].src, "/a:b");
	cr_assert_str_eq(cfg.mounts[0].dst, "/c");
	ab_config_free(&cfg);
}

Test(parse_run, bind_destination_is_normalised)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--bind", "/src:/a//b/./c/", "--ro-bind", "/x//y/", "--tmpfs",
		 "//t/./", "true");
	cr_assert_eq(cfg.n_mounts, 3);
	cr_assert_str_eq(cfg.mounts[0].src, "/src");
	cr_assert_str_eq(cfg.mounts[0].dst, "/a/b/c");
	cr_assert_str_eq(cfg.mounts[1].dst, "/x/y");
	cr_assert_str_eq(cfg.mounts[2].dst, "/t");
	ab_config_free(&cfg);
}

Test(parse_run, bind_errors)
{
	const char *opts[] = {"--bind", "--ro-bind"};
	for (size_t i = 0; i < 2; i++) {
		const char *o = opts[i];
		PARSE_FAILS(o, "run", o, "/src:rel", "true");
		PARSE_FAILS("not an absolute path", "run", o, "/src:rel", "true");
		PARSE_FAILS(o, "run", o, "/src:", "true");
		PARSE_FAILS("empty DST", "run", o, "/src:", "true");
		PARSE_FAILS(o, "run", o, ":/x", "true");
		PARSE_FAILS("empty SRC", "run", o, ":/x", "true");
		PARSE_FAILS(o, "run", o, "", "true");
		PARSE_FAILS(o, "run", o, "/src:/a/../b", "true");
		PARSE_FAILS("'..'", "run", o, "/src:/a/../b", "true");
		PARSE_FAILS("'..'", "run", o, "/a/../b", "true");
	}
}

Test(parse_run, tmpfs_errors)
{
	PARSE_FAILS("--tmpfs", "run", "--tmpfs", "scratch", "true");
	PARSE_FAILS("not an absolute path", "run", "--tmpfs", "scratch", "true");
	PARSE_FAILS("--tmpfs", "run", "--tmpfs", "/a/..", "true");
}

Test(parse_run, cwd_and_home_are_normalised)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--cwd", "/workspace//sub/./dir/", "--home", "/home//me/", "true");
	cr_assert_str_eq(cfg.cwd, "/workspace/sub/dir");
	cr_assert_str_eq(cfg.home, "/home/me");
	ab_config_free(&cfg);

	PARSE_FAILS("--cwd", "run", "--cwd", "relative", "true");
	PARSE_FAILS("--cwd", "run", "--cwd", "/a/../b", "true");
	PARSE_FAILS("--home", "run", "--home", "home", "true");
}

Test(parse_run, workspace_value_is_kept_as_given)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--workspace", "some/dir", "--skills", "/opt/skills", "--rootfs",
		 "trees/deb", "--image", "oci:imgs/deb:v1", "true");
	cr_assert_str_eq(cfg.image, "oci:imgs/deb:v1");
	cr_assert_str_eq(cfg.workspace, "some/dir");
	cr_assert_str_eq(cfg.skills, "/opt/skills");
	cr_assert_str_eq(cfg.rootfs, "trees/deb");
	ab_config_free(&cfg);

	PARSE_FAILS("--workspace", "run", "--workspace", "", "true");
	PARSE_FAILS("--skills", "run", "--skills", "", "true");
	PARSE_FAILS("--rootfs: empty path", "run", "--rootfs", "", "true");
	PARSE_FAILS("--image: empty value", "run", "--image", "", "true");
}

Test(parse_run, defaults_after_parse)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	cr_assert_null(cfg.hostname);
	cr_assert_null(cfg.home);
	PARSE_OK(&cfg, "run", "true");
	cr_assert_str_eq(cfg.hostname, "agentbox");
	cr_assert_str_eq(cfg.home, "/home/agent");
	cr_assert_eq(cfg.net, AB_NET_NONE);
	cr_assert_eq(cfg.env_policy, AB_ENV_CORE);
	cr_assert_null(cfg.cwd, "cwd is left for ab_config_finish");
	cr_assert_null(cfg.workspace);
	ab_config_free(&cfg);
}

Test(parse_run, parsing_twice_in_one_process)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--net", "host", "--hostname", "one", "--", "first", "a");
	assert_argv(&cfg, ARGV("first", "a"));
	ab_config_free(&cfg);

	/* a failure part-way through must not leave getopt's state behind */
	PARSE_FAILS("--net", "run", "--hostname", "x", "--net", "bad", "true");
	PARSE_FAILS("-q", "run", "-q", "true");

	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--hostname", "two", "second");
	assert_argv(&cfg, ARGV("second"));
	cr_assert_str_eq(cfg.hostname, "two");
	cr_assert_eq(cfg.net, AB_NET_NONE);
	ab_config_free(&cfg);

	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "-c", "echo three");
	assert_argv(&cfg, ARGV("/bin/sh", "-c", "--", "echo three"));
	ab_config_free(&cfg);
}

Test(parse_run, free_resets_the_config)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--bind", "/a", "--env", "A=1", "--pass-env", "B", "--net", "host",
		 "true");
	ab_config_free(&cfg);
	cr_assert_null(cfg.argv);
	cr_assert_eq(cfg.argc, 0);
	cr_assert_null(cfg.mounts);
	cr_assert_eq(cfg.n_mounts, 0);
	cr_assert_eq(cfg.n_set_env, 0);
	cr_assert_eq(cfg.n_pass_env, 0);
	cr_assert_eq(cfg.net, AB_NET_NONE);
	cr_assert_null(cfg.hostname);
	/* freeing twice is harmless */
	ab_config_free(&cfg);
}

/* ---- ab_parse_size ---- */

Test(parse_size, valid)
{
	static const struct {
		const char *s;
		unsigned long long want;
	} cases[] = {
		{"0", 0},
		{"1024", 1024},
		{"64K", 64ULL << 10},
		{"64k", 64ULL << 10},
		{"64KB", 64ULL << 10},
		{"64KiB", 64ULL << 10},
		{"256M", 256ULL << 20},
		{"1G", 1ULL << 30},
		{"1GiB", 1ULL << 30},
		{"2T", 2ULL << 40},
		{"16777215T", 16777215ULL << 40},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned long long v = 12345;
		cr_assert_eq(ab_parse_size(cases[i].s, &v), 0, "'%s' rejected", cases[i].s);
		cr_assert_eq(v, cases[i].want, "'%s' gave %llu, expected %llu", cases[i].s, v,
			     cases[i].want);
	}
}

Test(parse_size, invalid)
{
	const char *bad[] = {"",   "K",	  "12Q",  "-1",	 "1.5M", "+1",
			     " 1", "1 K", "1KBB", "1iB", "0x10"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		unsigned long long v = 777;
		int r = ab_parse_size(bad[i], &v);
		cr_assert_lt(r, 0, "'%s' accepted as %llu", bad[i], v);
		cr_assert_eq(v, 777, "'%s' wrote a value on failure", bad[i]);
	}
	unsigned long long v;
	cr_assert_lt(ab_parse_size(NULL, &v), 0);
}

Test(parse_size, overflow)
{
	unsigned long long v = 777;
	cr_assert_lt(ab_parse_size("99999999999999999999", &v), 0);
	cr_assert_eq(ab_parse_size("20000000000T", &v), -ERANGE);
	cr_assert_eq(ab_parse_size("16777216T", &v), -ERANGE);
	cr_assert_eq(ab_parse_size("17179869184G", &v), -ERANGE);
	cr_assert_eq(v, 777);
}

Test(parse_run, size_options_reject_bad_sizes)
{
	PARSE_FAILS("--tmpfs-size", "run", "--tmpfs-size", "12Q", "true");
	PARSE_FAILS("--max-output", "run", "--max-output", "1.5M", "true");

	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--tmpfs-size", "1G", "--max-output", "64k", "true");
	cr_assert_eq(cfg.tmpfs_size, 1ULL << 30);
	cr_assert_eq(cfg.max_output, 64ULL << 10);
	ab_config_free(&cfg);
}

/* ---- ab_parse_id ---- */

Test(parse_id, valid)
{
	uid_t v = 7;
	cr_assert_eq(ab_parse_id("0", &v), 0);
	cr_assert_eq(v, 0);
	cr_assert_eq(ab_parse_id("1001", &v), 0);
	cr_assert_eq(v, 1001);
	cr_assert_eq(ab_parse_id("4294967294", &v), 0);
	cr_assert_eq(v, 4294967294u);
}

Test(parse_id, invalid)
{
	const char *bad[] = {"-1", "abc", "12x", "", " 1", "+1", "1.0", "99999999999999999999"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uid_t v = 7;
		cr_assert_lt(ab_parse_id(bad[i], &v), 0, "'%s' accepted as %u", bad[i],
			     (unsigned)v);
		cr_assert_eq(v, 7);
	}
	uid_t v = 7;
	/* (uid_t)-1 means "unchanged" to the kernel */
	cr_assert_eq(ab_parse_id("4294967295", &v), -ERANGE);
	cr_assert_lt(ab_parse_id("4294967296", &v), 0);
	cr_assert_lt(ab_parse_id(NULL, &v), 0);
	cr_assert_eq(v, 7);
}

/* ---- view paths ---- */

Test(path, normalize)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{"/", "/"},
		{"//", "/"},
		{"/.", "/"},
		{"/././/", "/"},
		{"/a", "/a"},
		{"/a/", "/a"},
		{"/a//b/./c/", "/a/b/c"},
		{"///a///b///", "/a/b"},
		{"/a/.b/..c/c..", "/a/.b/..c/c.."},
		{"/a/...", "/a/..."},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out = NULL;
		cr_assert_eq(ab_path_normalize(cases[i].in, &out), 0, "'%s' rejected", cases[i].in);
		cr_assert_str_eq(out, cases[i].want, "'%s' gave '%s'", cases[i].in, out);
		free(out);
	}
}

Test(path, normalize_rejects)
{
	char *out = NULL;
	cr_assert_eq(ab_path_normalize("relative", &out), -EINVAL);
	cr_assert_eq(ab_path_normalize("", &out), -EINVAL);
	cr_assert_eq(ab_path_normalize("./a", &out), -EINVAL);
	cr_assert_eq(ab_path_normalize(NULL, &out), -EINVAL);
	cr_assert_eq(ab_path_normalize("/a/../b", &out), -ELOOP);
	cr_assert_eq(ab_path_normalize("/..", &out), -ELOOP);
	cr_assert_eq(ab_path_normalize("/a/..", &out), -ELOOP);
	cr_assert_eq(ab_path_normalize("/a/../", &out), -ELOOP);
	cr_assert_null(out);

	char *huge = malloc(PATH_MAX + 2);
	cr_assert_not_null(huge);
	huge[0] = '/';
	memset(huge + 1, 'a', PATH_MAX);
	huge[PATH_MAX + 1] = '\0';
	cr_assert_eq(ab_path_normalize(huge, &out), -ENAMETOOLONG);
	cr_assert_null(out);
	free(huge);
}

Test(path, is_under)
{
	cr_assert(ab_path_is_under("/a/b", "/a"));
	cr_assert(ab_path_is_under("/a", "/a"));
	cr_assert(ab_path_is_under("/a/b/c", "/a/b"));
	cr_assert(ab_path_is_under("/anything", "/"));
	cr_assert(ab_path_is_under("/", "/"));
	cr_assert_not(ab_path_is_under("/ab", "/a"));
	cr_assert_not(ab_path_is_under("/a", "/a/b"));
	cr_assert_not(ab_path_is_under("/b/a", "/a"));
	cr_assert_not(ab_path_is_under("/workspace2", "/workspace"));
}

/* ---- ab_config_finish ---- */

static char tmpdir[64];

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void make_tmpdir(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/ab-test-options-XXXXXX");
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
}

static void remove_tmpdir(void)
{
	if (tmpdir[0])
		nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	tmpdir[0] = '\0';
}

TestSuite(finish, .init = make_tmpdir, .fini = remove_tmpdir);

/* A heap path under the temporary directory. */
static char *tmp_path(const char *name)
{
	char *p;
	cr_assert_geq(asprintf(&p, "%s/%s", tmpdir, name), 0);
	return p;
}

static char *make_dir(const char *name)
{
	char *p = tmp_path(name);
	cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s: %s", p, strerror(errno));
	return p;
}

/* As root, name the host uid (--host-uid), so the path checks are tested
 * on their own. */
static void allow_identity(struct ab_config *cfg)
{
	if (geteuid() == 0) {
		cfg->host_uid = 65534;
		cfg->host_uid_set = true;
	}
}

static void assert_realpath(const char *got, const char *path)
{
	char *want = realpath(path, NULL);
	cr_assert_not_null(want);
	cr_assert_str_eq(got, want);
	free(want);
}

Test(finish, workspace_is_resolved_and_cwd_defaults)
{
	char *ws = make_dir("ws");
	struct ab_config cfg;
	ab_config_init(&cfg);
	/* a spelling realpath() has to clean up */
	cr_assert_geq(asprintf(&cfg.workspace, "%s//ws/./../ws/", tmpdir), 0);
	allow_identity(&cfg);
	struct ab_error err = {0};
	cr_assert_eq(ab_config_finish(&cfg, &err), 0, "%s", err.msg);
	assert_realpath(cfg.workspace, ws);
	cr_assert_str_eq(cfg.cwd, "/workspace");
	ab_config_free(&cfg);
	free(ws);
}

Test(finish, explicit_cwd_is_kept)
{
	char *ws = make_dir("ws");
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.workspace = strdup(ws);
	cfg.cwd = strdup("/tmp/elsewhere");
	allow_identity(&cfg);
	struct ab_error err = {0};
	cr_assert_eq(ab_config_finish(&cfg, &err), 0, "%s", err.msg);
	cr_assert_str_eq(cfg.cwd, "/tmp/elsewhere");
	ab_config_free(&cfg);
	free(ws);
}

Test(finish, workspace_defaults_to_the_current_directory)
{
	char *ws = make_dir("here");
	cr_assert_eq(chdir(ws), 0); /* each test runs in its own process */
	struct ab_config cfg;
	ab_config_init(&cfg);
	allow_identity(&cfg);
	struct ab_error err = {0};
	cr_assert_eq(ab_config_finish(&cfg, &err), 0, "%s", err.msg);
	assert_realpath(cfg.workspace, ws);
	cr_assert_eq(chdir("/"), 0);
	ab_config_free(&cfg);
	free(ws);
}

Test(finish, workspace_symlink_is_rejected)
{
	char *ws = make_dir("ws");
	char *link = tmp_path("link");
	cr_assert_eq(symlink(ws, link), 0, "symlink: %s", strerror(errno));
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.workspace = strdup(link);
	allow_identity(&cfg);
	struct ab_error err = {0};
	int r = ab_config_finish(&cfg, &err);
	cr_assert_lt(r, 0);
	cr_assert_eq(r, -err.code);
	cr_assert_not_null(strstr(err.msg, "symbolic link"), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, "--workspace"), "%s", err.msg);
	ab_config_free(&cfg);
	free(link);
	free(ws);
}

Test(finish, workspace_regular_file_is_rejected)
{
	char *file = tmp_path("file");
	FILE *f = fopen(file, "w");
	cr_assert_not_null(f);
	fclose(f);
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.workspace = strdup(file);
	allow_identity(&cfg);
	struct ab_error err = {0};
	int r = ab_config_finish(&cfg, &err);
	cr_assert_eq(r, -ENOTDIR);
	cr_assert_not_null(strstr(err.msg, "not a directory"), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, "--workspace"), "%s", err.msg);
	ab_config_free(&cfg);
	free(file);
}

Test(finish, missing_workspace_is_rejected)
{
	char *missing = tmp_path("missing");
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.workspace = strdup(missing);
	allow_identity(&cfg);
	struct ab_error err = {0};
	int r = ab_config_finish(&cfg, &err);
	cr_assert_eq(r, -ENOENT);
	cr_assert_not_null(strstr(err.msg, "--workspace"), "%s", err.msg);
	cr_assert_not_null(strstr(err.msg, missing), "%s", err.msg);
	ab_config_free(&cfg);
	free(missing);
}

Test(finish, skills_symlink_is_refused)
{
	char *ws = make_dir("ws");
	char *sk = make_dir("skills");
	char *link = tmp_path("skills-link");
	cr_assert_eq(symlink(sk, link), 0);
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.workspace = strdup(ws);
	cfg.skills = strdup(link);
	allow_identity(&cfg);
	struct ab_error err = {0};
	/* a link planted where the skills directory was would redirect /skills */
	cr_assert_eq(ab_config_finish(&cfg, &err), -ELOOP);
	cr_assert_not_null(strstr(err.msg, "symbolic link"), "%s", err.msg);
	ab_config_free(&cfg);

	/* the directory itself is fine, and comes out canonical */
	ab_config_init(&cfg);
	cfg.workspace = strdup(ws);
	char *dotted = tmp_path("skills/.");
	cfg.skills = strdup(dotted);
	allow_identity(&cfg);
	cr_assert_eq(ab_config_finish(&cfg, &err), 0, "%s", err.msg);
	assert_realpath(cfg.skills, sk);
	ab_config_free(&cfg);
	free(dotted);

	/* but it must be a directory */
	char *file = tmp_path("skills-file");
	FILE *f = fopen(file, "w");
	cr_assert_not_null(f);
	fclose(f);
	ab_config_init(&cfg);
	cfg.workspace = strdup(ws);
	cfg.skills = strdup(file);
	allow_identity(&cfg);
	cr_assert_eq(ab_config_finish(&cfg, &err), -ENOTDIR);
	cr_assert_not_null(strstr(err.msg, "--skills"), "%s", err.msg);
	ab_config_free(&cfg);
	free(file);
	free(link);
	free(sk);
	free(ws);
}

Test(finish, identity_defaults)
{
	char *ws = make_dir("ws");
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.workspace = strdup(ws);
	struct ab_error err = {0};
	if (geteuid() == 0) {
		/* agentbox's own unprivileged user, whoever owns the workspace
		 * (its sources are idmapped to it), root included */
		cr_assert_eq(ab_config_finish(&cfg, &err), 0, "%s", err.msg);
		cr_assert_eq(cfg.host_uid, AB_SANDBOX_HOST_ID);
		cr_assert_eq(cfg.host_gid, AB_SANDBOX_HOST_ID);
		cr_assert_eq(cfg.uid, AB_SANDBOX_HOST_ID);
		cr_assert_eq(cfg.gid, AB_SANDBOX_HOST_ID);
		cr_assert(ab_config_idmaps(&cfg));
		/* unless the workspace cannot be idmapped: then its owner */
		cr_assert_eq(chown(ws, 1001, 1002), 0, "chown: %s", strerror(errno));
		cr_assert_eq(ab_config_run_as_owner(&cfg, &err), 0, "%s", err.msg);
		cr_assert_eq(cfg.host_uid, 1001);
		cr_assert_eq(cfg.host_gid, 1002);
		cr_assert_eq(cfg.uid, 1001);
		cr_assert_eq(cfg.gid, 1002);
		cr_assert_not(ab_config_idmaps(&cfg));
	} else {
		/* an unprivileged caller maps only itself */
		cr_assert_eq(ab_config_finish(&cfg, &err), 0, "%s", err.msg);
		cr_assert_eq(cfg.host_uid, geteuid());
		cr_assert_eq(cfg.host_gid, getegid());
		cr_assert_eq(cfg.uid, geteuid());
		cr_assert_eq(cfg.gid, getegid());
	}
	ab_config_free(&cfg);
	free(ws);
}

Test(finish, identity_explicit_ids_are_kept)
{
	char *ws = make_dir("ws");
	struct ab_config cfg;
	ab_config_init(&cfg);
	cfg.workspace = strdup(ws);
	cfg.uid = 0;
	cfg.uid_set = true;
	cfg.gid = 0;
	cfg.gid_set = true;
	allow_identity(&cfg);
	struct ab_error err = {0};
	cr_assert_eq(ab_config_finish(&cfg, &err), 0, "%s", err.msg);
	cr_assert_eq(cfg.uid, 0);
	cr_assert_eq(cfg.gid, 0);
	cr_assert_eq(cfg.host_uid, geteuid() == 0 ? 65534 : geteuid());
	cr_assert_neq(cfg.host_uid, 0);
	ab_config_free(&cfg);
	free(ws);
}

Test(finish, identity_refusals)
{
	char *ws = make_dir("ws");
	struct ab_config cfg;
	struct ab_error err = {0};
	int r;
	if (geteuid() == 0) {
		/* a root-owned workspace that cannot be idmapped gives no
		 * unprivileged owner to run as */
		ab_config_init(&cfg);
		cfg.workspace = strdup(ws);
		cr_assert_eq(ab_config_finish(&cfg, &err), 0, "%s", err.msg);
		cr_assert_neq(cfg.host_uid, 0);
		r = ab_config_run_as_owner(&cfg, &err);
		cr_assert_eq(r, -EPERM);
		cr_assert_not_null(strstr(err.msg, "owned by root"), "%s", err.msg);
		ab_config_free(&cfg);

		/* and host root is never mapped, even when asked for */
		ab_config_init(&cfg);
		cfg.workspace = strdup(ws);
		cfg.host_uid = 0;
		cfg.host_uid_set = true;
		r = ab_config_finish(&cfg, &err);
		cr_assert_eq(r, -EPERM);
		cr_assert_not_null(strstr(err.msg, "--host-uid 0"), "%s", err.msg);
		ab_config_free(&cfg);

		ab_config_init(&cfg);
		cfg.workspace = strdup(ws);
		cfg.host_uid = 65534;
		cfg.host_uid_set = true;
		cfg.host_gid = 0;
		cfg.host_gid_set = true;
		r = ab_config_finish(&cfg, &err);
		cr_assert_eq(r, -EPERM);
		cr_assert_not_null(strstr(err.msg, "--host-gid 0"), "%s", err.msg);
		ab_config_free(&cfg);
	} else {
		ab_config_init(&cfg);
		cfg.workspace = strdup(ws);
		cfg.host_uid = geteuid() + 1;
		cfg.host_uid_set = true;
		r = ab_config_finish(&cfg, &err);
		cr_assert_eq(r, -EPERM);
		cr_assert_not_null(strstr(err.msg, "needs root"), "%s", err.msg);
		cr_assert_not_null(strstr(err.msg, "--host-uid"), "%s", err.msg);
		ab_config_free(&cfg);

		ab_config_init(&cfg);
		cfg.workspace = strdup(ws);
		cfg.host_gid = getegid() + 1;
		cfg.host_gid_set = true;
		r = ab_config_finish(&cfg, &err);
		cr_assert_eq(r, -EPERM);
		cr_assert_not_null(strstr(err.msg, "needs root"), "%s", err.msg);
		cr_assert_not_null(strstr(err.msg, "--host-gid"), "%s", err.msg);
		ab_config_free(&cfg);

		/* naming oneself is fine */
		ab_config_init(&cfg);
		cfg.workspace = strdup(ws);
		cfg.host_uid = geteuid();
		cfg.host_uid_set = true;
		cr_assert_eq(ab_config_finish(&cfg, &err), 0, "%s", err.msg);
		ab_config_free(&cfg);
	}
	free(ws);
}

Test(finish, trailing_slash_does_not_get_a_symlink_past_the_check)
{
	char *target = make_dir("real");
	char *link = tmp_path("link");
	cr_assert_eq(symlink(target, link), 0);
	struct ab_config cfg;
	ab_config_init(&cfg);
	cr_assert_geq(asprintf(&cfg.workspace, "%s/", link), 0);
	allow_identity(&cfg);
	struct ab_error err = {0};
	cr_assert_lt(ab_config_finish(&cfg, &err), 0);
	cr_assert(strstr(err.msg, "symbolic link"), "%s", err.msg);
	ab_config_free(&cfg);
	free(target);
	free(link);
}

Test(options, a_value_for_a_flag_is_refused_by_name)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	bool help;
	struct ab_error err = {0};
	const char *argv[] = {"run", "--capture=yes", "--", "true", NULL};
	cr_assert_lt(parse(&cfg, &help, &err, argv), 0);
	cr_assert(strstr(err.msg, "'--capture=yes' takes no value"), "%s", err.msg);
	ab_config_free(&cfg);
}

Test(sizes, a_plain_byte_suffix)
{
	unsigned long long v;
	cr_assert_eq(ab_parse_size("100B", &v), 0);
	cr_assert_eq(v, 100);
	cr_assert_lt(ab_parse_size("100BB", &v), 0);
}

/* The account's home (ab_account_home, read from /etc/passwd where
 * nsswitch.conf has glibc read it first) is getpwuid's, for every account
 * this host has and for a uid it has none of. */
Test(config, the_account_home_is_getpwuids)
{
	setpwent();
	struct passwd *pw;
	unsigned n = 0;
	uid_t uids[256];
	while (n < 256 && (pw = getpwent()))
		uids[n++] = pw->pw_uid;
	endpwent();
	cr_assert_gt(n, 0);
	uids[n < 256 ? n++ : 255] = 987654321; /* no such account */
	for (unsigned i = 0; i < n; i++) {
		char home[PATH_MAX];
		bool found = ab_account_home(uids[i], home, sizeof(home));
		pw = getpwuid(uids[i]);
		cr_assert_eq(found, pw != NULL, "uid %u", (unsigned)uids[i]);
		if (found)
			cr_assert_str_eq(home, pw->pw_dir, "uid %u", (unsigned)uids[i]);
	}
}
