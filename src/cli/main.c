/* agentbox: the command-line front. Parses the subcommand, calls the
 * library, prints the one error line and picks the exit status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentbox/agentbox.h"
#include "cli/check.h"
#include "cli/complete.h"
#include "cli/delegate.h"
#include "detach/detach.h"
#include "image/cache.h"
#include "image/layout_proc.h"
#include "image/unpack_proc.h"
#include "layer/layer.h"
#include "e2b/e2b.h"
#include "mcp/mcp.h"
#include "port/port.h"
#include "grpc/rt_gproc.h"
#include "httpapi/http_server.h"
#include "runtime/runtime.h"
#include "session/result_say.h"
#include "serve/serve.h"
#include "util/error.h"

static const char usage_main[] =
	"Usage: agentbox COMMAND [OPTIONS]\n"
	"\n"
	"Run untrusted commands in a Linux namespace sandbox.\n"
	"\n"
	"Commands:\n"
	"  run       run one command in a fresh sandbox (agentbox run --help)\n"
	"  serve     one sandbox for many commands: JSON lines on stdin and stdout\n"
	"            (agentbox serve --help, docs/protocol.md)\n"
	"  mcp       one sandbox as MCP tools (execute, read_file, write_file, ...)\n"
	"            for an MCP host, over stdio (agentbox mcp --help, docs/mcp.md)\n"
	"  runtime   one sandbox behind agent-sandbox's runtime HTTP API, for\n"
	"            Kubernetes (agentbox runtime --help, docs/kubernetes.md)\n"
	"  e2b       E2B's API on a local port, for code written for E2B's SDK\n"
	"            (agentbox e2b --help, docs/e2b.md)\n"
	"  create    a sandbox that outlives its caller, reached by id (docs/detached.md):\n"
	"  exec      run a command in it\n"
	"  connect   bridge stdin and stdout to its protocol (over ssh, kubectl exec)\n"
	"  ls        list your sandboxes\n"
	"  pause     freeze one (cgroup freezer); resume: thaw it\n"
	"  rm        end one, leaving nothing\n"
	"  logs      what its launcher said (timeouts, denials); --follow\n"
	"  port      publish a TCP port of one on this host, for you only\n"
	"  watch     its file events as they happen (agentbox watch --help)\n"
	"  checkpoint  an overlay workspace's state as a layer; checkpoints: list\n"
	"            them; restore ID NAME: back to one (docs/checkpoints.md)\n"
	"  check     can this host run agentbox, and what will be limited?\n"
	"  images    the image cache: its images and layers; images prune\n"
	"  changes   what a kept overlay layer changes (agentbox changes --help)\n"
	"  commit    apply a kept layer's changes to the workspace\n"
	"  discard   remove a kept layer\n"
	"  setup-delegation USER  (root) USER's own cgroups on a v1 or hybrid host\n"
	"  completion bash|zsh  the shell's completion script (source it)\n"
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
	"Profile:\n"
	"  --profile NAME|FILE  apply a sandbox profile first: a JSON object of these\n"
	"                       options without the dashes (docs/profiles.md); a\n"
	"                       NAME is shipped: agent, offline-build, untrusted.\n"
	"                       Options given here override it, wherever it stands;\n"
	"                       repeatable ones add to its lists\n"
	"\n"
	"View:\n"
	"  --workspace DIR      bind DIR read-write at /workspace (default: the\n"
	"                       current directory); DIR must not be a symlink. /, a\n"
	"                       top-level system directory, your home directory or\n"
	"                       one of its ancestors is refused (125) unless named\n"
	"                       here with --allow-broad-workspace\n"
	"  --workspace-mode direct|overlay\n"
	"                       direct (default): the workspace itself, read-write;\n"
	"                       overlay: an overlay whose writes land in a layer on\n"
	"                       disk, the host's files untouched until committed\n"
	"                       (docs/workspace.md)\n"
	"  --keep-changes DIR   overlay: keep the layer in DIR after the run, for\n"
	"                       agentbox changes/commit/discard DIR\n"
	"  --cwd PATH           working directory in the view (default /workspace)\n"
	"  --skills DIR         bind DIR read-only at /skills\n"
	"  --rootfs DIR         the view's system from the root tree DIR, read-only,\n"
	"                       instead of the host's /usr, /bin, /lib*, /etc; it\n"
	"                       must hold the command (/bin/sh for -c and serve),\n"
	"                       its libraries, for this machine, and etc/passwd\n"
	"                       (docs/rootfs.md)\n"
	"  --image oci:DIR[:TAG]\n"
	"                       the view's system from an OCI image layout (skopeo\n"
	"                       copy ... oci:DIR:TAG): its layers, unpacked once\n"
	"                       into the image cache, as read-only overlay layers;\n"
	"                       TAG defaults to latest or the only manifest. Its\n"
	"                       Env, WorkingDir and User apply unless --env NAME=,\n"
	"                       --cwd, --uid/--gid say otherwise (docs/images.md)\n"
	"  --ro-bind SRC[:DST]  bind SRC read-only at DST (default: SRC's path)\n"
	"  --bind SRC[:DST]     bind SRC read-write at DST\n"
	"  --tmpfs DST          a fresh tmpfs at DST\n"
	"  --home PATH          $HOME in the view, a tmpfs (default /home/agent)\n"
	"  --hostname NAME      host name in the sandbox (default agentbox)\n"
	"  --net none|host      none: only loopback (default); host: share the\n"
	"                       host's network\n"
	"  --net allow=PATTERN[,...], --net deny=PATTERN[,...]\n"
	"                       only loopback, plus a proxy on 127.0.0.1:3128 that\n"
	"                       connects where allowed: host names (*.example.org),\n"
	"                       addresses, CIDRs, with :PORT or :* (default 80 and\n"
	"                       443); deny wins; loopback, private, link-local and\n"
	"                       the host's addresses only when allowed by address.\n"
	"                       Also --net max-conns=N, --net rate=SIZE (per second)\n"
	"                       (docs/network.md). allow= may carry methods and a\n"
	"                       path: GET,HEAD:api.github.com/repos/acme/* (HTTPS\n"
	"                       terminated, each request checked, 403 otherwise);\n"
	"                       GET+body: a body on GET allowed (else 400)\n"
	"  --net secret=NAME@PATTERN[,...]\n"
	"                       $NAME stays outside: inside it is a placeholder the\n"
	"                       proxy replaces with the value in the request line and\n"
	"                       headers sent to these hosts (allowed by this), over\n"
	"                       TLS it terminates with a per-sandbox CA the sandbox\n"
	"                       trusts (SSL_CERT_FILE, ...); repeatable\n"
	"  --net ca=FILE        more CAs (PEM) to verify those hosts with\n"
	"\n"
	"Identity:\n"
	"  --uid N, --gid N     uid and gid inside (default: the caller's)\n"
	"  --host-uid N         as root only: the unprivileged host uid the sandbox\n"
	"                       user is, with the sources bound as they are\n"
	"                       (default: 2000000000, with the workspace and bind\n"
	"                       sources idmapped to it: files keep their owners)\n"
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
	"Limits and results:\n"
	"  --memory SIZE        memory of the whole sandbox (a cgroup; swap not beyond)\n"
	"  --cpus N             CPU-time quota in cores, e.g. 0.5\n"
	"  --pids N             processes and threads at most (default 512)\n"
	"  --cgroup-parent PATH make the sandbox's cgroup below PATH (a delegated one)\n"
	"  --limits full|best   full (default): a --memory, --cpus or --pids asked\n"
	"                       for that cannot hold as asked here fails (125),\n"
	"                       saying why and the fix; best: run without it and\n"
	"                       say so. Without a cgroup, --pids holds by\n"
	"                       RLIMIT_NPROC in the sandbox's user namespace\n"
	"                       (--require-limits: the old name of full)\n"
	"  --quiet              none of agentbox's own lines on stderr but errors\n"
	"                       (notices, a timeout, an OOM kill, refused forks)\n"
	"  --timeout DURATION   500ms, 30s, 2m, 1h or none (default 120s; none with\n"
	"                       -t); on expiry SIGTERM to every process, SIGKILL\n"
	"                       after --kill-after (default 2s), exit status 124\n"
	"  --kill-after DURATION   grace between that SIGTERM and the SIGKILL\n"
	"  --max-timeout DURATION  clamp longer timeouts (default 10m; none lifts it;\n"
	"                       a --timeout given here is clamped only by one given\n"
	"                       too)\n"
	"  --tmpfs-size SIZE    size of /tmp, $HOME and each --tmpfs (default 256M)\n"
	"  --rlimit NAME=VALUE  e.g. nofile=1024, as=1G, core=0 (defaults: core=0,\n"
	"                       nofile=8192)\n"
	"  --report FILE|fd:N   write the result as one JSON object (docs/result.md)\n"
	"  --capture            put the output in the report, not on stdout/stderr\n"
	"  -t, --tty            a new terminal inside the sandbox for the command\n"
	"                       (its controlling terminal), relayed to yours, which is\n"
	"                       in raw mode meanwhile; stdin must be a terminal\n"
	"  --merge-output       one interleaved \"output\" instead of stdout/stderr\n"
	"  --max-output SIZE    keep at most SIZE per stream: head and tail (default 1M)\n"
	"  --output-encoding utf8|base64\n"
	"\n"
	"Confinement:\n"
	"  --seccomp PROFILE    default (an allowlist for agent workloads), strict,\n"
	"                       permissive, none, or an OCI/Docker JSON profile file;\n"
	"                       denied syscalls are summed up on stderr afterwards\n"
	"  --landlock on|off    Landlock as a second layer where the kernel has it:\n"
	"                       writes only beneath the view's writable places\n"
	"                       (default on)\n"
	"  --isolation full|best  full (default): refuse to run where a layer cannot be\n"
	"                       built (a container's masked /proc, a refused host name);\n"
	"                       best: run without it, named on stderr and in the result\n"
	"                       (docs/containers.md)\n"
	"\n"
	"Protection:\n"
	"  --protect PATH       keep workspace-relative PATH read-only when it exists\n"
	"                       (defaults: .git/hooks .git/config .git/commondir\n"
	"                       .git/config.worktree .gitmodules .bashrc .bash_profile\n"
	"                       .profile .zshrc .envrc .mcp.json .vscode .idea);\n"
	"                       creating or changing one is reported\n"
	"  --protect-created quarantine|report\n"
	"                       quarantine (default): a protected path the command\n"
	"                       created in a direct workspace that the host would run\n"
	"                       (a .git/config naming a program, a hook, a .bashrc) is\n"
	"                       renamed aside (PATH.agentbox-quarantine-TIME) before\n"
	"                       the result; report: left in place and reported\n"
	"  --unprotect PATH     take PATH off the protected list: a write to a protected\n"
	"                       file fails with \"Read-only file system\", or, renamed\n"
	"                       over as git does, \"Device or resource busy\"\n"
	"\n"
	"Exit status: the command's; 124 timed out; 125 agentbox failed; 126 the\n"
	"command cannot be run; 127 not found; 128+N killed by signal N.\n";

static const char usage_serve[] =
	"Usage: agentbox serve [OPTIONS]\n"
	"\n"
	"Build one sandbox (as agentbox run does, with the same options) and run\n"
	"many commands in it: one JSON request per line on stdin, one JSON message\n"
	"per line on stdout, as docs/protocol.md specifies (protocol agentbox/1).\n"
	"Files one command writes are there for the next. A shutdown request,\n"
	"SIGTERM, SIGINT or SIGHUP end the session: every process is killed and\n"
	"everything agentbox made is removed. End of file on stdin does the same\n"
	"once every request already sent has been answered.\n"
	"\n"
	"Session options (besides those of agentbox run --help, but for -c,\n"
	"--report, --capture, --merge-output and --output-encoding, which each\n"
	"request chooses):\n"
	"  --max-concurrent N   commands running at once (default 8); more wait\n"
	"                       in a queue of 1024\n"
	"  --audit-log FILE     append one JSON line per request and per result\n"
	"                       (never the values of environment variables)\n"
	"  --timeout DURATION   each command's default timeout (default 120s);\n"
	"                       a request's timeout is clamped to --max-timeout\n"
	"  --max-output SIZE    each stream's default cap (default 1M)\n"
	"\n"
	"Exit status: 0 after a clean end; 125 when the sandbox cannot be built\n"
	"or dies.\n";

static const char usage_mcp[] =
	"Usage: agentbox mcp [OPTIONS]\n"
	"\n"
	"A Model Context Protocol server over stdio (JSON-RPC 2.0, protocol\n"
	"revisions 2025-11-25 and 2025-06-18) for an MCP host (Claude Code, Codex,\n"
	"Cursor, VS Code...): one sandbox, built as agentbox serve builds it, for\n"
	"the server's lifetime, offered as the tools execute, read_file,\n"
	"write_file, edit_file, ls, glob and grep (with --workspace-mode overlay\n"
	"also changes; the user commits with agentbox commit on --keep-changes\n"
	"DIR). End of file on stdin, SIGTERM, SIGINT\n"
	"or SIGHUP end it: every process is killed and everything agentbox made is\n"
	"removed. docs/mcp.md has the hosts' configuration lines.\n"
	"\n"
	"Options: those of agentbox serve --help (--audit-log too), e.g.\n"
	"  agentbox mcp --profile agent --workspace ~/project --net allow=pypi.org\n"
	"and\n"
	"  --model-commits      with --workspace-mode overlay: offer commit and\n"
	"                       discard as tools, so the model applies its own\n"
	"                       changes (by default only the user does)\n"
	"\n"
	"Exit status: 0 after a clean end; 125 when the sandbox cannot be built\n"
	"or dies.\n";

static const char usage_runtime[] =
	"Usage: agentbox runtime [OPTIONS] [--listen ADDR] [--http-port N]\n"
	"                        [--grpc-port N] [--token-file FILE] [--host NAME]\n"
	"\n"
	"kubernetes-sigs/agent-sandbox's legacy in-pod runtime API over HTTP, as\n"
	"its examples/python-runtime-sandbox/main.py serves it (GET /, POST\n"
	"/execute, POST /upload, GET /download/PATH, /list/PATH, /exists/PATH)\n"
	"and sandboxd's REST API (GET, HEAD, PUT, DELETE /v1/files/PATH, GET\n"
	"/v1/health, /v1/metadata: SANDBOX_* variables) on the same port, and\n"
	"with --grpc-port sandboxd's gRPC process.v1.ProcessService (Execute,\n"
	"Start with streaming and a PTY, WriteStdin, SendSignal, ResizeTTY),\n"
	"and agentbox's own routes (GET /agentbox/v1/changes, POST\n"
	"/agentbox/v1/commit and /agentbox/v1/discard with --workspace-mode\n"
	"overlay, GET or POST /agentbox/v1/net with --net allow=; 409 without)\n"
	"on one sandbox built as agentbox serve builds it, for the server's\n"
	"lifetime: commands run there (split as shlex.split splits them, no\n"
	"shell, from /workspace), paths are below /workspace. GET / answers 503\n"
	"once the sandbox is gone. SIGTERM, SIGINT or SIGHUP stop taking\n"
	"connections, let the requests in flight finish, then end it all\n"
	"(exit 0). docs/kubernetes.md says how to run it.\n"
	"\n"
	"  --listen ADDR        the IPv4 or IPv6 address to listen on (default\n"
	"                       127.0.0.1: this host only; 0.0.0.0 in a pod)\n"
	"  --http-port N        the port (default 8888, as agent-sandbox expects)\n"
	"  --grpc-port N        also serve gRPC (h2c) on this port of --listen's\n"
	"                       address (sandboxd uses 9090; default: none)\n"
	"  --http-timeout SEC   close a connection idle this long (default 30)\n"
	"  --drain-timeout SEC  after SIGTERM, how long requests may finish\n"
	"                       (default 20)\n"
	"  --token-file FILE    the token every request must send as\n"
	"                       Authorization: Bearer TOKEN (gRPC: authorization\n"
	"                       metadata); default: a new random one, written to\n"
	"                       a 0600 file in the runtime directory that stderr\n"
	"                       names\n"
	"  --no-auth            ask no token (a warning; loopback only)\n"
	"  --no-auth-on-network  also --no-auth on a --listen beyond loopback\n"
	"  --host NAME          a name the Host header may give (repeatable; beside\n"
	"                       localhost, loopback, --listen's and the connection's\n"
	"                       address): a Service's DNS name in a pod\n"
	"  --allow-origin ORIGIN  admit requests with this Origin (repeatable;\n"
	"                       default: none, every browser request is refused)\n"
	"  Other options: those of agentbox serve --help (but --audit-log).\n"
	"\n"
	"Unauthenticated requests get 401 (gRPC UNAUTHENTICATED), a foreign Host\n"
	"421, an Origin 403, a JSON route's body sent as another type 415. One\n"
	"client (a local uid, else a peer address) holds at most 32 HTTP and 16\n"
	"gRPC connections; a request's head is in within 10 s or its connection\n"
	"is closed. A gRPC process is reached only from its own connection.\n"
	"\n"
	"An /execute command times out after SANDBOX_EXEC_TIMEOUT_SECONDS (default\n"
	"300, clamped to --max-timeout). Bodies: /execute's JSON at most 1 MiB,\n"
	"an upload, a download or a PUT at most 32 MiB (413 beyond); a gRPC\n"
	"request at most 4 MiB (RESOURCE_EXHAUSTED). A gRPC process runs up to\n"
	"--max-timeout; cancelling its Start call ends it. POST\n"
	"/agentbox/v1/discard drops every change by replacing the sandbox with\n"
	"a new one (409 while anything runs in it).\n"
	"\n"
	"Exit status: 0 after a clean end; 125 when the sandbox cannot be built\n"
	"or the address cannot be listened on.\n";

static const char usage_check[] =
	"Usage: agentbox check [--json] [--cgroup-parent PATH] [--rootfs DIR]\n"
	"                      [--image oci:DIR[:TAG]]\n"
	"\n"
	"Tell whether this host can run agentbox and what will be limited: the\n"
	"kernel, user namespaces (and what restricts them: sysctls, AppArmor, a\n"
	"container), seccomp, Landlock, and which limits cgroups will really\n"
	"apply, from a trial run of /bin/true in a sandbox; with the command that\n"
	"fixes each problem.\n"
	"\n"
	"  --json               the same as one JSON object\n"
	"  --cgroup-parent PATH make the trial's cgroup below PATH, as run and\n"
	"                       serve would: whether a delegated group works\n"
	"  --rootfs DIR         make the trial run /bin/sh -c : on the root tree DIR\n"
	"                       (agentbox run --rootfs): whether it can be a view\n"
	"  --image IMAGE        the same on the OCI image IMAGE (agentbox run --image)\n"
	"\n"
	"Exit status: 0 when agentbox can run here, 1 when it cannot, 125 on bad\n"
	"options.\n";

static const char usage_images[] =
	"Usage: agentbox images [--json]\n"
	"       agentbox images prune\n"
	"\n"
	"The image cache (--image): the images seen and the layers unpacked, their\n"
	"sizes and whether a running sandbox uses them. prune removes every layer\n"
	"no sandbox uses, and the images that named them (docs/images.md).\n"
	"\n"
	"The cache ($AGENTBOX_IMAGE_CACHE, else the state directory's) must be\n"
	"yours or root's and writable by no one else, nor any directory on the way;\n"
	"each layer is compared with its seal at every start, and a layer changed\n"
	"since it was unpacked is refused until prune removes it.\n";

static int cmd_images(int argc, char **argv)
{
	struct ab_error err = {0};
	int r;
	if (argc == 1 || (argc == 2 && strcmp(argv[1], "--json") == 0))
		r = image_cache_list(stdout, argc == 2, &err);
	else if (argc == 2 && strcmp(argv[1], "prune") == 0)
		r = image_cache_prune(stdout, &err);
	else if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(usage_images, stdout);
		return 0;
	} else {
		fputs(usage_images, stderr);
		return AB_EXIT_FAILURE;
	}
	if (r < 0) {
		fprintf(stderr, "agentbox: %s\n", err.msg);
		return AB_EXIT_FAILURE;
	}
	return 0;
}

static int cmd_check(int argc, char **argv)
{
	bool json = false;
	const char *parent = NULL, *rootfs = NULL, *image = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--json") == 0) {
			json = true;
		} else if (strcmp(argv[i], "--cgroup-parent") == 0 && i + 1 < argc) {
			parent = argv[++i];
			if (parent[0] != '/') {
				fprintf(stderr,
					"agentbox: check: --cgroup-parent: '%s' is not an absolute "
					"path (the group's path below each controller's mount: "
					"/%s?)\n",
					parent, parent);
				return AB_EXIT_FAILURE;
			}
		} else if (strcmp(argv[i], "--rootfs") == 0 && i + 1 < argc) {
			rootfs = argv[++i];
		} else if (strcmp(argv[i], "--image") == 0 && i + 1 < argc) {
			image = argv[++i];
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			fputs(usage_check, stdout);
			return 0;
		} else {
			fprintf(stderr,
				"agentbox: check: unknown option '%s' (try 'agentbox check "
				"--help')\n",
				argv[i]);
			return AB_EXIT_FAILURE;
		}
	}
	struct check_facts f;
	check_gather_on(&f, parent, rootfs, image);
	return check_print(&f, json);
}

static void print_notice(const char *line)
{
	fprintf(stderr, "agentbox: %s\n", line);
}

/* Protected paths the command changed, removed or replaced: one warning.
 * Those it created where there were none (`git init`) are in the report
 * only; those put out of effect get a line each, with how to take them
 * back. */
static void print_protected(const struct ab_result *res)
{
	bool any = false;
	for (char **p = res->protected_changed; p && *p; p++) {
		bool created = false;
		for (char **c = res->protected_created; c && *c && !created; c++)
			created = strcmp(*c, *p) == 0;
		/* moved aside, or beneath what was: said below */
		for (size_t i = 0; i < res->n_quarantined && !created; i++) {
			const char *q = res->quarantined[i].path;
			size_t n = q ? strlen(q) : 0;
			created =
				q && strncmp(q, *p, n) == 0 && ((*p)[n] == '\0' || (*p)[n] == '/');
		}
		if (created)
			continue;
		fprintf(stderr, "%s %s",
			any ? "" : "agentbox: the command changed protected workspace paths:", *p);
		any = true;
	}
	if (any)
		fputs(" (review them before anything on the host runs them)\n", stderr);
	for (size_t i = 0; i < res->n_quarantined; i++) {
		const struct ab_quarantined *q = &res->quarantined[i];
		if (q->moved_to)
			fprintf(stderr,
				"agentbox: the command created %s, which %s; moved aside to %s "
				"(to take it back, in the workspace: mv -T %s %s)\n",
				q->path, q->reason, q->moved_to, q->moved_to, q->path);
		else
			fprintf(stderr,
				"agentbox: the command created %s, which %s, and it could not be "
				"moved aside (%s): remove it before anything on the host runs it\n",
				q->path, q->reason, q->error ? q->error : "unknown error");
	}
	for (char **p = res->protected_refused; p && *p; p++)
		fprintf(stderr,
			"agentbox: %s is protected (read-only in the sandbox), so the "
			"command's write to it failed; --unprotect %s lets it change it\n",
			*p, *p);
}

static int cmd_run(int argc, char **argv)
{
	struct ab_config cfg;
	struct ab_error err = {0};
	struct ab_result res = {0};
	bool help = false;

	ab_config_init(&cfg);
	cfg.notice = print_notice;
	int r = ab_config_parse_run(&cfg, argc, argv, &help, &err);
	if (cfg.quiet)
		cfg.notice = NULL;
	if (r == 0 && help) {
		fputs(usage_run, stdout);
		ab_config_free(&cfg);
		return 0;
	}
	int report = -1;
	bool report_owned = false;
	if (r == 0 && cfg.report && (report = ab_report_open(cfg.report, &report_owned, &err)) < 0)
		r = report;
	if (r == 0) {
		cfg.exit_after_run = true; /* we exit next: no zombie is left */
		r = ab_run(&cfg, &res, &err);
		struct ab_error werr = {0};
		if (report >= 0 &&
		    ab_result_write_json(&cfg, &res, r < 0 ? &err : NULL, report, &werr) < 0) {
			fprintf(stderr, "agentbox: %s\n", werr.msg);
			if (r == 0)
				res.exit_code = AB_EXIT_FAILURE;
		}
	}
	if (report_owned)
		close(report);
	if (r < 0) {
		ab_config_free(&cfg);
		fprintf(stderr, "agentbox: %s\n", err.msg);
		ab_result_free(&res);
		return AB_EXIT_FAILURE;
	}
	bool quiet = cfg.quiet;
	struct ab_say_limits lim = {
		.kill_after_ms = cfg.kill_after_ms, .memory = cfg.memory, .pids = cfg.pids};
	ab_config_free(&cfg);
	/* the denials: with a report, the report says it all */
	if (!quiet)
		ab_result_say(stderr, &res, &lim, report < 0);
	if (!quiet)
		print_protected(&res);
	int code = res.exit_code;
	ab_result_free(&res);
	return code;
}

/* serve and mcp: one sandbox for a session front (fn) of their options */
static int cmd_front(int argc, char **argv, const char *usage, int (*fn)(struct ab_config *))
{
	struct ab_config cfg;
	struct ab_error err = {0};
	bool help = false, model_commits = false;
	ab_config_init(&cfg);
	/* mcp's own option, taken out before the session's options */
	int n = 0;
	for (int i = 0; i < argc; i++)
		if (fn == ab_mcp && i > 0 && strcmp(argv[i], "--model-commits") == 0)
			model_commits = true;
		else
			argv[n++] = argv[i];
	argc = n;
	int r = ab_config_parse_serve(&cfg, argc, argv, &help, &err);
	cfg.model_commits = model_commits;
	if (r == 0 && help) {
		fputs(usage, stdout);
		ab_config_free(&cfg);
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "agentbox: %s\n", err.msg);
		ab_config_free(&cfg);
		return AB_EXIT_FAILURE;
	}
	int status = fn(&cfg);
	ab_config_free(&cfg);
	return status;
}

static int cmd_runtime(int argc, char **argv)
{
	struct ab_runtime_opts o;
	struct ab_config cfg;
	struct ab_error err = {0};
	bool help = false;
	int n = 0, status = AB_EXIT_FAILURE;
	char **rest = calloc((size_t)argc + 1, sizeof(*rest));
	ab_config_init(&cfg);
	if (!rest)
		ab_error_plain(&err, ENOMEM, "out of memory");
	else if (ab_runtime_options(argc, argv, &o, rest, &n, &err) == 0 &&
		 ab_config_parse_serve(&cfg, n, rest, &help, &err) == 0)
		status = help ? (fputs(usage_runtime, stdout), 0)
			      : ab_runtime(&cfg, &o,
					   (const struct rt_proto *const[]){&rt_http_proto,
									    &rt_grpc_proto, NULL});
	if (err.msg[0] && status == AB_EXIT_FAILURE)
		fprintf(stderr, "agentbox: %s\n", err.msg);
	ab_config_free(&cfg);
	free(rest);
	return status;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "__unpack-layer") == 0)
		return unpack_proc_main(argc, argv); /* --image's confined helpers */
	if (argc > 1 && strcmp(argv[1], "__read-layout") == 0)
		return layout_proc_main(argc, argv);
	if (argc > 1 && strcmp(argv[1], "__port-relay") == 0)
		return port_relay_main(argc, argv); /* agentbox port's relay */
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
	if (strcmp(argv[1], "serve") == 0)
		return cmd_front(argc - 1, argv + 1, usage_serve, ab_serve);
	if (strcmp(argv[1], "mcp") == 0)
		return cmd_front(argc - 1, argv + 1, usage_mcp, ab_mcp);
	if (strcmp(argv[1], "runtime") == 0)
		return cmd_runtime(argc - 1, argv + 1);
	static const struct {
		const char *name;
		int (*fn)(int, char **);
	} detached[] = {{"create", detach_cli_create},
			{"exec", detach_cli_exec},
			{"connect", detach_cli_connect},
			{"ls", detach_cli_ls},
			{"rm", detach_cli_rm},
			{"pause", detach_cli_pause},
			{"resume", detach_cli_pause},
			{"logs", detach_cli_logs},
			{"port", detach_cli_port},
			{"watch", detach_cli_watch},
			{"checkpoint", detach_cli_checkpoint},
			{"checkpoints", detach_cli_checkpoint},
			{"restore", detach_cli_checkpoint},
			{"e2b", e2b_cli}};
	for (size_t i = 0; i < sizeof(detached) / sizeof(detached[0]); i++)
		if (strcmp(argv[1], detached[i].name) == 0)
			return detached[i].fn(argc - 1, argv + 1);
	if (strcmp(argv[1], "check") == 0)
		return cmd_check(argc - 1, argv + 1);
	if (strcmp(argv[1], "setup-delegation") == 0)
		return ab_setup_delegation(argc - 1, argv + 1);
	if (strcmp(argv[1], "__complete") == 0)
		return ab_complete(argc - 2, argv + 2);
	if (strcmp(argv[1], "completion") == 0)
		return ab_completion_script(argc - 1, argv + 1);
	if (strcmp(argv[1], "images") == 0)
		return cmd_images(argc - 1, argv + 1);
	if (!strcmp(argv[1], "changes") || !strcmp(argv[1], "commit") ||
	    !strcmp(argv[1], "discard"))
		return layer_cli(argc - 1, argv + 1, detach_request);
	fprintf(stderr, "agentbox: unknown command '%s' (try 'agentbox --help')\n", argv[1]);
	return AB_EXIT_FAILURE;
}
