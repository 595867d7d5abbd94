/* A detached sandbox's clients on unix sockets (serve_int.h). */

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <signal.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "files/fileop.h"
#include "sandbox/isolation.h"
#include "front/front_audit.h"
#include "serve/serve_input.h"
#include "serve/serve_int.h"
#include "session/result.h"
#include "session/result_say.h"
#include "util/proc.h"
#include "util/util.h"

/* A control client has this long to send its word and read the reply:
 * only our own uid can connect, and the CLI writes at once. */
#define CTL_TIMEOUT_MS 500

unsigned long long conn_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
}

static void conn_reply(int fd, json_object *o);

static void refuse(int fd, const char *code, const char *msg)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("error"));
	json_object_object_add(o, "id", NULL);
	json_object_object_add(o, "code", json_object_new_string(code));
	json_object_object_add(o, "message", json_object_new_string(msg));
	conn_reply(fd, o);
}

/* A connection from listening socket lfd whose peer runs as our uid, or
 * -1 (refused with an error line). */
static int accept_own(int lfd)
{
	int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (fd < 0)
		return -1;
	struct ucred cr;
	socklen_t len = sizeof(cr);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) < 0 || cr.uid != geteuid()) {
		refuse(fd, "permission_denied",
		       "this sandbox belongs to another user: only its owner may connect");
		return -1;
	}
	return fd;
}

int conn_accept_client(int lfd, bool busy, const char *id)
{
	int fd = accept_own(lfd);
	if (fd < 0 || !busy)
		return fd;
	char msg[256];
	snprintf(msg, sizeof(msg),
		 "another client is attached to sandbox %s: one client at a time (try again "
		 "once it has disconnected)",
		 id);
	refuse(fd, "busy", msg);
	return -1;
}

/* A control request waiting on ctl_fd: its socket, with its one word
 * (status, stop) in word; -1 when none or refused. */
static int conn_accept_ctl(struct serve_conn *c, char *word, size_t size)
{
	cleanup_fd int fd = accept_own(c->ctl_fd);
	if (fd < 0)
		return -1;
	size_t n = 0;
	unsigned long long end = conn_now_ms() + CTL_TIMEOUT_MS;
	while (n < size - 1) {
		ssize_t r = read(fd, word + n, size - 1 - n);
		if (r > 0) {
			n += (size_t)r;
			if (memchr(word, '\n', n))
				break;
			continue;
		}
		if (r == 0 || (errno != EAGAIN && errno != EINTR))
			break;
		unsigned long long now = conn_now_ms();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (now >= end || poll(&p, 1, (int)(end - now)) <= 0)
			break;
	}
	word[n] = 0;
	word[strcspn(word, "\r\n")] = 0;
	return ab_steal_fd(&fd);
}

/* o as one line on fd, which is closed; consumes o. */
static void conn_reply(int fd, json_object *o)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	size_t len = strlen(s), off = 0;
	unsigned long long end = conn_now_ms() + CTL_TIMEOUT_MS;
	while (off <= len) {
		/* the line and its newline in one write: the client wakes once */
		struct iovec v[2] = {{.iov_base = (char *)s + off, .iov_len = len - off},
				     {.iov_base = "\n", .iov_len = 1}};
		ssize_t w = off < len ? writev(fd, v, 2) : write(fd, "\n", 1);
		if (w > 0) {
			off += (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			break;
		unsigned long long now = conn_now_ms();
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (now >= end || poll(&p, 1, (int)(end - now)) <= 0)
			break;
	}
	json_object_put(o);
	close(fd);
}

void serve_client_attach(struct server *sv, int fd, json_object *hello, bool replay)
{
	out_free(&sv->out);
	out_init(&sv->out, fd, true);
	sv->conn.fd = sv->in_fd = fd;
	sv->conn.hup = sv->conn.reset = false;
	sv->conn.sock = replay;
	sv->client_gen = ++sv->gen;
	struct ab_error err = {0};
	if (sv->frozen && serve_freeze(sv, false, &err) < 0) /* a client resumes it */
		fprintf(stderr, "agentbox: resume: %s\n", err.msg);
	out_json(&sv->out, hello, NULL);
	if (replay) {
		serve_replay_records(sv); /* (a result there may come again in kept) */
		out_splice(&sv->out, &sv->kept);
		out_init(&sv->kept, -1, false);
	}
	front_audit_write(&sv->audit, front_audit_entry("attach"));
}

/* What the client that goes had read of the replies it was sent. Not
 * all: some were never written, or the kernel says it left some unread
 * in its socket (ECONNRESET). All: it ended its requests and had all its
 * answers written (it reads to our close), or it is an exec client
 * (agentbox exec, which passes on what it reads). Else its socket's
 * bytes were all read, but a protocol client's bridge (agentbox connect)
 * may have been killed with them: unknown. */
static enum serve_got client_got(struct server *sv)
{
	int e = 0;
	socklen_t len = sizeof(e);
	if (getsockopt(sv->conn.fd, SOL_SOCKET, SO_ERROR, &e, &len) == 0 && e == ECONNRESET)
		sv->conn.reset = true;
	if (sv->out.broken || out_waiting(&sv->out) || sv->conn.reset)
		return SERVE_GOT_NOT;
	if ((sv->stdin_eof && !sv->conn.hup) || !sv->conn.sock)
		return SERVE_GOT_ALL;
	return SERVE_GOT_UNKNOWN;
}

void serve_client_detach(struct server *sv)
{
	/* its streamed commands that ended: kept until a client has them */
	serve_replay_gone(sv, sv->client_gen, client_got(sv));
	close(sv->conn.fd);
	sv->conn.fd = sv->in_fd = sv->out.fd = -1;
	ab_front_cancel_watches(&sv->f); /* no one left to cancel them */
	sv->in_len = 0;
	sv->discarding = sv->stdin_eof = false;
	sv->client_gen = 0;
	out_client_gone(&sv->out);
	out_splice(&sv->kept, &sv->out);
	out_init(&sv->out, -1, false);
	sv->conn.idle_since_ms = conn_now_ms();
	front_audit_write(&sv->audit, front_audit_entry("detach"));
}

bool serve_client_done(struct server *sv)
{
	if (sv->out.broken || sv->conn.hup)
		return true;
	return sv->stdin_eof && !serve_pending(sv) && !out_waiting(&sv->out);
}

json_object *serve_stats_json(struct server *sv, json_object *id)
{
	struct ab_session_stats st;
	ab_session_stats(sv->s, &st);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("stats"));
	json_object_object_add(o, "id", id ? json_object_get(id) : NULL);
	json_object_object_add(o, "uptime_ms", json_object_new_int64((int64_t)st.uptime_ms));
	json_object_object_add(o, "commands_run", json_object_new_int64((int64_t)st.commands_run));
	json_object_object_add(o, "running", json_object_new_int64((int64_t)st.running));
	json_object_object_add(o, "queued", json_object_new_int64((int64_t)sv->f.queued));
	json_object_object_add(o, "denied_syscalls", ab_denied_json(st.denied, st.n_denied));
	json_object *cg = NULL;
	if (st.have_cgroup) {
		cg = json_object_new_object();
#define OPT_INT(name, v)                                                                           \
	json_object_object_add(cg, name, (v) >= 0 ? json_object_new_int64(v) : NULL)
		OPT_INT("memory_current", st.memory_current);
		OPT_INT("memory_peak", st.memory_peak);
		OPT_INT("pids_current", st.pids_current);
		OPT_INT("cpu_user_ms", st.cpu_user_ms);
		OPT_INT("cpu_system_ms", st.cpu_system_ms);
#undef OPT_INT
	}
	json_object_object_add(o, "cgroup", cg);
	return o;
}

static json_object *status_json(struct server *sv)
{
	struct ab_session_stats st;
	ab_session_status(sv->s, &st); /* ls asks a thousand of these */
	unsigned long long now = conn_now_ms();
	bool idle = no_client(sv) && !serve_pending(sv);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("status"));
	json_object_object_add(o, "sandbox_id", json_object_new_string(sandbox_id(sv)));
	json_object_object_add(o, "pid", json_object_new_int((int)getpid()));
	json_object_object_add(o, "state",
			       json_object_new_string(sv->frozen ? "paused" : "running"));
	json_object_object_add(o, "attached", json_object_new_boolean(sv->conn.fd >= 0));
	json_object_object_add(o, "running", json_object_new_int64((int64_t)st.running));
	json_object_object_add(o, "queued", json_object_new_int64((int64_t)sv->f.queued));
	json_object_object_add(o, "commands_run", json_object_new_int64((int64_t)st.commands_run));
	json_object_object_add(o, "uptime_ms", json_object_new_int64((int64_t)st.uptime_ms));
	json_object_object_add(
		o, "idle_ms",
		json_object_new_int64(idle ? (int64_t)(now - sv->conn.idle_since_ms) : 0));
	json_object_object_add(o, "memory",
			       st.have_cgroup && st.memory_current >= 0
				       ? json_object_new_int64(st.memory_current)
				       : NULL);
	return o;
}

int serve_freeze(struct server *sv, bool freeze, struct ab_error *err)
{
	if (sv->frozen == freeze)
		return 0;
	if (ab_session_freeze(sv->s, freeze, err) < 0)
		return -1;
	sv->frozen = freeze;
	front_audit_write(&sv->audit, front_audit_entry(freeze ? "pause" : "resume"));
	return 0;
}

void serve_control(struct server *sv)
{
	char word[32];
	int fd = conn_accept_ctl(&sv->conn, word, sizeof(word));
	if (fd < 0)
		return;
	struct ab_error err = {0};
	bool pause = !strcmp(word, "pause");
	if ((pause || !strcmp(word, "resume")) && serve_freeze(sv, pause, &err) < 0) {
		json_object *e = json_object_new_object();
		json_object_object_add(e, "type", json_object_new_string("error"));
		json_object_object_add(e, "code", json_object_new_string("unsupported"));
		json_object_object_add(e, "message", json_object_new_string(err.msg));
		conn_reply(fd, e);
		return;
	}
	json_object *o = status_json(sv);
	if (pause || !strcmp(word, "resume")) {
		/* answered with the status */
	} else if (!strcmp(word, "stop")) {
		sv->f.ending = true;
		json_object_object_add(o, "state", json_object_new_string("stopping"));
	} else if (strcmp(word, "status") != 0) {
		json_object_put(o);
		o = json_object_new_object();
		json_object_object_add(o, "type", json_object_new_string("error"));
		json_object_object_add(o, "code", json_object_new_string("unknown_op"));
		json_object_object_add(o, "message",
				       json_object_new_string("unknown control request"));
	}
	conn_reply(fd, o);
}

/* A detached sandbox idle (no client, nothing running) for its
 * idle_release_ms tries ab_session_idle_trim; again this soon after a try
 * that found a supervisor on its way. */
#define IDLE_TRIM_RETRY_MS 100

int serve_listen_wait_ms(struct server *sv)
{
	const struct ab_serve_listen *l = sv->listen;
	unsigned long long now = conn_now_ms(), end = ~0ull;
	if (!no_client(sv) || serve_pending(sv) || sv->frozen) {
		sv->conn.idle_since_ms = now; /* paused is not idle: it waits for a client */
		if (sv->conn.trimmed && l->idle)
			l->idle(l->arg, false, 0, NULL);
		sv->conn.trimmed = false;
	}
	/* idle a while: its idle supervisors and warm shells go (the next
	 * command makes its own) and malloc's free memory goes back */
	unsigned long long trim_at = ~0ull;
	if (!sv->conn.trimmed && l->idle_release_ms) {
		trim_at = sv->conn.idle_since_ms + l->idle_release_ms;
		if (trim_at <= now) {
			sv->conn.trimmed = ab_session_idle_trim(sv->s) == 0;
			trim_at = sv->conn.trimmed ? ~0ull : now + IDLE_TRIM_RETRY_MS;
			char mem[1200];
			if (sv->conn.trimmed && l->idle)
				l->idle(l->arg, true, now - sv->conn.idle_since_ms,
					ab_session_memory_file(sv->s, mem, sizeof(mem)) == 0
						? mem
						: NULL);
			if (sv->conn.trimmed) /* what the idle file's writing used too */
				ab_memory_trim();
		}
	}
	if (l->idle_timeout_ms)
		end = sv->conn.idle_since_ms + l->idle_timeout_ms;
	struct ab_error err = {0};
	if (end <= now && l->idle_pause) {
		if (serve_freeze(sv, true, &err) == 0) {
			end = ~0ull;
		} else if (err.code != ENOTSUP) {
			/* it did not freeze in time (a loaded machine), and was
			 * thawed: it tries again after another idle period */
			fprintf(stderr, "agentbox: idle pause: %s; trying again later\n", err.msg);
			sv->conn.idle_since_ms = now;
			end = now + l->idle_timeout_ms;
		} else { /* it cannot pause: it ends, as an idle timeout does */
			fprintf(stderr, "agentbox: idle pause: %s\n", err.msg);
		}
	}
	if (l->ttl_ms && sv->conn.started_ms + l->ttl_ms < end)
		end = sv->conn.started_ms + l->ttl_ms;
	if (end <= now)
		return 0;
	if (trim_at < end)
		end = trim_at; /* > now */
	if (end == ~0ull)
		return -1;
	return end - now > 60000 ? 60000 : (int)(end - now);
}

/* The log past which a detached sandbox writes no more of it (its disk). */
#define LOG_MAX (16u << 20)

void serve_log_result(struct server *sv, json_object *id, const struct ab_result *res)
{
	struct stat st;
	bool says = res->timed_out || res->oom_killed || res->pids_refused || res->n_denied ||
		    res->network.n_denied; /* what ab_result_say has a line for */
	if (!sv->listen || !says || fstat(STDERR_FILENO, &st) < 0 || !S_ISREG(st.st_mode) ||
	    st.st_size > LOG_MAX)
		return;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return;
	struct ab_say_limits lim = {.kill_after_ms = sv->cfg->kill_after_ms,
				    .memory = sv->cfg->memory,
				    .pids = sv->cfg->pids};
	ab_result_say(f, res, &lim, true);
	fclose(f);
	char when[32];
	time_t now = time(NULL);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", localtime(&now));
	const char *rid = json_object_to_json_string_ext(id, JSON_C_TO_STRING_PLAIN);
	/* each "agentbox: ..." line as "TIME request ID: ..." */
	for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		const char *what = strncmp(line, "agentbox: ", 10) == 0 ? line + 10 : line;
		fprintf(stderr, "%s request %.80s: %s\n", when, rid, what);
	}
	if (st.st_size + (off_t)len > LOG_MAX)
		fprintf(stderr, "%s agentbox: the log is over %u MiB: no more is written\n", when,
			LOG_MAX >> 20);
	free(text);
}

static void print_notice(const char *line)
{
	fprintf(stderr, "agentbox: %s\n", line);
}

/* The audit log, the engine (the signals that end the session, the
 * sandbox). */
int serve_open(struct server *sv)
{
	struct ab_error err = {0};
	if (sv->cfg->audit_log) {
		sv->audit = open(sv->cfg->audit_log,
				 O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600);
		if (sv->audit < 0) {
			snprintf(err.msg, sizeof(err.msg), "--audit-log: cannot write '%s': %s",
				 sv->cfg->audit_log, strerror(errno));
			goto fail;
		}
	}
	sv->cfg->notice = sv->cfg->quiet ? NULL : print_notice;
	if (!sv->in)
		snprintf(err.msg, sizeof(err.msg), "out of memory");
	if (!sv->in || ab_front_open(&sv->f, &err) < 0)
		goto fail;
	sv->s = sv->f.s;
	/* a fork: its workspace from the parent's checkpoint, before anyone
	 * may run anything in it */
	if (sv->listen && sv->listen->n_base &&
	    ckpt_fork_begin(ab_session_layer(sv->s), sv->listen->base, sv->listen->n_base,
			    sv->listen->base_own, sv->listen->n_base_own, &err) < 0) {
		ab_front_close(&sv->f);
		goto fail;
	}
	return 0;
fail:
	fprintf(stderr, "agentbox: %s\n", err.msg);
	if (sv->listen && sv->listen->ready)
		sv->listen->ready(sv->listen->arg, -1, err.msg);
	if (sv->audit >= 0)
		close(sv->audit);
	free(sv->in);
	return -1;
}

json_object *serve_hello_json(struct server *sv)
{
	const struct ab_result *lim = ab_session_limits(sv->s);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "type", json_object_new_string("hello"));
	json_object_object_add(o, "protocol", json_object_new_string(PROTOCOL));
	json_object_object_add(o, "version", json_object_new_string(AGENTBOX_VERSION));
	json_object_object_add(o, "sandbox_id", json_object_new_string(sandbox_id(sv)));
	json_object_object_add(o, "max_line", json_object_new_int64(MAX_LINE));
	json_object *features = json_object_new_array();
	json_object_array_add(features, json_object_new_string("file_chunks"));
	json_object_array_add(features, json_object_new_string("glob_files_only"));
	json_object_array_add(features, json_object_new_string("grep_skip"));
	json_object_array_add(features, json_object_new_string("workspace_mode"));
	json_object_array_add(features, json_object_new_string("output_offsets"));
	/* this client runs as our uid on our host (stdio, or a socket whose
	 * peer's uid was checked): upload "from", download "to" */
	json_object_array_add(features, json_object_new_string("host_files"));
	json_object_array_add(features, json_object_new_string("ports")); /* {"op":"port"} */
	serve_input_features(features);
	json_object_object_add(o, "features", features);
	json_object_object_add(o, "max_chunk", json_object_new_int64(FILEOP_CHUNK_MAX));
	json_object_object_add(o, "max_concurrent", json_object_new_int64(sv->cfg->max_concurrent));
	json_object_object_add(o, "max_queue", json_object_new_int64(MAX_QUEUE));
	json_object_object_add(o, "workspace", json_object_new_string("/workspace"));
	json_object_object_add(
		o, "workspace_mode",
		json_object_new_string(ab_session_layer(sv->s) ? "overlay" : "direct"));
	json_object_object_add(o, "cwd", json_object_new_string(sv->cfg->cwd));
	json_object *d = json_object_new_object();
	json_object_object_add(d, "timeout_ms",
			       lim->timeout_ms ? json_object_new_int64((int64_t)lim->timeout_ms)
					       : NULL);
	json_object_object_add(d, "max_timeout_ms",
			       sv->cfg->max_timeout_ms
				       ? json_object_new_int64((int64_t)sv->cfg->max_timeout_ms)
				       : NULL);
	json_object_object_add(d, "kill_after_ms",
			       json_object_new_int64((int64_t)sv->cfg->kill_after_ms));
	json_object_object_add(d, "max_output",
			       json_object_new_int64((int64_t)sv->cfg->max_output));
	json_object_object_add(o, "defaults", d);
	json_object_object_add(o, "limits", ab_limits_json(sv->cfg, lim));
	json_object_object_add(o, "seccomp", json_object_new_string(sv->cfg->seccomp));
	json_object_object_add(o, "landlock_abi", json_object_new_int(lim->landlock_abi));
	/* "full" or what --isolation best dropped */
	json_object_object_add(o, "isolation", ab_isolation_json(lim->isolation_missing));
	json_object_object_add(o, "net",
			       json_object_new_string(sv->cfg->net == AB_NET_HOST    ? "host"
						      : sv->cfg->net == AB_NET_PROXY ? "proxy"
										     : "none"));
	return o;
}
