/* Shell completion (docs/install.md, "Shell completion"): `agentbox
 * completion bash|zsh` prints a small script that asks the binary itself,
 * `agentbox __complete WORD...`, for the candidates of the word being
 * typed. The options come from the parser's own table (ab_option_list),
 * so a new run/serve option completes without anyone touching this file;
 * the other commands' own options are in the table below, which
 * tests/install/test_completion.py holds against each command's --help. */
#include "cli/complete.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/options.h"
#include "detach/detach.h"
#include "seccomp/seccomp_profile.h"

enum table { NONE, RUN, SESSION };

static const struct command {
	const char *name;
	enum table table;  /* the run/serve option table it takes */
	const char *extra; /* its own options, space-separated */
	char positional;   /* 'i' sandbox ids, 'd' directories, 'c' a command, 's' shells */
} commands[] = {
	{"run", RUN, "-c -t", 'c'},
	{"serve", SESSION, "", 0},
	{"mcp", SESSION, "--model-commits", 0},
	{"runtime", SESSION,
	 "--listen --http-port --grpc-port --http-timeout --drain-timeout --token-file --no-auth "
	 "--no-auth-on-network --host --allow-origin",
	 0},
	{"e2b", NONE, "--listen --port --api-key-file --domain --help", 0},
	{"create", SESSION,
	 "--name --idle-timeout --idle-pause --ttl --port --keep-output --idle-release", 0},
	{"exec", NONE, "-i -t -c --timeout --quiet --no-keep-background --help", 'i'},
	{"connect", NONE, "--help", 'i'},
	{"ls", NONE, "--json --help", 0},
	{"rm", NONE, "-f --help", 'i'},
	{"logs", NONE, "--follow -f --help", 'i'},
	{"watch", NONE, "--recursive -r --json --help", 'i'},
	{"pause", NONE, "--help", 'i'},
	{"resume", NONE, "--help", 'i'},
	{"port", NONE, "--host --public --token-file --new-token --close --help", 'i'},
	{"checkpoint", NONE, "--name --help", 'i'},
	{"checkpoints", NONE, "--json --help", 'i'},
	{"restore", NONE, "--help", 'i'},
	{"fork", NONE, "--from --count --name --json --help", 'i'},
	{"check", NONE, "--json --cgroup-parent --rootfs --image --help", 0},
	{"images", NONE, "--json --help prune", 0},
	{"changes", NONE, "--json --diff --max-diff-bytes --ignored --since --help", 'd'},
	{"commit", NONE, "--force --help", 'd'},
	{"discard", NONE, "--help", 'd'},
	{"setup-delegation", NONE, "--remove --help", 0},
	{"completion", NONE, "bash zsh", 0},
};

/* Options whose value is one of a few words (a trailing '=' asks for more). */
static const struct {
	const char *option, *words;
} values[] = {
	{"--workspace-mode", "direct overlay"},
	{"--net", "none host allow= deny= secret= max-conns= rate="},
	{"--env-policy", "core none all"},
	{"--landlock", "on off"},
	{"--isolation", "full best"},
	{"--limits", "full best"},
	{"--output-encoding", "utf8 base64"},
	{"--seccomp", "default strict permissive none"},
	{"--protect-created", "quarantine report"},
};

/* Options whose value is a directory, or a file. */
static const char dir_options[] = " --workspace --skills --rootfs --keep-changes ";
static const char file_options[] = " --ro-bind --bind --report --audit-log --seccomp --profile "
				   "--image --token-file ";

static bool in_list(const char *list, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = strstr(list, word); p; p = strstr(p + 1, word))
		if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
			return true;
	return false;
}

static void words(const char *list, const char *cur)
{
	for (const char *p = list; *p;) {
		size_t n = strcspn(p, " ");
		if (n && strncmp(p, cur, strlen(cur)) == 0)
			printf("%.*s\n", (int)n, p);
		p += n + (p[n] == ' ');
	}
}

static void options_of(const struct command *c, const char *cur)
{
	const char *names[128];
	bool takes[128];
	size_t n = c->table == NONE ? 0 : ab_option_list(c->table == SESSION, names, takes, 128);
	for (size_t i = 0; i < n; i++) {
		char opt[64];
		snprintf(opt, sizeof(opt), "--%s", names[i]);
		if (strncmp(opt, cur, strlen(cur)) == 0)
			puts(opt);
	}
	words(c->extra, cur);
}

/* The caller's sandboxes (agentbox ls), from the directory they live in. */
static void sandbox_ids(const char *cur)
{
	char root[PATH_MAX];
	struct ab_error err = {0};
	if (detach_root(root, sizeof(root), false, &err) < 0)
		return;
	DIR *d = opendir(root);
	if (!d)
		return;
	struct stat st;
	for (struct dirent *e; (e = readdir(d));)
		if (detach_id_valid(e->d_name) && strncmp(e->d_name, cur, strlen(cur)) == 0 &&
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
		    S_ISDIR(st.st_mode)) /* a sandbox is a directory there */
			printf("%s\n", e->d_name);
	closedir(d);
}

/* The sandbox profiles --profile NAME finds. */
static void profiles(const char *cur)
{
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/sandbox", ab_policy_dir());
	words("agent offline-build untrusted", cur);
	DIR *d = opendir(dir);
	for (struct dirent *e; d && (e = readdir(d));) {
		size_t n = strlen(e->d_name);
		if (n > 5 && strcmp(e->d_name + n - 5, ".json") == 0 &&
		    !in_list("agent.json offline-build.json untrusted.json", e->d_name) &&
		    strncmp(e->d_name, cur, strlen(cur)) == 0)
			printf("%.*s\n", (int)(n - 5), e->d_name);
	}
	if (d)
		closedir(d);
}

/* Whether option opt of command c takes a value (the next word). */
static bool takes_value(const struct command *c, const char *opt)
{
	char padded[80];
	snprintf(padded, sizeof(padded), " %s ", opt);
	if (c->table != NONE && opt[0] == '-' && opt[1] == '-') {
		const char *names[128];
		bool v[128];
		size_t n = ab_option_list(c->table == SESSION, names, v, 128);
		for (size_t i = 0; i < n; i++)
			if (strcmp(names[i], opt + 2) == 0)
				return v[i];
	}
	return strstr(" --timeout --name --idle-timeout --ttl --keep-output --idle-release "
		      "--max-diff-bytes "
		      "--cgroup-parent "
		      "--rootfs --image --listen --http-port --grpc-port --http-timeout "
		      "--drain-timeout --token-file --host --allow-origin ",
		      padded) != NULL;
}

/* The candidates for the value of option prev. */
static void value_of(const char *prev, const char *cur)
{
	char padded[80];
	snprintf(padded, sizeof(padded), " %s ", prev);
	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		if (strcmp(values[i].option, prev) == 0)
			words(values[i].words, cur);
	if (strcmp(prev, "--profile") == 0)
		profiles(cur);
	if (strstr(dir_options, padded))
		puts(":dirs");
	else if (strstr(file_options, padded))
		puts(":files");
}

int ab_complete(int argc, char **argv)
{
	/* argv: the words of the line after "agentbox", the last being typed */
	const char *cur = argc > 0 ? argv[argc - 1] : "";
	if (argc <= 1) {
		for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
			words(commands[i].name, cur);
		words("--help --version", cur);
		return 0;
	}
	const struct command *c = NULL;
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]) && !c; i++)
		if (strcmp(commands[i].name, argv[0]) == 0)
			c = &commands[i];
	if (!c)
		return 0;
	bool positional = false;
	for (int i = 1; i < argc - 1; i++) {
		if (strcmp(argv[i], "--") == 0 ||
		    (c->positional == 'c' && strcmp(argv[i], "-c") == 0)) {
			puts(c->positional == 'c' || c->positional == 'i' ? ":commands" : ":none");
			return 0;
		}
		if (argv[i][0] == '-' && takes_value(c, argv[i]))
			i++; /* its value */
		else if (argv[i][0] != '-')
			positional = true;
	}
	const char *prev = argc >= 3 ? argv[argc - 2] : "";
	bool prev_value = false; /* prev is an option whose value is being typed */
	for (int i = 1; i < argc - 1; i++) {
		prev_value = argv[i][0] == '-' && takes_value(c, argv[i]) && i == argc - 2;
		if (argv[i][0] == '-' && takes_value(c, argv[i]))
			i++;
	}
	if (prev_value) {
		value_of(prev, cur);
		return 0;
	}
	bool exec = strcmp(c->name, "exec") == 0;
	if (cur[0] == '-' || !c->positional)
		options_of(c, cur);
	else if (c->positional == 'i' && (!positional || !exec))
		sandbox_ids(cur);
	else if (c->positional == 'd')
		puts(":dirs");
	else
		puts(":commands"); /* run's or exec's command */
	return 0;
}

static const char bash_script[] =
	"# bash completion for agentbox: the binary lists the candidates\n"
	"# (agentbox __complete WORDS...), so they are always its own\n"
	"_agentbox()\n"
	"{\n"
	"\tlocal cur=${COMP_WORDS[COMP_CWORD]} line w\n"
	"\tCOMPREPLY=()\n"
	"\twhile IFS= read -r line; do\n"
	"\t\tcase $line in\n"
	"\t\t:dirs) COMPREPLY+=($(compgen -d -- \"$cur\")) ;;\n"
	"\t\t:files) COMPREPLY+=($(compgen -f -- \"$cur\")) ;;\n"
	"\t\t:commands) COMPREPLY+=($(compgen -c -- \"$cur\")) ;;\n"
	"\t\t:*) ;;\n"
	"\t\t*) COMPREPLY+=(\"$line\") ;;\n"
	"\t\tesac\n"
	"\tdone < <(\"${COMP_WORDS[0]}\" __complete \"${COMP_WORDS[@]:1:COMP_CWORD}\" "
	"2>/dev/null)\n"
	"\tfor w in \"${COMPREPLY[@]}\"; do [[ $w == *= ]] && compopt -o nospace; done\n"
	"}\n"
	"complete -F _agentbox agentbox\n";

static const char zsh_script[] =
	"#compdef agentbox\n"
	"# zsh completion for agentbox: the binary lists the candidates\n"
	"# (agentbox __complete WORDS...), so they are always its own\n"
	"_agentbox() {\n"
	"  local -a cands; local line\n"
	"  for line in \"${(@f)$(${words[1]} __complete \"${(@)words[2,CURRENT]}\" "
	"2>/dev/null)}\"; do\n"
	"    case $line in\n"
	"      :dirs) _files -/ ;;\n"
	"      :files) _files ;;\n"
	"      :commands) _command_names -e ;;\n"
	"      :*) ;;\n"
	"      *) cands+=(\"$line\") ;;\n"
	"    esac\n"
	"  done\n"
	"  compadd -Q -S '' -- ${(M)cands:#*=}\n"
	"  compadd -Q -- ${cands:#*=}\n"
	"  return 0\n"
	"}\n"
	"_agentbox \"$@\"\n";

int ab_completion_script(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "bash") == 0) {
		fputs(bash_script, stdout);
		return 0;
	}
	if (argc == 2 && strcmp(argv[1], "zsh") == 0) {
		fputs(zsh_script, stdout);
		return 0;
	}
	fputs("Usage: agentbox completion bash|zsh\n"
	      "\n"
	      "Print the shell's completion script: source <(agentbox completion bash), or\n"
	      "save it where the shell looks (the packages install both). It asks agentbox\n"
	      "itself for the commands, options, values, profiles and sandbox ids.\n",
	      argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? stdout
										  : stderr);
	return argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) ? 0 : 125;
}
