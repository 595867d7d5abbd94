/* agentbox: run untrusted commands in a Linux namespace sandbox.
 *
 * Public API of libagentbox. Every function returns 0 on success or a
 * negative errno-style value, and fills the caller's struct ab_error with
 * one line that names the operation, the object and the reason.
 */
#ifndef AGENTBOX_AGENTBOX_H
#define AGENTBOX_AGENTBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define AGENTBOX_VERSION "0.1.0"

/* Exit statuses of `agentbox run`, following GNU timeout(1) and env(1). */
enum {
	AB_EXIT_TIMEOUT = 124,
	AB_EXIT_FAILURE = 125, /* agentbox itself failed */
	AB_EXIT_CANNOT_EXEC = 126,
	AB_EXIT_NOT_FOUND = 127,
	AB_EXIT_SIGNAL_BASE = 128,
};

/* What kind of error it is for the session protocol (docs/protocol.md,
 * "Errors" and the file error codes): each kind is one of the protocol's
 * error codes, spelt in one table (src/util/error.c). AB_ERRC_NONE lets the
 * errno decide: a bad request for the errnos that say so, internal for
 * the others (ab_error_errc). */
enum ab_errc {
	AB_ERRC_NONE = 0,
	AB_ERRC_INVALID_JSON,
	AB_ERRC_INVALID_REQUEST,
	AB_ERRC_UNKNOWN_OP,
	AB_ERRC_TOO_LARGE,
	AB_ERRC_DUPLICATE_ID,
	AB_ERRC_BUSY,
	AB_ERRC_CANCELLED,
	AB_ERRC_SHUTDOWN,
	AB_ERRC_TIMEOUT,
	AB_ERRC_INTERNAL,
	/* the file operations' own */
	AB_ERRC_FILE_NOT_FOUND,
	AB_ERRC_PERMISSION_DENIED,
	AB_ERRC_IS_DIRECTORY,
	AB_ERRC_NOT_DIRECTORY,
	AB_ERRC_INVALID_PATH,
	AB_ERRC_READ_ONLY,
	AB_ERRC_EXISTS,
	AB_ERRC_NOT_FOUND,
	AB_ERRC_NOT_UNIQUE,
	AB_ERRC_NO_SPACE,
	AB_ERRC_IO_ERROR,
};

struct ab_error {
	int code; /* positive errno value, 0 when no error */
	char msg[1024];
	enum ab_errc kind; /* the protocol's code, or AB_ERRC_NONE: the errno's */
};

enum ab_mount_kind {
	AB_MOUNT_RO_BIND,
	AB_MOUNT_BIND,
	AB_MOUNT_TMPFS,
};

struct ab_mount {
	enum ab_mount_kind kind;
	char *src; /* absolute host path; NULL for tmpfs */
	char *dst; /* absolute, normalised path inside the view */
};

enum ab_net_mode {
	AB_NET_NONE,  /* new network namespace with loopback only */
	AB_NET_HOST,  /* share the host's network namespace */
	AB_NET_PROXY, /* loopback only; egress through the launcher's proxy
		       * under net_rules (docs/network.md) */
};

/* --isolation (docs/containers.md) */
enum ab_isolation {
	AB_ISOLATION_FULL, /* refuse to run with less than every layer */
	AB_ISOLATION_BEST, /* drop, and name, the layers this host refuses */
};

enum ab_workspace_mode {
	AB_WORKSPACE_DIRECT,  /* the host directory bound read-write */
	AB_WORKSPACE_OVERLAY, /* an overlay: writes go to a layer (docs/workspace.md) */
};

enum ab_env_policy {
	AB_ENV_CORE, /* PATH, HOME, LANG, LC_*, TERM, TZ, USER, LOGNAME, SHELL */
	AB_ENV_NONE,
	AB_ENV_ALL, /* everything except names that look like secrets */
};

/* Layers that can be missing, as bits of ab_config.isolation_missing and
 * ab_result.isolation_missing. */
enum {
	/* no user namespace can be made: no sandbox at all can be built
	 * (refused in both modes: docs/containers.md, "Without namespaces") */
	AB_MISSING_NAMESPACES = 1u << 0,
	/* a new procfs cannot be mounted (a container's masked /proc): the
	 * container's /proc is bound instead, so the command sees the
	 * container's processes there (it still cannot signal them) */
	AB_MISSING_OWN_PROC = 1u << 1,
	/* sethostname refused (Podman's and Docker's default seccomp
	 * profiles): the command sees the container's host name */
	AB_MISSING_UTS = 1u << 2,
};

/* What a sandbox looks like and what it runs. Filled by ab_config_parse_run()
 * or by hand; released with ab_config_free(). Strings are owned. */
struct ab_config {
	char *workspace; /* host directory, bound read-write at /workspace */
	/* --allow-broad-workspace: a named workspace may be /, a system
	 * directory, the caller's home or one of its ancestors */
	bool allow_broad_workspace;
	char *skills; /* host directory, bound read-only at /skills, or NULL */
	/* --rootfs: host directory whose tree is the view's system (read-only)
	 * instead of the host's /usr, /bin, /lib*, /etc; NULL for the host's */
	char *rootfs;
	/* --image oci:DIR[:TAG]: an OCI image layout whose layers, unpacked
	 * into the image cache, are the view's system as overlay lower
	 * layers; NULL for none. image_use: the layers in use (image/cache.h),
	 * made by ab_config_finish */
	char *image;
	struct image_use *image_use;
	enum ab_workspace_mode workspace_mode;
	char *keep_changes; /* overlay: the layer's directory, kept after the sandbox */
	char *cwd;	    /* working directory inside the view */
	char *hostname;
	char *home; /* $HOME inside the view */
	struct ab_mount *mounts;
	size_t n_mounts;
	/* overlay: a checkpoint is refused once the caller's layers hold this
	 * many bytes (--layer-quota, docs/checkpoints.md); 0: no bound */
	unsigned long long layer_quota;

	/* the umask of the sandbox's processes (its init sets it);
	 * umask_set false: the caller's, inherited. A detached sandbox's
	 * launcher narrows its own (077) and keeps the caller's here */
	mode_t umask;
	bool umask_set;

	uid_t uid, gid;		  /* identity inside the sandbox */
	uid_t host_uid, host_gid; /* what that identity is on the host */
	bool uid_set, gid_set, host_uid_set, host_gid_set;

	enum ab_net_mode net;
	char **net_rules; /* --net allow=, deny=, max-conns=, rate= values, in order */
	size_t n_net_rules;
	enum ab_env_policy env_policy;
	char **pass_env; /* names passed through even if they look secret */
	size_t n_pass_env;
	char **set_env; /* NAME=VALUE set explicitly */
	size_t n_set_env;

	char **protect; /* workspace-relative paths kept read-only if they exist */
	size_t n_protect;
	char **unprotect; /* taken out of the default list */
	size_t n_unprotect;
	/* --protect-created: what becomes of a protected path a command
	 * created in a direct workspace that the host would run (a .git/config
	 * naming a program, an executable hook): renamed aside, or only
	 * reported */
	enum ab_protect_created {
		AB_PROTECT_CREATED_QUARANTINE = 0,
		AB_PROTECT_CREATED_REPORT,
	} protect_created;

	/* limits and results */
	unsigned long long memory; /* bytes; 0: no limit */
	unsigned cpu_millis;	   /* thousandths of a core; 0: no limit */
	unsigned long pids;	   /* 0: no limit */
	char *cgroup_parent;	   /* where to make the sandbox's cgroup, or NULL */
	bool pids_set;		   /* pids asked for (--pids), not the default */
	/* --limits best: a limit asked for that cannot hold as asked is
	 * dropped and said; false (--limits full): it is an error (125) */
	bool limits_best;
	unsigned long long timeout_ms;	   /* 0: none */
	unsigned long long kill_after_ms;  /* SIGTERM -> SIGKILL grace */
	unsigned long long max_timeout_ms; /* requested timeouts are clamped to it; 0: none */
	bool timeout_set;		   /* --timeout given (a profile or the command line) */
	bool model_commits; /* agentbox mcp --model-commits: commit and discard as tools */
	/* the defaults files applied (cli/defaults.c), for agentbox check */
	char *defaults_files[2];
	size_t n_defaults_files;
	bool max_timeout_set;	       /* --max-timeout given */
	unsigned long long tmpfs_size; /* bytes, for /tmp, $HOME and --tmpfs */
	struct ab_rlimit {
		int resource;
		unsigned long long value; /* RLIM_INFINITY for unlimited */
		bool by_user;		  /* from --rlimit (a default is lowered to fit) */
	} rlimits[16];
	size_t n_rlimits;
	char *report; /* FILE, or fd:N; NULL for none */
	bool capture; /* output into the report instead of passing through */
	bool tty;     /* run -t: a new terminal inside, relayed to the caller's */
	bool merge_output;
	bool output_base64;
	unsigned long long max_output; /* bytes kept per stream */

	char *seccomp;	  /* default, strict, permissive, none, or a profile file */
	bool no_landlock; /* --landlock off */
	enum ab_isolation isolation;
	unsigned isolation_missing; /* set by agentbox: AB_MISSING_* */

	char **argv; /* the command; NULL-terminated */
	size_t argc;
	/* ab_run returns once the command's cgroups are removed, without
	 * waiting for the sandbox's killed pid 1 to finish ending (its
	 * namespaces' teardown), for a caller that exits next: the kernel
	 * reaps it. Only where the init could leave every cgroup (v1
	 * hierarchies, docs/install.md); elsewhere ab_run still waits.
	 * agentbox run sets it; a caller that lives on leaves it false, or
	 * the init stays its zombie child. */
	bool exit_after_run;

	/* agentbox serve */
	unsigned max_concurrent; /* commands running at once (default 8) */
	char *audit_log;	 /* FILE to append the audit log to, or NULL */

	bool quiet; /* --quiet: none of agentbox's own lines but errors */
	/* Called with one line for the user (a warning or notice) while the
	 * sandbox is set up; NULL to drop them. Not owned. */
	void (*notice)(const char *line);
};

void ab_config_init(struct ab_config *cfg);
void ab_config_free(struct ab_config *cfg);

/* Parse the options of `agentbox run` (argv[0] is "run"). On success the
 * config holds the command; *help is set when --help was asked for.
 * Every value is checked here, before anything is created. */
int ab_config_parse_run(struct ab_config *cfg, int argc, char **argv, bool *help,
			struct ab_error *err);
/* The same for `agentbox serve` (argv[0] is "serve"): no command; adds
 * --max-concurrent and --audit-log. */
int ab_config_parse_serve(struct ab_config *cfg, int argc, char **argv, bool *help,
			  struct ab_error *err);

/* Resolve defaults that depend on the caller (workspace, identity) and check
 * the paths on the host. Called by ab_run() and by tests. */
int ab_config_finish(struct ab_config *cfg, struct ab_error *err);

/* Bytes of one captured stream, as kept (head, marker, tail). */
struct ab_output {
	char *data; /* NULL when not captured */
	size_t len;
	unsigned long long total; /* bytes the command wrote, before truncation */
	bool truncated;
};

/* Connections through the --net allow= proxy, one entry per host and port. */
struct ab_net_conn {
	char host[254];
	unsigned port;
	unsigned long count;
	char why[120]; /* denied: the reason */
};
struct ab_net_report {
	bool on; /* the sandbox has the proxy (else no "network" in results) */
	struct ab_net_conn *allowed, *denied;
	size_t n_allowed, n_denied;
	unsigned long dropped; /* connections past the distinct entries kept */
	char failed[96];       /* "network helper died (signal N)": the network is closed */
};

/* Outcome of one sandboxed command. Release with ab_result_free(). */
struct ab_result {
	int exit_code; /* the status `agentbox run` exits with (124 on timeout) */
	int signal;    /* signal that ended the command, or 0 */
	bool timed_out;
	unsigned long long duration_ms;
	unsigned long long cpu_user_ms, cpu_system_ms;
	unsigned long long max_rss_kb;
	struct ab_output out, err;     /* with --merge-output, everything is in out */
	unsigned long long timeout_ms; /* the timeout in force, 0: none */
	bool oom_killed;	       /* from the cgroup's own events */
	/* forks the pids cgroup refused during the command (pids.events);
	 * 0 where the limit is RLIMIT_NPROC, which counts none. Not in the
	 * JSON result: agentbox run says it on stderr */
	unsigned long long pids_refused;
	/* how each limit was applied: "cgroup", "rlimit", "unavailable",
	 * "not set", with the reason when unavailable */
	struct ab_limit_report {
		const char *how;
		char why[200];
	} memory, cpu, pids;
	const char *cgroup_version; /* "v2", "v1" or "none" */
	char cgroup_path[512];	    /* below the hierarchy roots, "" when none */
	int landlock_abi;	    /* Landlock ABI in force, 0 when none */
	unsigned isolation_missing; /* layers --isolation best dropped, 0: full */
	/* protected workspace paths the command created, removed or replaced;
	 * NULL-terminated, or NULL when none */
	char **protected_changed;
	/* those of protected_changed that did not exist before and are as
	 * `git init` makes them (.git/config of core defaults, .git/hooks of
	 * samples): `run` reports them without a warning */
	char **protected_created;
	/* protected files a write to was refused (seen from the lock file git
	 * makes beside them: FILE.lock), or NULL */
	char **protected_refused;
	/* protected paths the command created that the host would run, put
	 * out of effect (--protect-created quarantine): renamed aside in their
	 * own directory */
	struct ab_quarantined {
		char *path;	/* workspace-relative: the protected path or its parent */
		char *reason;	/* "sets core.fsmonitor" */
		char *moved_to; /* workspace-relative, or NULL: it could not be moved */
		char *error;	/* why not, when moved_to is NULL */
	} * quarantined;
	size_t n_quarantined;
	/* syscalls the seccomp profile denied, most frequent first */
	struct ab_denied_syscall {
		char name[32];
		unsigned long count;
	} * denied;
	size_t n_denied;
	struct ab_net_report network; /* with --net allow= */

	/* session commands only */
	bool cancelled; /* ended by ab_session_cancel() */
	/* with keep_background: processes the command left running (pids in
	 * the sandbox) and the file in the sandbox their output goes to */
	struct ab_background {
		int pid;
		char command[20];
	} * background;
	size_t n_background;
	char background_log[64];
};

void ab_result_free(struct ab_result *res);

/* Write the result as one JSON object and a newline (docs/result.md) to fd.
 * err, when not NULL, is agentbox's own failure: then the command fields
 * are null and "error" holds it. */
int ab_result_write_json(const struct ab_config *cfg, const struct ab_result *res,
			 const struct ab_error *failure, int fd, struct ab_error *err);

/* Open where --report points: a file (created or truncated, 0644) or an
 * inherited fd:N. Returns the fd to write to (the caller closes it only
 * when it was a file: *owned). Checked before the sandbox is built. */
int ab_report_open(const char *spec, bool *owned, struct ab_error *err);

/* Build the sandbox, run cfg->argv in it with the caller's stdin, stdout and
 * stderr, wait for it and tear everything down: a session of one command
 * (ab_session_open, ab_session_start with the caller's fds, close). Returns 0 when the command
 * ran (whatever its status, see *res) and a negative errno when the sandbox
 * could not be built. */
int ab_run(struct ab_config *cfg, struct ab_result *res, struct ab_error *err);

/* Sessions: one sandbox, many commands (agentbox serve is a loop over
 * these; docs/c-api.md has an example).
 *
 * ab_session_open() builds the sandbox from cfg (which must outlive the
 * session; cfg->argv is not used). Commands start with ab_session_start()
 * and run concurrently; ab_session_dispatch() does the supervision (output,
 * timeouts, results) and calls back with each event. ab_session_fd() is a
 * descriptor that is readable whenever dispatch has work, for a caller's
 * poll loop. ab_session_exec() runs one command to its end. A session is
 * used from one thread. */
struct ab_session;

struct ab_exec {
	char *const *argv;	       /* run directly; NULL-terminated */
	const char *cwd;	       /* in the view; NULL: the session's */
	char *const *env;	       /* NAME=VALUE added, NULL-terminated, or NULL */
	unsigned long long timeout_ms; /* 0: the session's; clamped to its maximum */
	const char *stdin_data;	       /* NULL: stdin is /dev/null */
	size_t stdin_len;
	unsigned long long max_output; /* bytes kept per stream; 0: the session's */
	bool merge_output;
	bool stream; /* deliver AB_EVENT_OUTPUT as output is read */
	bool keep_background;
	bool no_timeout; /* no deadline: it runs until cancelled (a file op's watch) */
	/* Instead of argv: a file operation of the protocol (docs/protocol.md,
	 * "File operations") as one JSON object with "op" and the operation's
	 * fields, paths absolute in the view. A process of the sandbox does it
	 * with the sandbox's credentials; the result's stdout is its JSON reply
	 * (merge_output, stream and keep_background do not apply; of fds only
	 * fds[0] does: the bulk path's pipe, src/files/fileop_host.h). */
	const char *file_op;
	/* The command's stdin, stdout and stderr as the caller's own fds
	 * (fds[0..2], each -1 for the default above: stdin_data or
	 * /dev/null; the captured pipe), or NULL. They are passed into the
	 * sandbox as they are: a terminal stays a terminal, and output that
	 * goes there is neither captured nor counted. */
	const int *fds;
	/* stdin_stream: the command's stdin is a pipe kept open, written
	 * with ab_session_stdin (stdin_data and fds[0] do not apply). */
	bool stdin_stream;
	/* pty: a new terminal made inside the sandbox (its own devpts), of
	 * pty_rows x pty_cols, the command's controlling terminal and its
	 * stdin, stdout and stderr; its master stays with the session:
	 * output is one stream (1), stdin is written with ab_session_stdin,
	 * the size changed with ab_session_resize (fds, stdin_data,
	 * merge_output and keep_background do not apply). */
	bool pty;
	unsigned short pty_rows, pty_cols;
};

enum ab_event_kind {
	AB_EVENT_OUTPUT, /* a chunk of a command's output (stream only) */
	AB_EVENT_RESULT, /* a command ended: result, or error when it failed */
	AB_EVENT_STDIN,	 /* ab_session_stdin's data written; error: why not */
};

struct ab_event {
	enum ab_event_kind kind;
	unsigned long long tag; /* as given to ab_session_start() */
	int stream;		/* OUTPUT: 1 stdout (or merged output), 2 stderr */
	const char *data;	/* OUTPUT */
	size_t len;
	struct ab_result *result;     /* RESULT: the callee may keep it by zeroing *result */
	const struct ab_error *error; /* RESULT: NULL, or why there is no result */
};

typedef void (*ab_event_fn)(const struct ab_event *ev, void *arg);

struct ab_session_stats {
	unsigned long long uptime_ms;
	unsigned long long commands_run;
	size_t running;
	struct ab_denied_syscall *denied; /* the session's total; owned by the session */
	size_t n_denied;
	bool have_cgroup;
	long long memory_current, memory_peak, pids_current; /* -1: unknown */
	long long cpu_user_ms, cpu_system_ms;		     /* -1: unknown */
};

int ab_session_open(struct ab_config *cfg, struct ab_session **out, struct ab_error *err);
/* The limits as applied (memory, cpu, pids, cgroup, timeout_ms) and the
 * Landlock ABI, in the shape of a result; and the sandbox's id. */
const struct ab_result *ab_session_limits(const struct ab_session *s);
const char *ab_session_id(const struct ab_session *s);
/* Start a command. -EBUSY when cfg->max_concurrent are running; -EINVAL
 * (with err) for a bad request; the command's events carry tag. */
int ab_session_start(struct ab_session *s, const struct ab_exec *x, unsigned long long tag,
		     struct ab_error *err);
/* End a running command like a timeout does; its result says cancelled.
 * -ESRCH when no command has that tag. */
int ab_session_cancel(struct ab_session *s, unsigned long long tag);
/* Send sig to a running command's process group, as `agentbox run`
 * forwards SIGINT and the like. -ESRCH when no command has that tag. */
int ab_session_signal(struct ab_session *s, unsigned long long tag, int sig);
size_t ab_session_running(const struct ab_session *s);
/* Write len bytes to the stdin of a command started with stdin_stream or
 * pty, then with eof close it (a pty: its EOF character, Ctrl-D, is
 * written instead). 1 when all of it was written at once (no event
 * follows); else 0: the data is copied and written as the command reads
 * it, and an AB_EVENT_STDIN event says when all of it is (or why not). One
 * write at a time per command: -EBUSY while one is in progress. -ESRCH
 * when no command has that tag, -EINVAL (with err) when it has no
 * streamed stdin, -EPIPE when its stdin is closed. */
int ab_session_stdin(struct ab_session *s, unsigned long long tag, const char *data, size_t len,
		     bool eof, struct ab_error *err);
/* A pty command's terminal size (its foreground group gets SIGWINCH).
 * -ESRCH, or -EINVAL (with err) when the command has no pty. */
int ab_session_resize(struct ab_session *s, unsigned long long tag, unsigned rows, unsigned cols,
		      struct ab_error *err);
/* Backpressure for a slow reader of the OUTPUT events: while paused, the
 * output pipes of the commands started with stream are not read (a
 * command that fills its pipe blocks there); timeouts, cancels, signals
 * and every other command go on. An OUTPUT callback may pause: no more
 * OUTPUT events come until resumed, but for one case: when the sandbox
 * dies, what its commands' pipes still hold is read at once, and comes
 * as OUTPUT events before their RESULT events. */
void ab_session_pause_output(struct ab_session *s, bool pause);
int ab_session_fd(const struct ab_session *s);
/* Wait up to timeout_ms (-1: forever, 0: not at all) for work and do it.
 * Returns 0, or a negative errno when the sandbox is gone: then every
 * running command has had its RESULT event with an error, and the session
 * can only be closed. */
int ab_session_dispatch(struct ab_session *s, int timeout_ms, ab_event_fn fn, void *arg,
			struct ab_error *err);
/* Run one command to its end (other commands' events are dropped). */
int ab_session_exec(struct ab_session *s, const struct ab_exec *x, struct ab_result *res,
		    struct ab_error *err);
int ab_session_stats(struct ab_session *s, struct ab_session_stats *st);
/* Cheaply, for a status line: the stats without the denials, and of the
 * cgroup its memory_current alone (the others -1). */
int ab_session_status(struct ab_session *s, struct ab_session_stats *st);
/* The file the cgroup's memory_current is read from (out: a path); -ENOENT
 * without one. */
int ab_session_memory_file(struct ab_session *s, char *out, size_t size);
/* Pause (freeze) or resume every process of the sandbox with the cgroup
 * freezer; -ENOTSUP (with err) where the sandbox has no cgroup to freeze.
 * Deadlines keep running while paused. */
int ab_session_freeze(struct ab_session *s, bool freeze, struct ab_error *err);
/* Idle (nothing running, no client): let the idle command supervisors and
 * their warm shells go (the next command's is made at its start) and give
 * back the memory malloc holds free. -EAGAIN while a command runs or a
 * supervisor asked for is on its way: try again later. */
int ab_session_idle_trim(struct ab_session *s);
/* With --net allow=: replace the allow and/or the deny patterns (NULL:
 * keep that list) for connections made from now on. -EINVAL (with err) for
 * a bad pattern or a session without the proxy; nothing changes then. */
int ab_session_net(struct ab_session *s, char *const *allow, size_t n_allow, char *const *deny,
		   size_t n_deny, struct ab_error *err);
/* The patterns in force (pointers valid until the next change), and what the
 * proxy allowed and denied since the session started; NULL: no proxy. */
const struct ab_net_report *ab_session_net_report(const struct ab_session *s);
size_t ab_session_net_rules(const struct ab_session *s, bool deny, const char **out, size_t max);
/* Kill every process of the sandbox, remove its cgroup, free. Running
 * commands get no events. */
void ab_session_close(struct ab_session *s);

/* Build the environment a command gets under cfg's policy from envp.
 * Returns a NULL-terminated, heap-allocated array (free with ab_env_free). */
int ab_env_build(const struct ab_config *cfg, char *const *envp, char ***out, struct ab_error *err);
void ab_env_free(char **env);
/* True when an environment variable name looks like it holds a secret. */
bool ab_env_name_is_secret(const char *name);

/* "64K", "256M", "1G", "1024": bytes. Rejects overflow and junk. */
int ab_parse_size(const char *s, unsigned long long *out);
/* "500ms", "30s", "2m", "1h", "10" (seconds): milliseconds. "none" and
 * "0" give 0 (no limit). */
int ab_parse_duration(const char *s, unsigned long long *ms);

#ifdef __cplusplus
}
#endif

#endif
