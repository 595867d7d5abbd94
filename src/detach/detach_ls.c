/* agentbox ls and rm: what the caller's detached sandboxes are doing,
 * and their end, leaving nothing (docs/detached.md). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "ckpt/ckpt.h"
#include "detach/detach.h"
#include "detach/detach_lines.h"
#include "layer/layer.h"
#include "util/util.h"

/* How long rm waits for a stopped launcher to be gone; and ls lists at
 * most this many sandboxes. */
#define STOP_TIMEOUT_MS 15000
#define LS_MAX		4096
/* ls asks this many sandboxes at once, each for this long at most. */
#define LS_PARALLEL   64
#define LS_TIMEOUT_MS 5000

static unsigned long long ls_now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (unsigned long long)t.tv_sec * 1000 + (unsigned long long)t.tv_nsec / 1000000;
}

static const char usage_ls[] =
	"Usage: agentbox ls [--json]\n"
	"\n"
	"List your detached sandboxes (agentbox create): id, name, state (running,\n"
	"dead: its launcher is gone, agentbox rm removes what is left), when it was\n"
	"made, how long it has been idle, commands running, whether a client is\n"
	"attached, the memory of its cgroup, the bytes its overlay workspace's\n"
	"layers hold on disk (every checkpoint's; - in direct mode).\n"
	"\n"
	"  --json   one JSON array of objects instead\n";

static const char usage_rm[] =
	"Usage: agentbox rm [-f] ID...\n"
	"\n"
	"End each sandbox and leave nothing of it: no process, socket, cgroup,\n"
	"mount or state file. A sandbox in use (a client attached, commands\n"
	"running or queued) is ended only with -f. A dead one (its launcher\n"
	"killed) is cleaned up.\n";

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The ids in root, sorted (NULL-terminated; NULL on error). */
static char **list_ids(const char *root, size_t *n)
{
	*n = 0;
	int fd = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	char **ids = calloc(LS_MAX + 1, sizeof(char *));
	if (!d || !ids) {
		if (d)
			closedir(d);
		else if (fd >= 0)
			close(fd);
		free(ids);
		return NULL;
	}
	struct dirent *e;
	while ((e = readdir(d)) && *n < LS_MAX) {
		struct stat st;
		if (!detach_id_valid(e->d_name) ||
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !S_ISDIR(st.st_mode))
			continue;
		if (!(ids[*n] = strdup(e->d_name)))
			break;
		(*n)++;
	}
	closedir(d);
	qsort(ids, *n, sizeof(char *), cmp_str);
	return ids;
}

static json_object *get(json_object *o, const char *key)
{
	json_object *v = NULL;
	return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

/* The bytes of the files in an overlay workspace's layer directory, every
 * checkpoint's layer with them (walked as a review walks: ckpt.h); NULL in
 * direct mode or when it is gone. */
static json_object *layer_disk(json_object *dir)
{
	struct stat st;
	const char *d = dir ? json_object_get_string(dir) : NULL;
	if (!d || lstat(d, &st) < 0 || !S_ISDIR(st.st_mode))
		return NULL;
	return json_object_new_int64(ckpt_tree_bytes(d));
}

/* One sandbox as ls shows it: r and status (consumed) are its status
 * request's outcome; st its state file (consumed; NULL: read here). */
static json_object *entry(const char *root, const char *id, int r, json_object *status,
			  json_object *st, const struct ab_error *err)
{
	if (!st)
		st = detach_state_read(root, id);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "id", json_object_new_string(id));
	json_object_object_add(o, "name", json_object_get(get(st, "name")));
	json_object_object_add(o, "state",
			       r == 0		    ? json_object_get(get(status, "state"))
			       : r == -ECONNREFUSED ? json_object_new_string("dead")
						    : json_object_new_string("unknown"));
	json_object_object_add(o, "created", json_object_get(get(st, "created")));
	json_object_object_add(o, "pid", json_object_get(get(st, "pid")));
	json_object_object_add(o, "workspace", json_object_get(get(st, "workspace")));
	json_object_object_add(o, "disk", layer_disk(get(st, "layer")));
	static const char *const live[] = {"idle_ms", "running", "queued", "attached", "memory"};
	for (size_t i = 0; i < AB_ARRAY_SIZE(live); i++)
		json_object_object_add(o, live[i], json_object_get(get(status, live[i])));
	if (r < 0 && r != -ECONNREFUSED)
		json_object_object_add(o, "error", json_object_new_string(err->msg));
	json_object_put(st);
	json_object_put(status);
	return o;
}

/* A released idle sandbox's status, from its idle file (detach.h) when
 * its launcher is the one that wrote it, without asking it, and its state
 * file into *state; NULL: ask. */
static json_object *idle_status(const char *root, const char *id, json_object **state)
{
	json_object *idle = detach_json_read(root, id, "idle"), *st = NULL, *o = NULL;
	if (idle)
		st = detach_state_read(root, id);
	json_object *start = get(idle, "start"), *since = get(idle, "since_ms"),
		    *pid = get(st, "pid"), *mf = get(idle, "memory_file");
	if (start && since && pid &&
	    detach_pid_start((pid_t)json_object_get_int(pid)) == json_object_get_int64(start) &&
	    json_object_get_int64(start) > 0) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		long long now = (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000,
			  ms = now - json_object_get_int64(since);
		o = json_object_new_object();
		json_object_object_add(o, "state", json_object_new_string("running"));
		json_object_object_add(o, "idle_ms", json_object_new_int64(ms > 0 ? ms : 0));
		json_object_object_add(o, "running", json_object_new_int64(0));
		json_object_object_add(o, "queued", json_object_new_int64(0));
		json_object_object_add(o, "attached", json_object_new_boolean(false));
		const char *path = mf ? json_object_get_string(mf) : NULL;
		char buf[64];
		cleanup_fd int fd = path && !strncmp(path, "/sys/fs/cgroup/", 15)
					    ? open(path, O_RDONLY | O_CLOEXEC)
					    : -1;
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		if (n > 0) {
			buf[n] = 0;
			json_object_object_add(o, "memory",
					       json_object_new_int64(strtoll(buf, NULL, 10)));
		}
	}
	json_object_put(idle);
	if (o)
		*state = st;
	else
		json_object_put(st);
	return o;
}

/* One status request on its way. */
struct ask {
	size_t i; /* its sandbox's index */
	size_t len;
	char buf[DETACH_CTL_REPLY_MAX];
};

/* A status request's end: its entry into all at i. */
static void ask_done(const char *root, char **ids, json_object *all, struct ask *a, int r)
{
	json_object *status = NULL;
	struct ab_error err = {0};
	a->buf[a->len] = 0;
	if (r == 0 && !memchr(a->buf, '\n', a->len))
		r = -EPIPE;
	r = detach_ctl_parse(ids[a->i], "status", a->buf, r, &status, &err);
	json_object_array_put_idx(all, a->i, entry(root, ids[a->i], r, status, NULL, &err));
}

/* Every sandbox's status into all, in the order of ids: a released idle
 * one's from its idle file, the others' asked, LS_PARALLEL requests on
 * their way at once, so that n launchers answer in about
 * the time of n / LS_PARALLEL round trips; each gets LS_TIMEOUT_MS. */
static void ask_all(const char *root, char **ids, size_t n, json_object *all)
{
	struct ask *a = calloc(LS_PARALLEL, sizeof(*a));
	struct pollfd p[LS_PARALLEL];
	unsigned long long end[LS_PARALLEL];
	size_t next = 0, busy = 0;
	for (size_t k = 0; k < LS_PARALLEL; k++)
		p[k] = (struct pollfd){.fd = -1, .events = POLLIN};
	while (a && (next < n || busy)) {
		for (size_t k = 0; k < LS_PARALLEL && next < n; k++) {
			if (p[k].fd >= 0)
				continue;
			struct ab_error err = {0};
			json_object *st = NULL, *idle = idle_status(root, ids[next], &st);
			int fd = idle ? 0 : detach_ctl_send(root, ids[next], "status", &err);
			if (idle) {
				json_object_array_put_idx(
					all, next, entry(root, ids[next], 0, idle, st, &err));
			} else if (fd < 0) {
				json_object_array_put_idx(
					all, next, entry(root, ids[next], fd, NULL, NULL, &err));
			} else {
				a[k].i = next;
				a[k].len = 0;
				p[k].fd = fd;
				end[k] = ls_now_ms() + LS_TIMEOUT_MS;
				busy++;
			}
			next++;
		}
		if (!busy)
			continue;
		unsigned long long now = ls_now_ms(), first = ~0ull;
		for (size_t k = 0; k < LS_PARALLEL; k++)
			if (p[k].fd >= 0 && end[k] < first)
				first = end[k];
		int got = poll(p, LS_PARALLEL, first > now ? (int)(first - now) : 0);
		if (got < 0 && errno != EINTR)
			break;
		now = ls_now_ms();
		for (size_t k = 0; k < LS_PARALLEL; k++) {
			if (p[k].fd < 0)
				continue;
			int r = 1;
			if (p[k].revents) {
				ssize_t m = read(p[k].fd, a[k].buf + a[k].len,
						 sizeof(a[k].buf) - 1 - a[k].len);
				if (m > 0)
					a[k].len += (size_t)m;
				else if (m == 0 || (errno != EINTR && errno != EAGAIN))
					r = a[k].len ? 0 : -EPIPE;
				if (a[k].len && (memchr(a[k].buf, '\n', a[k].len) ||
						 a[k].len == sizeof(a[k].buf) - 1))
					r = 0;
			} else if (now >= end[k]) {
				r = -ETIMEDOUT;
			}
			if (r <= 0) {
				ask_done(root, ids, all, &a[k], r);
				close(p[k].fd);
				p[k].fd = -1;
				busy--;
			}
		}
	}
	for (size_t k = 0; k < LS_PARALLEL; k++)
		if (p[k].fd >= 0)
			close(p[k].fd);
	for (size_t i = 0; i < n; i++) /* out of memory, or poll failed */
		if (!json_object_array_get_idx(all, i)) {
			struct ab_error err = {.msg = "cannot ask it"};
			json_object_array_put_idx(all, i,
						  entry(root, ids[i], -ENOMEM, NULL, NULL, &err));
		}
	free(a);
}

static void fmt_age(char *buf, size_t n, long long ms)
{
	if (ms < 0)
		snprintf(buf, n, "-");
	else if (ms < 60000)
		snprintf(buf, n, "%llds", ms / 1000);
	else if (ms < 3600000)
		snprintf(buf, n, "%lldm", ms / 60000);
	else
		snprintf(buf, n, "%lldh", ms / 3600000);
}

static void print_row(json_object *o)
{
	char created[32] = "-", idle[16], mem[24] = "-", disk[24] = "-";
	json_object *c = get(o, "created"), *m = get(o, "memory"), *i = get(o, "idle_ms"),
		    *dk = get(o, "disk");
	if (c) {
		time_t t = (time_t)json_object_get_int64(c);
		struct tm tm;
		strftime(created, sizeof(created), "%Y-%m-%d %H:%M:%S", localtime_r(&t, &tm));
	}
	fmt_age(idle, sizeof(idle), i ? json_object_get_int64(i) : -1);
	if (m)
		snprintf(mem, sizeof(mem), "%.1fM", (double)json_object_get_int64(m) / 1048576);
	if (dk)
		snprintf(disk, sizeof(disk), "%.1fM", (double)json_object_get_int64(dk) / 1048576);
	json_object *run = get(o, "running"), *att = get(o, "attached");
	const char *name = json_object_get_string(get(o, "name"));
	printf("%-20s %-16s %-8s %-19s %-6s %-7s %-8s %-8s %s\n",
	       json_object_get_string(get(o, "id")), name ? name : "-",
	       json_object_get_string(get(o, "state")), created, idle,
	       run ? json_object_get_string(run) : "-",
	       att ? (json_object_get_boolean(att) ? "yes" : "no") : "-", mem, disk);
}

int detach_cli_ls(int argc, char **argv)
{
	bool json = false;
	int r = detach_simple_args(argc, argv, "ls", usage_ls, "--json", NULL, &json, NULL);
	if (r >= 0)
		return r;
	char root[PATH_MAX];
	struct ab_error err = {0};
	r = detach_root(root, sizeof(root), false, &err);
	if (r < 0 && r != -ENOENT) {
		fprintf(stderr, "agentbox: ls: %s\n", err.msg);
		return AB_EXIT_FAILURE;
	}
	size_t n = 0;
	char **ids = r < 0 ? NULL : list_ids(root, &n);
	json_object *all = json_object_new_array();
	ask_all(root, ids, n, all);
	if (json) {
		puts(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN));
	} else {
		printf("%-20s %-16s %-8s %-19s %-6s %-7s %-8s %-8s %s\n", "ID", "NAME", "STATE",
		       "CREATED", "IDLE", "RUNNING", "ATTACHED", "MEMORY", "DISK");
		for (size_t i = 0; i < n; i++)
			print_row(json_object_array_get_idx(all, i));
	}
	json_object_put(all);
	for (size_t i = 0; i < n; i++)
		free(ids[i]);
	free(ids);
	return 0;
}

/* Wait for pid's end (a pidfd: never another process that took its
 * number); false when it is still there after ms. */
static bool wait_gone(int pidfd, int ms)
{
	struct pollfd p = {.fd = pidfd, .events = POLLIN};
	return pidfd < 0 || poll(&p, 1, ms) > 0;
}

/* A dead sandbox: its cgroup (its launcher's leftovers), its files. */
static void clean_dead(const char *root, const char *id)
{
	json_object *st = detach_state_read(root, id);
	json_object *parent = get(st, "cgroup_parent");
	/* a v1 group stays busy for a moment after its last process is
	 * killed: again while some are left, 3 s at most */
	for (int i = 0;
	     i < 30 && ab_cgroup_reap_stale(parent ? json_object_get_string(parent) : NULL) > 0;
	     i++) {
		struct timespec ts = {0, 100 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	json_object_put(st);
	detach_remove(root, id);
	layer_sweep(); /* its layers, unless another sandbox (a fork) holds them */
}

static int rm_one(const char *root, const char *id, bool force)
{
	json_object *status = NULL;
	struct ab_error err = {0};
	int r = detach_ctl(root, id, "status", &status, &err);
	if (r == -ECONNREFUSED) {
		clean_dead(root, id);
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "agentbox: rm: %s\n", err.msg);
		return AB_EXIT_FAILURE;
	}
	json_object *att = get(status, "attached");
	long long busy = json_object_get_int64(get(status, "running")) +
			 json_object_get_int64(get(status, "queued"));
	if (!force && ((att && json_object_get_boolean(att)) || busy > 0)) {
		fprintf(stderr,
			"agentbox: rm: sandbox %s is in use (%s%lld command(s) running or "
			"queued): agentbox rm -f %s ends it anyway\n",
			id, att && json_object_get_boolean(att) ? "a client attached, " : "", busy,
			id);
		json_object_put(status);
		return AB_EXIT_FAILURE;
	}
	pid_t pid = (pid_t)json_object_get_int(get(status, "pid"));
	json_object_put(status);
	cleanup_fd int pidfd = pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
	r = detach_ctl(root, id, "stop", &status, &err);
	json_object_put(status);
	if (!wait_gone(pidfd, STOP_TIMEOUT_MS)) {
		if (!force) {
			fprintf(stderr,
				"agentbox: rm: sandbox %s did not end within %d s: agentbox rm -f "
				"%s kills its launcher\n",
				id, STOP_TIMEOUT_MS / 1000, id);
			return AB_EXIT_FAILURE;
		}
		syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		wait_gone(pidfd, STOP_TIMEOUT_MS);
	}
	clean_dead(root, id); /* nothing left, unless it was killed */
	return 0;
}

static const char usage_pause[] =
	"Usage: agentbox pause ID\n"
	"       agentbox resume ID\n"
	"\n"
	"Pause every process of sandbox ID with the cgroup freezer, or resume them.\n"
	"A client that connects resumes it too. Timeouts keep running while it is\n"
	"paused. The v1 freezer hierarchy's group on a v1 or hybrid host, else the\n"
	"cgroup v2 freezer; where the sandbox has neither (a plain user without a\n"
	"delegated --cgroup-parent) it cannot be paused, and says so (125).\n";

int detach_cli_pause(int argc, char **argv)
{
	if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		fputs(usage_pause, stdout);
		return 0;
	}
	if (argc != 2) {
		fprintf(stderr, "agentbox: %s: one sandbox id (agentbox %s ID)\n", argv[0],
			argv[0]);
		return AB_EXIT_FAILURE;
	}
	char root[PATH_MAX];
	struct ab_error err = {0};
	json_object *reply = NULL;
	int r = detach_id_valid(argv[1]) ? detach_root(root, sizeof(root), false, &err) : -ENOENT;
	if (r == -ENOENT)
		snprintf(err.msg, sizeof(err.msg), "no sandbox %s (agentbox ls lists them)",
			 argv[1]);
	if (r == 0)
		r = detach_ctl(root, argv[1], argv[0], &reply, &err);
	const char *type = reply ? json_object_get_string(get(reply, "type")) : NULL;
	if (r == 0 && type && !strcmp(type, "error")) {
		snprintf(err.msg, sizeof(err.msg), "sandbox %s: %s", argv[1],
			 json_object_get_string(get(reply, "message")));
		r = -1;
	}
	json_object_put(reply);
	if (r < 0) {
		fprintf(stderr, "agentbox: %s: %s\n", argv[0], err.msg);
		return AB_EXIT_FAILURE;
	}
	return 0;
}

int detach_cli_rm(int argc, char **argv)
{
	bool force = false;
	int i = 1, status = 0;
	for (; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-f") || !strcmp(argv[i], "--force")) {
			force = true;
		} else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			fputs(usage_rm, stdout);
			return 0;
		} else {
			return detach_bad_arg("rm", "unknown option", argv[i]);
		}
	}
	if (i >= argc) {
		fputs("agentbox: rm: which sandbox? (agentbox rm ID; agentbox ls lists them)\n",
		      stderr);
		return AB_EXIT_FAILURE;
	}
	char root[PATH_MAX];
	struct ab_error err = {0};
	int r = detach_root(root, sizeof(root), false, &err);
	for (; i < argc; i++) {
		if (!detach_id_valid(argv[i]) || r == -ENOENT) {
			fprintf(stderr, "agentbox: rm: no sandbox %s (agentbox ls lists them)\n",
				argv[i]);
			status = AB_EXIT_FAILURE;
		} else if (r < 0) {
			fprintf(stderr, "agentbox: rm: %s\n", err.msg);
			return AB_EXIT_FAILURE;
		} else if (rm_one(root, argv[i], force) != 0) {
			status = AB_EXIT_FAILURE;
		}
	}
	return status;
}
