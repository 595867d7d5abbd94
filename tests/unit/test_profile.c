/* Sandbox profiles (--profile, src/cli/profile.c): every value type, every
 * error naming the file and the key, the command line overriding a
 * profile and adding to its lists, relative paths, and the profiles
 * shipped in policy/sandbox/. */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/options.h"
#include "cli/profile.h"

#define ARGV(...) ((const char *[]){__VA_ARGS__, NULL})

static char tmpdir[] = "/tmp/agentbox-profile-XXXXXX";

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path);
}

static void setup(void)
{
	cr_assert_not_null(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
}

static void teardown(void)
{
	nftw(tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(profile, .init = setup, .fini = teardown);

/* Write text to tmpdir/name and return the path (static storage). */
static const char *write_file(const char *name, const char *text)
{
	static char path[4200];
	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "fopen %s: %s", path, strerror(errno));
	fputs(text, f);
	fclose(f);
	return path;
}

/* Load text as the profile named source; the load must succeed. */
static void load_ok(struct ab_config *cfg, const char *source, const char *text)
{
	struct ab_error err = {0};
	int r = ab_profile_load_buffer(cfg, text, strlen(text), source, &err);
	cr_assert_eq(r, 0, "loading %s failed: %s", text, err.msg);
}

/* Loading text as /etc/agentbox/p.json fails with exactly want. */
static void load_fails(const char *text, const char *want)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	struct ab_error err = {0};
	int r = ab_profile_load_buffer(&cfg, text, strlen(text), "/etc/agentbox/p.json", &err);
	cr_assert_lt(r, 0, "expected %s to fail", text);
	cr_assert_eq(r, -err.code);
	size_t n = strlen(want);
	/* "...": json-c's own words follow, which vary between its versions */
	if (n > 3 && strcmp(want + n - 3, "...") == 0)
		cr_assert_eq(strncmp(err.msg, want, n - 3), 0, "for %s: %s", text, err.msg);
	else
		cr_assert_str_eq(err.msg, want, "for %s", text);
	ab_config_free(&cfg);
}

static int parse_run(struct ab_config *cfg, const char **argv, bool *help, struct ab_error *err)
{
	int argc = 0;
	while (argv[argc])
		argc++;
	return ab_config_parse_run(cfg, argc, (char **)argv, help, err);
}

#define PARSE_OK(cfg, ...)                                                                         \
	do {                                                                                       \
		bool help_ = true;                                                                 \
		struct ab_error err_ = {0};                                                        \
		int r_ = parse_run((cfg), ARGV(__VA_ARGS__), &help_, &err_);                       \
		cr_assert_eq(r_, 0, "parse failed: %s", err_.msg);                                 \
		cr_assert_not(help_);                                                              \
	} while (0)

static void parse_fails(const char **argv, const char *needle)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	bool help = false;
	struct ab_error err = {0};
	int r = parse_run(&cfg, argv, &help, &err);
	cr_assert_lt(r, 0);
	cr_assert_not_null(strstr(err.msg, needle), "'%s' lacks '%s'", err.msg, needle);
	ab_config_free(&cfg);
}

static unsigned long long rlimit_of(const struct ab_config *cfg, int resource)
{
	for (size_t i = 0; i < cfg->n_rlimits; i++)
		if (cfg->rlimits[i].resource == resource)
			return cfg->rlimits[i].value;
	cr_assert_fail("no rlimit %d", resource);
	return 0;
}

/* ---- value types ---- */

Test(profile, strings_numbers_and_flags_set_their_options)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	load_ok(&cfg, "p.json",
		"{\"comment\": \"ignored\", \"net\": \"host\", \"memory\": \"64M\", "
		"\"pids\": 64, \"cpus\": 0.5, \"timeout\": \"5s\", \"max-output\": 4096, "
		"\"limits\": \"best\", \"quiet\": true, \"hostname\": \"box\", \"landlock\": "
		"\"off\"}");
	cr_assert_eq(cfg.net, AB_NET_HOST);
	cr_assert_eq(cfg.memory, 64ULL << 20);
	cr_assert_eq(cfg.pids, 64);
	cr_assert_eq(cfg.cpu_millis, 500);
	cr_assert_eq(cfg.timeout_ms, 5000);
	cr_assert_eq(cfg.max_output, 4096);
	cr_assert(cfg.limits_best);
	cr_assert(cfg.pids_set);
	cr_assert(cfg.quiet);
	cr_assert_str_eq(cfg.hostname, "box");
	cr_assert(cfg.no_landlock);
	ab_config_free(&cfg);
}

Test(profile, false_leaves_a_flag_off)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	load_ok(&cfg, "p.json", "{\"quiet\": false}");
	cr_assert_not(cfg.quiet);
	ab_config_free(&cfg);
}

Test(profile, arrays_add_to_repeatable_options_in_order)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	load_ok(&cfg, "p.json",
		"{\"ro-bind\": [\"/usr/share:/share\", \"/opt\"], \"tmpfs\": [\"/cache\"], "
		"\"env\": [\"A=1\", \"B=2\"], \"pass-env\": [\"GH_TOKEN\"], "
		"\"rlimit\": [\"nofile=100\", \"fsize=1M\"], \"protect\": [\"Makefile\"], "
		"\"unprotect\": [\".envrc\"], \"bind\": []}");
	cr_assert_eq(cfg.n_mounts, 3);
	cr_assert_eq(cfg.mounts[0].kind, AB_MOUNT_RO_BIND);
	cr_assert_str_eq(cfg.mounts[0].src, "/usr/share");
	cr_assert_str_eq(cfg.mounts[0].dst, "/share");
	cr_assert_str_eq(cfg.mounts[1].src, "/opt");
	cr_assert_eq(cfg.mounts[2].kind, AB_MOUNT_TMPFS);
	cr_assert_str_eq(cfg.mounts[2].dst, "/cache");
	cr_assert_eq(cfg.n_set_env, 2);
	cr_assert_str_eq(cfg.set_env[0], "A=1");
	cr_assert_str_eq(cfg.set_env[1], "B=2");
	cr_assert_eq(cfg.n_pass_env, 1);
	cr_assert_str_eq(cfg.pass_env[0], "GH_TOKEN");
	cr_assert_eq(rlimit_of(&cfg, RLIMIT_NOFILE), 100);
	cr_assert_eq(rlimit_of(&cfg, RLIMIT_FSIZE), 1 << 20);
	cr_assert_eq(cfg.n_protect, 1);
	cr_assert_str_eq(cfg.protect[0], "Makefile");
	cr_assert_eq(cfg.n_unprotect, 1);
	ab_config_free(&cfg);
}

Test(profile, an_empty_object_changes_nothing)
{
	struct ab_config cfg, def;
	ab_config_init(&cfg);
	ab_config_init(&def);
	load_ok(&cfg, "p.json", " {\n} \n");
	cr_assert_eq(cfg.memory, def.memory);
	cr_assert_eq(cfg.timeout_ms, def.timeout_ms);
	cr_assert_eq(cfg.n_mounts, 0);
	ab_config_free(&cfg);
}

Test(profile, serve_only_keys_are_checked_and_kept_for_serve)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	load_ok(&cfg, "p.json", "{\"max-concurrent\": 3, \"audit-log\": \"/var/log/a.jsonl\"}");
	cr_assert_eq(cfg.max_concurrent, 3);
	cr_assert_str_eq(cfg.audit_log, "/var/log/a.jsonl");
	ab_config_free(&cfg);
	load_fails("{\"max-concurrent\": 0}",
		   "profile /etc/agentbox/p.json: \"max-concurrent\": '0' is not a number from 1 "
		   "to 256");
}

/* ---- errors: one line naming the file and the key ---- */

Test(profile, a_bad_value_fails_with_the_command_line_message)
{
	load_fails("{\"memory\": \"12Q\"}",
		   "profile /etc/agentbox/p.json: \"memory\": '12Q' is not a size (like 64K, "
		   "256M, 1G)");
	load_fails("{\"timeout\": \"soon\"}",
		   "profile /etc/agentbox/p.json: \"timeout\": 'soon' is not a duration (like "
		   "500ms, 30s, 2m, 1h, or none)");
	load_fails("{\"cpus\": -1}", "profile /etc/agentbox/p.json: \"cpus\": '-1' is not a "
				     "number of cores from 0.01 to 4096 (like 0.5 or 2), or none");
	load_fails("{\"net\": \"bridge\"}",
		   "profile /etc/agentbox/p.json: \"net\": 'bridge' is not one of none, host, "
		   "allow=PATTERN[,...], deny=PATTERN[,...], max-conns=N, rate=SIZE, "
		   "secret=NAME@PATTERN[,...], ca=FILE");
	load_fails("{\"hostname\": \"a b\"}",
		   "profile /etc/agentbox/p.json: \"hostname\": 'a b' is not a valid host name "
		   "(letters, digits, '-' and '.', at most 64)");
	load_fails("{\"workspace\": \"\"}",
		   "profile /etc/agentbox/p.json: \"workspace\": empty path");
	load_fails("{\"home\": \"rel\"}",
		   "profile /etc/agentbox/p.json: \"home\": 'rel' is not an absolute path");
}

Test(profile, a_bad_list_item_is_named_by_its_index)
{
	load_fails("{\"env\": [\"A=1\", \"1X=2\"]}",
		   "profile /etc/agentbox/p.json: \"env\"[1]: '1X=2' is not NAME=VALUE with a "
		   "valid NAME");
	load_fails("{\"rlimit\": [\"bogus=1\"]}",
		   "profile /etc/agentbox/p.json: \"rlimit\"[0]: unknown limit 'bogus' (as core "
		   "cpu data fsize locks memlock msgqueue nice nofile nproc rss rtprio rttime "
		   "sigpending stack)");
	load_fails("{\"tmpfs\": [\"/a/../b\"]}",
		   "profile /etc/agentbox/p.json: \"tmpfs\"[0]: '/a/../b' contains '..'");
	load_fails("{\"ro-bind\": [\"/usr\", 3]}",
		   "profile /etc/agentbox/p.json: \"ro-bind\"[1]: expected a string, got a number");
}

Test(profile, wrong_json_types_are_refused)
{
	load_fails("{\"memory\": true}", "profile /etc/agentbox/p.json: \"memory\": expected a "
					 "string or a number, got a boolean");
	load_fails("{\"memory\": null}", "profile /etc/agentbox/p.json: \"memory\": expected a "
					 "string or a number, got null");
	/* "net" takes an array too (each item one --net), of strings only */
	load_fails("{\"net\": [\"allow=x.org\", 3]}",
		   "profile /etc/agentbox/p.json: \"net\"[1]: expected a string, got a number");
	load_fails("{\"net\": {}}", "profile /etc/agentbox/p.json: \"net\": expected a "
				    "string or a number, got an object");
	load_fails("{\"ro-bind\": \"/usr\"}",
		   "profile /etc/agentbox/p.json: \"ro-bind\": expected an array of strings (it "
		   "may be given more than once), got a string");
	load_fails("{\"env\": {\"A\": \"1\"}}",
		   "profile /etc/agentbox/p.json: \"env\": expected an array of strings (it may "
		   "be given more than once), got an object");
	load_fails("{\"require-limits\": 1}", "profile /etc/agentbox/p.json: \"require-limits\": "
					      "expected true or false, got a number");
	load_fails("{\"comment\": 1}",
		   "profile /etc/agentbox/p.json: \"comment\": expected a string, got a number");
}

Test(profile, unknown_and_command_line_only_keys_are_refused)
{
	load_fails("{\"memry\": \"1G\"}",
		   "profile /etc/agentbox/p.json: unknown key \"memry\" (keys are the long "
		   "options of agentbox run and serve, without the dashes)");
	/* getopt would take "--mem" for --memory; a profile names keys in full */
	load_fails("{\"mem\": \"1G\"}", "profile /etc/agentbox/p.json: unknown key \"mem\" (keys "
					"are the long options of agentbox run and serve, without "
					"the dashes)");
	load_fails("{\"--memory\": \"1G\"}",
		   "profile /etc/agentbox/p.json: unknown key \"--memory\" (keys are the long "
		   "options of agentbox run and serve, without the dashes)");
	load_fails("{\"c\": \"ls\"}", "profile /etc/agentbox/p.json: unknown key \"c\" (keys are "
				      "the long options of agentbox run and serve, without the "
				      "dashes)");
	load_fails("{\"profile\": \"agent\"}",
		   "profile /etc/agentbox/p.json: \"profile\" cannot be set in a profile: "
		   "profiles do not include each other");
	load_fails("{\"help\": true}", "profile /etc/agentbox/p.json: \"help\" is not a setting");
	const char *caller[] = {"report", "capture", "merge-output", "output-encoding"};
	for (size_t i = 0; i < sizeof(caller) / sizeof(caller[0]); i++) {
		char text[100], want[300];
		snprintf(text, sizeof(text), "{\"%s\": true}", caller[i]);
		snprintf(want, sizeof(want),
			 "profile /etc/agentbox/p.json: \"%s\" belongs on the command line: it "
			 "says how this call's result is read, not what the sandbox is",
			 caller[i]);
		load_fails(text, want);
	}
}

Test(profile, not_an_object_or_not_json_is_refused)
{
	load_fails("[\"--memory\", \"1G\"]",
		   "profile /etc/agentbox/p.json: expected a JSON object of options, got an array");
	load_fails("\"net\"",
		   "profile /etc/agentbox/p.json: expected a JSON object of options, got a string");
	load_fails("", "profile /etc/agentbox/p.json: invalid JSON at line 1, column 1: "
		       "unexpected end");
	load_fails("{\n  \"net\": \"none\",\n}",
		   "profile /etc/agentbox/p.json: invalid JSON at line 3, column 1: ...");
	load_fails("{\"net\": \"none\"} {}",
		   "profile /etc/agentbox/p.json: invalid JSON at line 1, column 17: ...");
	load_fails("{\"net\": \"none\" /* why */}",
		   "profile /etc/agentbox/p.json: invalid JSON at line 1, column 16: ...");
	/* a NUL inside the buffer ends nothing early */
	struct ab_config cfg;
	ab_config_init(&cfg);
	struct ab_error err = {0};
	cr_assert_lt(ab_profile_load_buffer(&cfg, "{}\0{}", 5, "p.json", &err), 0);
	ab_config_free(&cfg);
}

Test(profile, a_key_given_twice_is_refused_however_it_is_spelt)
{
	load_fails("{\"net\": \"none\", \"memory\": \"1G\", \"net\": \"host\"}",
		   "profile /etc/agentbox/p.json: \"net\" is given twice");
	load_fails("{\"net\": \"none\", \"n\\u0065t\": \"host\"}",
		   "profile /etc/agentbox/p.json: \"net\" is given twice");
	/* keys of nested objects and strings that look like keys are not keys */
	struct ab_config cfg;
	ab_config_init(&cfg);
	load_ok(&cfg, "p.json",
		"{\"comment\": \"\\\"net\\\": {, \\\"net\\\"\", \"env\": [\"net=1\", \"X={\"], "
		"\"net\": \"host\"}");
	cr_assert_eq(cfg.net, AB_NET_HOST);
	ab_config_free(&cfg);
}

Test(profile, files_over_one_mebibyte_are_refused)
{
	size_t n = AB_PROFILE_MAX_BYTES + 1;
	char *big = malloc(n + 1);
	cr_assert_not_null(big);
	memset(big, ' ', n);
	big[0] = '{';
	big[n - 1] = '}';
	big[n] = '\0';
	const char *path = write_file("big.json", big);
	struct ab_config cfg;
	ab_config_init(&cfg);
	struct ab_error err = {0};
	cr_assert_eq(ab_profile_load_file(&cfg, path, &err), -EFBIG);
	char want[4300];
	snprintf(want, sizeof(want), "profile %s: larger than 1 MiB", path);
	cr_assert_str_eq(err.msg, want);
	cr_assert_eq(ab_profile_load_buffer(&cfg, big, n, "b.json", &err), -EFBIG);
	cr_assert_str_eq(err.msg, "profile b.json: larger than 1 MiB");
	/* one byte less is fine */
	big[n - 2] = '}';
	cr_assert_eq(ab_profile_load_buffer(&cfg, big, n - 1, "b.json", &err), 0, "%s", err.msg);
	free(big);
	ab_config_free(&cfg);
}

Test(profile, files_that_cannot_be_read_are_named)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	struct ab_error err = {0};
	char path[4200];
	snprintf(path, sizeof(path), "%s/missing.json", tmpdir);
	cr_assert_eq(ab_profile_load(&cfg, path, &err), -ENOENT);
	char want[4400];
	snprintf(want, sizeof(want), "profile %s: No such file or directory", path);
	cr_assert_str_eq(err.msg, want);
	cr_assert_eq(ab_profile_load(&cfg, tmpdir, &err), -EISDIR);
	cr_assert_eq(ab_profile_load(&cfg, "", &err), -EINVAL);
	cr_assert_str_eq(err.msg, "--profile: empty value (a NAME or a FILE)");
	ab_config_free(&cfg);
}

Test(profile, a_pipe_is_read_to_its_end)
{
	int p[2];
	cr_assert_eq(pipe(p), 0);
	const char *text = "{\"pids\": 77}";
	cr_assert_eq(write(p[1], text, strlen(text)), (ssize_t)strlen(text));
	close(p[1]);
	char path[64];
	snprintf(path, sizeof(path), "/dev/fd/%d", p[0]);
	struct ab_config cfg;
	ab_config_init(&cfg);
	struct ab_error err = {0};
	cr_assert_eq(ab_profile_load(&cfg, path, &err), 0, "%s", err.msg);
	cr_assert_eq(cfg.pids, 77);
	close(p[0]);
	ab_config_free(&cfg);
}

/* ---- the command line overrides the profile ---- */

Test(profile, the_command_line_overrides_wherever_profile_stands)
{
	const char *path = write_file("p.json", "{\"memory\": \"1G\", \"net\": \"host\", "
						"\"timeout\": \"5s\", \"pids\": 10}");
	struct ab_config a, b;
	ab_config_init(&a);
	ab_config_init(&b);
	PARSE_OK(&a, "run", "--profile", path, "--memory", "2G", "--net", "none", "--", "true");
	PARSE_OK(&b, "run", "--memory", "2G", "--net", "none", "--profile", path, "--", "true");
	struct ab_config *both[] = {&a, &b};
	for (size_t i = 0; i < 2; i++) {
		cr_assert_eq(both[i]->memory, 2ULL << 30, "profile #%zu", i);
		cr_assert_eq(both[i]->net, AB_NET_NONE);
		/* what the command line does not say comes from the profile */
		cr_assert_eq(both[i]->timeout_ms, 5000);
		cr_assert_eq(both[i]->pids, 10);
		ab_config_free(both[i]);
	}
}

Test(profile, the_command_line_adds_to_the_profiles_lists)
{
	const char *path =
		write_file("p.json", "{\"ro-bind\": [\"/usr/share:/share\"], \"env\": [\"A=1\"], "
				     "\"rlimit\": [\"nofile=100\", \"fsize=1M\"], "
				     "\"unprotect\": [\".envrc\"]}");
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--ro-bind", "/opt", "--env", "B=2", "--rlimit", "nofile=200",
		 "--profile", path, "--", "true");
	cr_assert_eq(cfg.n_mounts, 2);
	cr_assert_str_eq(cfg.mounts[0].dst, "/share", "the profile's mounts come first");
	cr_assert_str_eq(cfg.mounts[1].dst, "/opt");
	cr_assert_eq(cfg.n_set_env, 2);
	cr_assert_str_eq(cfg.set_env[0], "A=1");
	cr_assert_str_eq(cfg.set_env[1], "B=2");
	/* one value per rlimit: the command line's wins, the profile's other stays */
	cr_assert_eq(rlimit_of(&cfg, RLIMIT_NOFILE), 200);
	cr_assert_eq(rlimit_of(&cfg, RLIMIT_FSIZE), 1 << 20);
	for (size_t i = 0; i < cfg.n_protect; i++)
		cr_assert_str_neq(cfg.protect[i], ".envrc", "the profile's unprotect was lost");
	ab_config_free(&cfg);
}

Test(profile, serve_takes_a_profile_too)
{
	const char *path = write_file("p.json", "{\"max-concurrent\": 2, \"memory\": \"1G\"}");
	struct ab_config cfg;
	ab_config_init(&cfg);
	bool help = true;
	struct ab_error err = {0};
	const char **argv = ARGV("serve", "--profile", path, "--memory", "3G");
	cr_assert_eq(ab_config_parse_serve(&cfg, 5, (char **)argv, &help, &err), 0, "%s", err.msg);
	cr_assert_eq(cfg.max_concurrent, 2);
	cr_assert_eq(cfg.memory, 3ULL << 30);
	ab_config_free(&cfg);
}

Test(profile, command_line_errors_and_profile_errors)
{
	const char *path = write_file("bad.json", "{\"pids\": \"many\"}");
	char want[4400];
	snprintf(want, sizeof(want), "profile %s: \"pids\": 'many' is not a number", path);
	parse_fails(ARGV("run", "--profile", path, "--", "true"), want);
	parse_fails(ARGV("run", "--profile", "a.json", "--profile", "b.json", "--", "true"),
		    "--profile: given twice ('a.json', 'b.json'); one profile at a time");
	parse_fails(ARGV("run", "--profile"), "option '--profile' needs a value");
	/* after the command, --profile is the command's own argument */
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--", "echo", "--profile", path);
	cr_assert_eq(cfg.pids, 512);
	ab_config_free(&cfg);
	/* --help needs no profile, even a broken one */
	ab_config_init(&cfg);
	bool help = false;
	struct ab_error err = {0};
	cr_assert_eq(parse_run(&cfg, ARGV("run", "--profile", path, "--help"), &help, &err), 0,
		     "%s", err.msg);
	cr_assert(help);
	ab_config_free(&cfg);
}

/* ---- relative paths ---- */

Test(profile, relative_host_paths_are_relative_to_the_profiles_directory)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	load_ok(&cfg, "/etc/agentbox/p.json",
		"{\"workspace\": \"ws\", \"skills\": \"../skills\", "
		"\"ro-bind\": [\"data:/data\", \"/abs:/abs2\", \"lib\"], \"bind\": [\"out:/out\"], "
		"\"seccomp\": \"mine.json\", \"audit-log\": \"audit.jsonl\", "
		"\"tmpfs\": [\"/cache\"], \"cwd\": \"/workspace/src\"}");
	cr_assert_str_eq(cfg.workspace, "/etc/agentbox/ws");
	cr_assert_str_eq(cfg.skills, "/etc/agentbox/../skills");
	cr_assert_str_eq(cfg.mounts[0].src, "/etc/agentbox/data");
	cr_assert_str_eq(cfg.mounts[0].dst, "/data");
	cr_assert_str_eq(cfg.mounts[1].src, "/abs");
	cr_assert_str_eq(cfg.mounts[1].dst, "/abs2");
	cr_assert_str_eq(cfg.mounts[2].src, "/etc/agentbox/lib");
	cr_assert_str_eq(cfg.mounts[3].src, "/etc/agentbox/out");
	cr_assert_eq(cfg.mounts[3].kind, AB_MOUNT_BIND);
	cr_assert_str_eq(cfg.seccomp, "/etc/agentbox/mine.json");
	cr_assert_str_eq(cfg.audit_log, "/etc/agentbox/audit.jsonl");
	cr_assert_str_eq(cfg.mounts[4].dst, "/cache");
	cr_assert_str_eq(cfg.cwd, "/workspace/src");
	ab_config_free(&cfg);

	/* SRC is split at the last ':', as on the command line: a source
	 * that starts with ':' is relative all the same */
	ab_config_init(&cfg);
	load_ok(&cfg, "/etc/agentbox/p.json", "{\"ro-bind\": [\":odd:/data\"]}");
	cr_assert_str_eq(cfg.mounts[0].src, "/etc/agentbox/:odd");
	cr_assert_str_eq(cfg.mounts[0].dst, "/data");
	ab_config_free(&cfg);

	/* seccomp's own names are names, not files */
	ab_config_init(&cfg);
	load_ok(&cfg, "/etc/agentbox/p.json", "{\"seccomp\": \"strict\"}");
	cr_assert_str_eq(cfg.seccomp, "strict");
	ab_config_free(&cfg);

	/* a profile in "/" */
	ab_config_init(&cfg);
	load_ok(&cfg, "/p.json", "{\"workspace\": \"ws\"}");
	cr_assert_str_eq(cfg.workspace, "//ws");
	ab_config_free(&cfg);
}

Test(profile, a_profile_named_without_a_directory_leaves_paths_to_the_current_one)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	load_ok(&cfg, "p.json", "{\"workspace\": \"ws\", \"ro-bind\": [\"data:/data\"]}");
	cr_assert_str_eq(cfg.workspace, "ws");
	cr_assert_str_eq(cfg.mounts[0].src, "data");
	ab_config_free(&cfg);
}

Test(profile, relative_paths_through_the_command_line)
{
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/conf", tmpdir);
	cr_assert_eq(mkdir(dir, 0700), 0);
	const char *path = write_file("conf/p.json", "{\"workspace\": \"ws\"}");
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--profile", path, "--", "true");
	char want[4300];
	snprintf(want, sizeof(want), "%s/ws", dir);
	cr_assert_str_eq(cfg.workspace, want);
	ab_config_free(&cfg);
	/* a --workspace of the command line is the caller's, relative to the cwd */
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--profile", path, "--workspace", "here", "--", "true");
	cr_assert_str_eq(cfg.workspace, "here");
	ab_config_free(&cfg);
}

Test(profile, a_tilde_is_not_taken_for_home)
{
	load_fails("{\"ro-bind\": [\"~/.cargo:/c\"]}",
		   "profile /etc/agentbox/p.json: \"ro-bind\"[0]: '~/.cargo:/c': '~' is not "
		   "expanded in a profile; write the path");
}

/* ---- names and the shipped profiles ---- */

Test(profile, a_name_is_looked_up_in_the_policy_directory)
{
	char dir[4200];
	snprintf(dir, sizeof(dir), "%s/sandbox", tmpdir);
	cr_assert_eq(mkdir(dir, 0700), 0);
	write_file("sandbox/mine.json", "{\"pids\": 42}");
	write_file("sandbox/other.json", "{}");
	setenv("AGENTBOX_POLICY_DIR", tmpdir, 1);
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--profile", "mine", "--", "true");
	cr_assert_eq(cfg.pids, 42);
	ab_config_free(&cfg);
	char want[4400];
	snprintf(want, sizeof(want),
		 "--profile: no profile named 'nope' in %s (there: mine, other); for a file in "
		 "the current directory, write ./nope",
		 dir);
	parse_fails(ARGV("run", "--profile", "nope", "--", "true"), want);
	/* with ".json" it is a file of the current directory, not a name */
	parse_fails(ARGV("run", "--profile", "mine.json", "--", "true"),
		    "profile mine.json: No such file or directory");
	unsetenv("AGENTBOX_POLICY_DIR");
}

Test(profile, agent_is_the_defaults_written_out)
{
	struct ab_config def, agent;
	ab_config_init(&def);
	ab_config_init(&agent);
	PARSE_OK(&def, "run", "--", "true");
	PARSE_OK(&agent, "run", "--profile", "agent", "--", "true");
	cr_assert_eq(agent.net, def.net);
	cr_assert_eq(agent.env_policy, def.env_policy);
	cr_assert_str_eq(agent.seccomp, def.seccomp);
	cr_assert_eq(agent.no_landlock, def.no_landlock);
	cr_assert_str_eq(agent.hostname, def.hostname);
	cr_assert_str_eq(agent.home, def.home);
	cr_assert_eq(agent.memory, def.memory);
	cr_assert_eq(agent.cpu_millis, def.cpu_millis);
	cr_assert_eq(agent.pids, def.pids);
	cr_assert_eq(agent.timeout_ms, def.timeout_ms);
	cr_assert_eq(agent.kill_after_ms, def.kill_after_ms);
	cr_assert_eq(agent.max_timeout_ms, def.max_timeout_ms);
	cr_assert_eq(agent.tmpfs_size, def.tmpfs_size);
	cr_assert_eq(agent.max_output, def.max_output);
	cr_assert_eq(agent.max_concurrent, def.max_concurrent);
	cr_assert_eq(agent.n_rlimits, def.n_rlimits);
	for (size_t i = 0; i < def.n_rlimits; i++)
		cr_assert_eq(memcmp(&agent.rlimits[i], &def.rlimits[i], sizeof(def.rlimits[i])), 0);
	cr_assert_eq(agent.n_protect, def.n_protect);
	cr_assert_eq(agent.n_mounts, 0);
	cr_assert_eq(agent.n_set_env, 0);
	ab_config_free(&def);
	ab_config_free(&agent);
}

/* -t is a person at a terminal: no deadline unless one is given; a run's
 * own --timeout is not clamped; a session's requests still are. */
Test(profile, run_deadlines)
{
	struct ab_config c;
	ab_config_init(&c);
	PARSE_OK(&c, "run", "--", "true");
	cr_assert_eq(c.timeout_ms, 120000);
	cr_assert_eq(c.max_timeout_ms, 600000);
	ab_config_free(&c);
	ab_config_init(&c);
	PARSE_OK(&c, "run", "-t", "--", "true");
	cr_assert_eq(c.timeout_ms, 0, "run -t has no deadline");
	cr_assert_eq(c.max_timeout_ms, 0, "nor a clamp to make one");
	ab_config_free(&c);
	ab_config_init(&c);
	PARSE_OK(&c, "run", "--profile", "agent", "-t", "--", "true");
	cr_assert_eq(c.timeout_ms, 0, "the agent profile sets no deadline for -t");
	ab_config_free(&c);
	ab_config_init(&c);
	PARSE_OK(&c, "run", "-t", "--timeout", "5m", "--", "true");
	cr_assert_eq(c.timeout_ms, 300000);
	ab_config_free(&c);
	ab_config_init(&c);
	PARSE_OK(&c, "run", "--timeout", "2h", "--", "true");
	cr_assert_eq(c.timeout_ms, 7200000);
	cr_assert_eq(c.max_timeout_ms, 0, "a run's own --timeout is not clamped");
	ab_config_free(&c);
	ab_config_init(&c);
	PARSE_OK(&c, "run", "--timeout", "2h", "--max-timeout", "1h", "--", "true");
	cr_assert_eq(c.max_timeout_ms, 3600000, "but by a --max-timeout given too");
	ab_config_free(&c);
	ab_config_init(&c);
	bool help = true;
	struct ab_error err = {0};
	const char *serve[] = {"serve", "--timeout", "2h", NULL};
	cr_assert_eq(ab_config_parse_serve(&c, 3, (char **)serve, &help, &err), 0, "%s", err.msg);
	cr_assert_eq(c.max_timeout_ms, 600000, "a session's requests are clamped");
	ab_config_free(&c);
}

Test(profile, offline_build_has_no_network_and_room_to_build)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--profile", "offline-build", "--", "true");
	cr_assert_eq(cfg.net, AB_NET_NONE);
	cr_assert_eq(cfg.memory, 8ULL << 30);
	cr_assert_eq(cfg.pids, 4096);
	cr_assert_eq(cfg.timeout_ms, 30 * 60 * 1000);
	cr_assert_eq(cfg.tmpfs_size, 4ULL << 30);
	bool cargo = false;
	for (size_t i = 0; i < cfg.n_set_env; i++)
		cargo |= strcmp(cfg.set_env[i], "CARGO_NET_OFFLINE=true") == 0;
	cr_assert(cargo);
	ab_config_free(&cfg);
}

Test(profile, untrusted_is_tight)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--profile", "untrusted", "--", "true");
	cr_assert_str_eq(cfg.seccomp, "strict");
	cr_assert_eq(cfg.env_policy, AB_ENV_NONE);
	cr_assert_eq(cfg.net, AB_NET_NONE);
	cr_assert_not(cfg.no_landlock);
	cr_assert_eq(cfg.memory, 512ULL << 20);
	cr_assert_eq(cfg.pids, 64);
	cr_assert_eq(cfg.timeout_ms, 30 * 1000);
	cr_assert_eq(rlimit_of(&cfg, RLIMIT_NOFILE), 256);
	ab_config_free(&cfg);
	/* and the command line still overrides it */
	ab_config_init(&cfg);
	PARSE_OK(&cfg, "run", "--profile", "untrusted", "--timeout", "2m", "--", "true");
	cr_assert_eq(cfg.timeout_ms, 2 * 60 * 1000);
	ab_config_free(&cfg);
}

Test(profile, net_takes_a_list_of_its_values)
{
	struct ab_config cfg;
	ab_config_init(&cfg);
	load_ok(&cfg, "p.json",
		"{\"net\": [\"allow=pypi.org\", \"secret=GITHUB_TOKEN@api.github.com\", "
		"\"ca=/etc/corp-ca.pem\"]}");
	cr_assert_eq(cfg.net, AB_NET_PROXY);
	cr_assert_eq(cfg.n_net_rules, 3);
	cr_assert_str_eq(cfg.net_rules[1], "secret=GITHUB_TOKEN@api.github.com");
	cr_assert_str_eq(cfg.net_rules[2], "ca=/etc/corp-ca.pem");
	ab_config_free(&cfg);
}
