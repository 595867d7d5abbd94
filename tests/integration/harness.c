#include "harness.h"
#include "view/idmap.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <json-c/json.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_DIRS 8

static char *tmpdirs[MAX_DIRS];
static int n_tmpdirs;

void require_sandbox(void)
{
	pid_t p = fork();
	if (p == 0)
		_exit(unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) == 0 ? 0 : 1);
	int st = 0;
	waitpid(p, &st, 0);
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return;
	if (getenv("AGENTBOX_MUST_WORK"))
		cr_assert_fail(
			"this host cannot create user namespaces, and AGENTBOX_MUST_WORK is set");
	cr_skip_test("this host cannot create user namespaces");
}

uid_t test_host_uid(void)
{
	return geteuid() == 0 ? AB_SANDBOX_HOST_ID : geteuid();
}

gid_t test_host_gid(void)
{
	return geteuid() == 0 ? AB_SANDBOX_HOST_ID : getegid();
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void test_tmp_cleanup(void)
{
	for (int i = 0; i < n_tmpdirs; i++) {
		nftw(tmpdirs[i], rm_one, 16, FTW_DEPTH | FTW_PHYS);
		free(tmpdirs[i]);
	}
	n_tmpdirs = 0;
}

char *test_tmpdir(void)
{
	cr_assert_lt(n_tmpdirs, MAX_DIRS);
	char tmpl[] = "/tmp/agentbox-test.XXXXXX";
	char *d = mkdtemp(tmpl);
	cr_assert_not_null(d, "mkdtemp: %s", strerror(errno));
	if (n_tmpdirs == 0)
		atexit(test_tmp_cleanup);
	tmpdirs[n_tmpdirs] = strdup(d);
	/* as root, owned by root: agentbox idmaps it to the sandbox user */
	cr_assert_eq(chmod(d, 0755), 0);
	return tmpdirs[n_tmpdirs++];
}

static void read_into(int fd, char *buf, size_t cap, size_t *len)
{
	char tmp[4096];
	ssize_t n = read(fd, tmp, sizeof(tmp));
	if (n <= 0)
		return;
	size_t room = cap - 1 - *len;
	size_t take = (size_t)n < room ? (size_t)n : room;
	memcpy(buf + *len, tmp, take);
	*len += take;
	buf[*len] = '\0';
}

static int status_to_code(int st)
{
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 128 + WTERMSIG(st);
	return -1;
}

int run_raw(const char *const *argv, struct proc_result *res, const struct run_opts *o)
{
	static const struct run_opts none = {0};
	if (!o)
		o = &none;
	memset(res, 0, sizeof(*res));
	int out[2], errp[2], in[2];
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(errp, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
	int master = -1;
	char *slave_name = NULL;
	if (o->with_pty) {
		master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
		cr_assert_geq(master, 0);
		cr_assert_eq(grantpt(master), 0);
		cr_assert_eq(unlockpt(master), 0);
		slave_name = ptsname(master);
		cr_assert_not_null(slave_name);
	}
	pid_t p = fork();
	cr_assert_geq(p, 0);
	if (p == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(errp[1], 2);
		if (o->with_pty) {
			/* a new session whose controlling terminal is the pty */
			if (setsid() < 0)
				_exit(99);
			int s = open(slave_name, O_RDWR);
			if (s < 0 || ioctl(s, TIOCSCTTY, 0) < 0)
				_exit(99);
			dup2(s, 0);
		}
		if (o->leak_fd > 2) {
			int fd = open("/dev/null", O_RDONLY);
			if (fd < 0 || dup2(fd, o->leak_fd) < 0)
				_exit(99);
		}
		for (const char *const *e = o->env; e && *e; e++)
			putenv((char *)*e);
		if (o->cwd && chdir(o->cwd) < 0)
			_exit(99);
		execv(argv[0], (char *const *)argv);
		_exit(98);
	}
	close(in[0]);
	close(out[1]);
	close(errp[1]);
	if (o->stdin_data) {
		ssize_t w = write(in[1], o->stdin_data, strlen(o->stdin_data));
		(void)w;
	}
	close(in[1]);

	size_t olen = 0, elen = 0;
	struct pollfd pfd[2] = {{.fd = out[0], .events = POLLIN},
				{.fd = errp[0], .events = POLLIN}};
	time_t deadline = time(NULL) + 60;
	while ((pfd[0].fd >= 0 || pfd[1].fd >= 0) && time(NULL) < deadline) {
		if (poll(pfd, 2, 1000) <= 0)
			continue;
		for (int i = 0; i < 2; i++) {
			if (!pfd[i].revents)
				continue;
			size_t before = i ? elen : olen;
			read_into(pfd[i].fd, i ? res->err : res->out, sizeof(res->out),
				  i ? &elen : &olen);
			if ((i ? elen : olen) == before && (pfd[i].revents & (POLLHUP | POLLERR))) {
				close(pfd[i].fd);
				pfd[i].fd = -1;
			}
		}
	}
	if (pfd[0].fd >= 0 || pfd[1].fd >= 0)
		kill(p, SIGKILL);
	int st;
	waitpid(p, &st, 0);
	for (int i = 0; i < 2; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	if (master >= 0)
		close(master);
	res->exit_code = status_to_code(st);
	return res->exit_code;
}

/* AGENTBOX_BIN run [--workspace WS] [--cgroup-parent P]: returns the count */
static int common_argv(const char **argv, const char *ws)
{
	int n = 0;
	argv[n++] = AGENTBOX_BIN;
	argv[n++] = "run";
	if (ws) {
		argv[n++] = "--workspace";
		argv[n++] = ws;
	}
	/* CI gives the unprivileged user a delegated cgroup subtree */
	const char *parent = getenv("AGENTBOX_TEST_DELEGATED_PARENT");
	if (parent && *parent) {
		argv[n++] = "--cgroup-parent";
		argv[n++] = parent;
	}
	return n;
}

static int build_argv(const char **argv, int cap, const char *ws, va_list ap)
{
	int n = common_argv(argv, ws);
	const char *a;
	while ((a = va_arg(ap, const char *)) && n < cap - 1)
		argv[n++] = a;
	argv[n] = NULL;
	return n;
}

int run_in(const char *ws, struct proc_result *res, const struct run_opts *o, ...)
{
	const char *argv[64];
	va_list ap;
	va_start(ap, o);
	build_argv(argv, 64, ws, ap);
	va_end(ap);
	return run_raw(argv, res, o);
}

pid_t spawn_in(const char *ws, int *out_fd, ...)
{
	const char *argv[64];
	va_list ap;
	va_start(ap, out_fd);
	build_argv(argv, 64, ws, ap);
	va_end(ap);
	int out[2];
	cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
	pid_t p = fork();
	cr_assert_geq(p, 0);
	if (p == 0) {
		dup2(out[1], 1);
		int null = open("/dev/null", O_RDONLY);
		dup2(null, 0);
		execv(argv[0], (char *const *)argv);
		_exit(98);
	}
	close(out[1]);
	*out_fd = out[0];
	return p;
}

int count_procs_with(const char *needle)
{
	DIR *d = opendir("/proc");
	cr_assert_not_null(d);
	int n = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		char path[300], buf[4096];
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (len <= 0)
			continue;
		for (ssize_t i = 0; i < len; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		buf[len] = '\0';
		if (strstr(buf, needle))
			n++;
	}
	closedir(d);
	return n;
}

char *chomp(char *s)
{
	size_t n = strlen(s);
	if (n && s[n - 1] == '\n')
		s[n - 1] = '\0';
	return s;
}

struct json_object *run_with_report(const char *ws, const char *const *args,
				    struct proc_result *res)
{
	char report[4200];
	snprintf(report, sizeof(report), "%s/.report.json", ws);
	const char *argv[48];
	int n = common_argv(argv, ws);
	argv[n++] = "--report";
	argv[n++] = report;
	for (const char *const *a = args; *a && n < 47; a++)
		argv[n++] = *a;
	argv[n] = NULL;
	run_raw(argv, res, NULL);
	json_object *j = json_object_from_file(report);
	cr_assert_not_null(j, "no report; exit %d, stderr: %s", res->exit_code, res->err);
	unlink(report);
	return j;
}

struct json_object *report_get(struct json_object *o, const char *key)
{
	json_object *v = NULL;
	cr_assert(json_object_object_get_ex(o, key, &v), "report lacks %s", key);
	return v;
}
