/* agentbox: the command-line front. Parses the subcommand, calls the
 * library, prints the one error line and picks the exit status. */
#include <stdio.h>
#include <string.h>

#include "agentbox/agentbox.h"

static const char usage_main[] =
	"Usage: agentbox COMMAND [OPTIONS]\n"
	"\n"
	"Run untrusted commands in a Linux namespace sandbox.\n"
	"\n"
	"Commands:\n"
	"  run       run one command in a fresh sandbox (agentbox run --help)\n"
	"\n"
	"Options:\n"
	"  --help     show this help\n"
	"  --version  show the version\n";

static const char usage_run[] =
	"Usage: agentbox run [OPTIONS] -- COMMAND [ARG...]\n"
	"       agentbox run [OPTIONS] -c 'SHELL STRING'\n"
	"\n"
	"Run COMMAND in a fresh sandbox: new user, mount, pid, ipc, uts, net and\n"
	"cgroup namespaces; the host system read-only; the workspace read-write at\n"
	"/workspace; no capabilities. stdin, stdout and stderr pass through; the\n"
	"exit status is the command's.\n"
	"\n"
	"View:\n"
	"  --workspace DIR      bind DIR read-write at /workspace (default: the\n"
	"                       current directory); DIR must not be a symlink\n"
	"  --cwd PATH           working directory in the view (default /workspace)\n"
	"  --skills DIR         bind DIR read-only at /skills\n"
	"  --ro-bind SRC[:DST]  bind SRC read-only at DST (default: SRC's path)\n"
	"  --bind SRC[:DST]     bind SRC read-write at DST\n"
	"  --tmpfs DST          a fresh tmpfs at DST\n"
	"  --home PATH          $HOME in the view, a tmpfs (default /home/agent)\n"
	"  --hostname NAME      host name in the sandbox (default agentbox)\n"
	"  --net none|host      none: only loopback (default); host: share the\n"
	"                       host's network\n"
	"\n"
	"Identity:\n"
	"  --uid N, --gid N     uid and gid inside (default: the caller's)\n"
	"  --host-uid N         as root only: the unprivileged host uid the sandbox\n"
	"                       user is (default: the workspace's owner)\n"
	"  --host-gid N         as root only: its host gid\n"
	"\n"
	"Environment:\n"
	"  --env-policy core|none|all\n"
	"                       core (default): PATH HOME LANG LC_* TERM TZ USER\n"
	"                       LOGNAME SHELL; all: everything but names that\n"
	"                       look like secrets (*_KEY, *_TOKEN, *_SECRET, ...)\n"
	"  --pass-env NAME      pass NAME through, even if it looks like a secret\n"
	"  --env NAME=VALUE     set NAME in the sandbox\n"
	"\n"
	"Exit status: the command's; 125 agentbox failed; 126 the command cannot\n"
	"be run; 127 not found; 128+N killed by signal N.\n";

static int cmd_run(int argc, char **argv)
{
	struct ab_config cfg;
	struct ab_error err = {0};
	struct ab_result res = {0};
	bool help = false;

	ab_config_init(&cfg);
	int r = ab_config_parse_run(&cfg, argc, argv, &help, &err);
	if (r == 0 && help) {
		fputs(usage_run, stdout);
		ab_config_free(&cfg);
		return 0;
	}
	if (r == 0) {
		if (cfg.net == AB_NET_HOST)
			fputs("agentbox: --net host: the command shares the host's network\n",
			      stderr);
		r = ab_run(&cfg, &res, &err);
	}
	ab_config_free(&cfg);
	if (r < 0) {
		fprintf(stderr, "agentbox: %s\n", err.msg);
		return AB_EXIT_FAILURE;
	}
	return res.exit_code;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fputs(usage_main, stderr);
		return AB_EXIT_FAILURE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(usage_main, stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("agentbox %s\n", AGENTBOX_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	fprintf(stderr, "agentbox: unknown command '%s' (try 'agentbox --help')\n", argv[1]);
	return AB_EXIT_FAILURE;
}
