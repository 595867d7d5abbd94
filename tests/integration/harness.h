/* Running the real agentbox binary from integration tests. */
#ifndef AB_TEST_HARNESS_H
#define AB_TEST_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct proc_result {
	int exit_code; /* 128+N when killed by signal N, -1 if it never ended */
	char out[65536];
	char err[65536];
};

struct run_opts {
	const char *stdin_data; /* NULL: /dev/null */
	bool with_pty;		/* run with a fresh pty as the controlling terminal */
	int leak_fd;		/* if > 2: an fd without O_CLOEXEC left open at this number */
	const char *const *env; /* extra NAME=VALUE set in agentbox's environment */
	const char *cwd;	/* directory to start agentbox in */
};

/* Skip (or fail, when AGENTBOX_MUST_WORK is set) if this host cannot create
 * user namespaces at all. */
void require_sandbox(void);

/* A fresh temp directory the sandbox user may write: owned by the test's
 * user, root included, which agentbox idmaps to the sandbox user. Removed
 * (recursively) by test_tmp_cleanup(). */
char *test_tmpdir(void);
void test_tmp_cleanup(void);

/* The uid/gid the sandbox user has on the host in these tests (inside
 * too): agentbox's own as root (idmap.h), else the test's. What it creates
 * in a test_tmpdir() is owned by the test's own uid/gid on the host. */
uid_t test_host_uid(void);
gid_t test_host_gid(void);

/* agentbox run --workspace WS ARGS...; NULL-terminated
 * args. ws may be NULL (then no --workspace is given). */
int run_in(const char *ws, struct proc_result *res, const struct run_opts *o, ...)
	__attribute__((sentinel));
/* The same with an argv array, exactly as given after "agentbox". */
int run_raw(const char *const *argv, struct proc_result *res, const struct run_opts *o);

/* Start agentbox in the background with stdout to a pipe (*out_fd). */
pid_t spawn_in(const char *ws, int *out_fd, ...) __attribute__((sentinel));

struct json_object;

/* agentbox run --workspace WS [--cgroup-parent] --report WS/.report.json
 * ARGS...: the parsed report (the test fails without one). */
struct json_object *run_with_report(const char *ws, const char *const *args,
				    struct proc_result *res);
/* o[key], which must be there (its value may be null). */
struct json_object *report_get(struct json_object *o, const char *key);

/* Number of host processes whose command line contains needle. */
int count_procs_with(const char *needle);

/* Strip one trailing newline in place and return s. */
char *chomp(char *s);

#endif
