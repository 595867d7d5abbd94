/* agentbox create, exec, connect, ls, rm: the command lines of detached
 * sandboxes (docs/detached.md). */
#include <errno.h>
#include <dirent.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "detach/detach.h"
#include "detach/detach_lines.h"
#include "sandbox/init.h"
#include "session/result_say.h"
#include "util/error.h"
#include "util/output.h"
#include "util/signals.h"
#include "util/term.h"
#include "util/util.h"

/* ---- create ---- */

static const char usage_create[] =
	"Usage: agentbox create [--name NAME] [--idle-timeout DURATION [--idle-pause]]\n"
	"                       [--ttl DURATION] [--keep-output SIZE[,TOTAL]]\n"
	"                       [--idle-release DURATION|never]\n"
	"                       [OPTIONS of agentbox serve]\n"
	"\n"
	"Make a sandbox that outlives its caller: its launcher runs detached and\n"
	"serves the protocol (docs/protocol.md) on a unix socket only you can reach.\n"
	"Returns once the sandbox is ready and prints its id: NAME when given\n"
	"(unique among your sandboxes), else a new one. docs/detached.md.\n"
	"\n"
	"  --name NAME              1 to 63 letters, digits, '.', '_', '-'\n"
	"  --idle-timeout DURATION  end it after DURATION with no client attached\n"
	"                           and no command running or queued\n"
	"  --idle-pause             pause it then instead (the cgroup freezer); the\n"
	"                           next client resumes it\n"
	"  --ttl DURATION           end it DURATION after it was made, whatever runs\n"
	"  --port PORT              publish TCP port PORT on this host's loopback, for\n"
	"                           you only (as agentbox port ID PORT; repeatable;\n"
	"                           each URL on stderr)\n"
	"  --keep-output SIZE[,TOTAL]  keep the last SIZE bytes of each streamed\n"
	"                           command's stdout and stderr for the next client\n"
	"                           after a disconnect, TOTAL in all (default 32M,256M)\n"
	"  --idle-release DURATION  idle that long, its idle command supervisor and\n"
	"                           warm shell go, made again by the next command\n"
	"                           (default 10s; never: kept)\n"
	"\n"
	"Then: agentbox exec ID, agentbox connect ID, agentbox ls, agentbox pause ID,\n"
	"agentbox resume ID, agentbox port ID PORT, agentbox rm ID.\n";

/* create --port: each published once the sandbox is ready, its URL on
 * stderr (stdout is the id's); one that fails ends the sandbox. */
static int create_ports(const char *id, char **ports, int n)
{
	for (int i = 0; i < n; i++) {
		json_object *reply = NULL;
		struct ab_error err = {0};
		if (detach_port_request(id, detach_port_number(ports[i]), NULL, false, false,
					&reply, &err) < 0) {
			char *rm[] = {"rm", "-f", (char *)id, NULL};
			detach_fail("create: --port %s: %s (the sandbox is removed)", ports[i],
				    err.msg);
			detach_cli_rm(3, rm);
			return AB_EXIT_FAILURE;
		}
		const char *url = lines_str(reply, "url");
		fprintf(stderr, "agentbox: port %s at %s\n", ports[i], url ? url : "?");
		json_object_put(reply);
	}
	return 0;
}

/* --keep-output SIZE[,TOTAL]: 0, or -1 after saying why. */
static int keep_output_arg(const char *v, struct detach_opts *o)
{
	char per[64];
	const char *comma = strchr(v, ',');
	size_t n = comma ? (size_t)(comma - v) : strlen(v);
	if (n < sizeof(per)) {
		memcpy(per, v, n);
		per[n] = '\0';
	}
	if (n >= sizeof(per) || ab_parse_size(per, &o->keep_output) < 0 ||
	    (comma && ab_parse_size(comma + 1, &o->keep_total) < 0) ||
	    o->keep_output > (1ull << 30) || o->keep_total > (16ull << 30)) {
		detach_fail("create: --keep-output '%s': SIZE[,TOTAL], each a size (64K, 8M), "
			    "SIZE at most 1G, TOTAL at most 16G",
			    v);
		return -1;
	}
	if (!comma)
		o->keep_total = o->keep_output > (256ull << 20) ? o->keep_output : 256ull << 20;
	return 0;
}

int detach_cli_create(int argc, char **argv)
{
	struct detach_opts o = {.fork = detach_fork_make,
				.keep_output = 32ull << 20,
				.keep_total = 256ull << 20,
				.idle_release_ms = DETACH_IDLE_RELEASE_MS};
	char **rest = calloc((size_t)argc + 1, sizeof(char *));
	char **ports = calloc((size_t)argc + 1, sizeof(char *));
	int n = 0, n_ports = 0;
	if (!rest || !ports) {
		free(rest);
		free(ports);
		return detach_fail("out of memory");
	}
	rest[n++] = argv[0];
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		unsigned long long *dur = !strcmp(a, "--idle-timeout")	 ? &o.idle_timeout_ms
					  : !strcmp(a, "--ttl")		 ? &o.ttl_ms
					  : !strcmp(a, "--idle-release") ? &o.idle_release_ms
									 : NULL;
		if (detach_is_help(a)) {
			free(rest);
			free(ports);
			fputs(usage_create, stdout);
			return 0;
		}
		if (!strcmp(a, "--idle-pause")) {
			o.idle_pause = true;
			continue;
		}
		if (!strcmp(a, "--port")) {
			if (i + 1 >= argc || detach_port_number(argv[i + 1]) < 0) {
				free(rest);
				free(ports);
				return detach_fail("create: --port needs a port (1 to 65535)");
			}
			ports[n_ports++] = argv[++i];
			continue;
		}
		if (!strcmp(a, "--keep-output")) {
			int rc = i + 1 < argc ? keep_output_arg(argv[++i], &o)
					      : detach_fail("create: --keep-output needs a value");
			if (rc != 0) {
				free(rest);
				free(ports);
				return AB_EXIT_FAILURE;
			}
			continue;
		}
		if (!dur && strcmp(a, "--name") != 0) {
			rest[n++] = argv[i];
			continue;
		}
		if (i + 1 >= argc) {
			free(rest);
			free(ports);
			return detach_fail("create: %s needs a value", a);
		}
		if (!dur) {
			o.name = argv[++i];
		} else if (dur == &o.idle_release_ms && !strcmp(argv[i + 1], "never")) {
			o.idle_release_ms = 0;
			i++;
		} else if (ab_parse_duration(argv[++i], dur) < 0 || *dur == 0) {
			free(rest);
			free(ports);
			return detach_fail("create: %s '%s': not a duration (500ms, 30s, 10m, 1h)",
					   a, argv[i]);
		}
	}
	if (o.idle_pause && !o.idle_timeout_ms) {
		free(rest);
		free(ports);
		return detach_fail(
			"create: --idle-pause pauses at the idle timeout: give --idle-timeout");
	}
	struct ab_config cfg;
	struct ab_error err = {0};
	bool help = false;
	ab_config_init(&cfg);
	int r = ab_config_parse_serve(&cfg, n, rest, &help, &err);
	char id[DETACH_ID_MAX + 1];
	if (r == 0)
		r = detach_create(&cfg, &o, id, sizeof(id), &err);
	free(rest);
	ab_config_free(&cfg);
	if (r < 0) {
		free(ports);
		return detach_fail("create: %s", err.msg);
	}
	r = create_ports(id, ports, n_ports);
	free(ports);
	if (r == 0)
		printf("%s\n", id);
	return r;
}

/* ---- exec ---- */

static const char usage_exec[] =
	"Usage: agentbox exec [OPTIONS] ID [OPTIONS] [--] COMMAND [ARG...]\n"
	"       agentbox exec [OPTIONS] ID [OPTIONS] -c 'SHELL STRING'\n"
	"\n"
	"Run COMMAND in sandbox ID (agentbox create) as agentbox run would: its\n"
	"stdout and stderr pass through, the exit status is the command's (124 timed\n"
	"out, 128+N killed by signal N, 125 agentbox failed). SIGINT, SIGTERM and\n"
	"SIGHUP cancel it. Files and background processes stay in the sandbox\n"
	"(nohup ./server >log 2>&1 &). Options come before or after ID; -- or -c\n"
	"ends them.\n"
	"\n"
	"  -i                  pass stdin (read to its end first, UTF-8 text, at\n"
	"                      most 6 MiB); without it the command's stdin is\n"
	"                      /dev/null\n"
	"  -t                  give the command a new terminal inside the sandbox,\n"
	"                      sized as yours and resized with it; yours is in raw\n"
	"                      mode meanwhile (Ctrl-C is the command's: 130) and\n"
	"                      restored after; SIGINT, SIGTERM, SIGHUP, SIGQUIT,\n"
	"                      SIGUSR1 and SIGUSR2 go to the command instead of\n"
	"                      cancelling it. stdin must be a terminal (else 125)\n"
	"  --timeout DURATION  the command's timeout (default: the sandbox's; with\n"
	"                      -t, the sandbox's --max-timeout: create --max-timeout\n"
	"                      none for a terminal with no deadline)\n"
	"  --quiet             none of agentbox's own lines on stderr (a timeout,\n"
	"                      an OOM kill, denials) but its errors\n"
	"  --no-keep-background  end the processes the command left in the\n"
	"                      background when it ends (they stay by default;\n"
	"                      with -t they always end)\n";

/* stdin into the request, when -i: read whole, checked to be UTF-8. */
static int add_stdin(json_object *req)
{
	size_t cap = 6u << 20, n = 0;
	char *buf = malloc(cap + 1);
	if (!buf)
		return detach_fail("exec: out of memory");
	for (;;) {
		ssize_t r = read(STDIN_FILENO, buf + n, cap + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			free(buf);
			return detach_fail("exec: -i: cannot read stdin: %s", strerror(errno));
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > cap) {
			free(buf);
			return detach_fail(
				"exec: -i: stdin is over 6 MiB: write it to a file in the "
				"workspace instead");
		}
	}
	for (size_t i = 0; i < n;) {
		size_t k = utf8_seq_len((const unsigned char *)buf + i, n - i);
		if (!k) {
			free(buf);
			return detach_fail("exec: -i: stdin is not UTF-8 text (byte %zu)", i);
		}
		i += k;
	}
	json_object_object_add(req, "stdin", json_object_new_string_len(buf, (int)n));
	free(buf);
	return 0;
}

/* The id of this exec's command: its own, so that a command a killed
 * client left running (its result kept for replay) never takes it. */
static char exec_id[48];

static void exec_id_init(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(exec_id, sizeof(exec_id), "exec-%ld-%lld%09ld", (long)getpid(),
		 (long long)ts.tv_sec, ts.tv_nsec);
}

/* The request of exec's command line from argv[i] on (after ID). */
static json_object *exec_request(int argc, char **argv, int i, const char *timeout,
				 const struct winsize *pty, bool keep_background)
{
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("exec"));
	json_object_object_add(req, "id", json_object_new_string(exec_id));
	if (i + 2 == argc && !strcmp(argv[i], "-c")) {
		json_object_object_add(req, "command", json_object_new_string(argv[i + 1]));
	} else {
		if (i < argc && !strcmp(argv[i], "--"))
			i++;
		if (i >= argc || !strcmp(argv[i], "-c")) {
			json_object_put(req);
			detach_fail("exec: no command (agentbox exec ID -- COMMAND, or -c 'STRING' "
				    "alone)");
			return NULL;
		}
		json_object *a = json_object_new_array();
		for (; i < argc; i++)
			json_object_array_add(a, json_object_new_string(argv[i]));
		json_object_object_add(req, "argv", a);
	}
	if (pty) {
		json_object *size = json_object_new_object();
		json_object_object_add(size, "rows", json_object_new_int(pty->ws_row));
		json_object_object_add(size, "cols", json_object_new_int(pty->ws_col));
		json_object_object_add(req, "pty", size);
	}
	if (keep_background && !pty) /* a terminal's processes end with it */
		json_object_object_add(req, "keep_background", json_object_new_boolean(true));
	json_object_object_add(req, "stream", json_object_new_boolean(true));
	json_object_object_add(req, "encoding", json_object_new_string("base64"));
	json_object_object_add(req, "max_output", json_object_new_int(1024));
	unsigned long long ms = 0;
	if (timeout && (ab_parse_duration(timeout, &ms) < 0 || ms == 0)) {
		json_object_put(req);
		detach_fail("exec: --timeout '%s': not a duration (500ms, 30s, 10m, 1h)", timeout);
		return NULL;
	}
	if (ms)
		json_object_object_add(req, "timeout", json_object_new_double((double)ms / 1000));
	else if (pty) /* a person at a terminal: as long as the sandbox lets it run */
		json_object_object_add(req, "timeout", json_object_new_int(10000000));
	return req;
}

static int send_line(int fd, json_object *o)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	int r = detach_write_all(fd, s, strlen(s));
	if (r == 0)
		r = detach_write_all(fd, "\n", 1);
	return r;
}

/* An output message's data to our stdout or stderr (to a terminal in
 * raw mode, -t: written whole). */
static void write_output(json_object *m)
{
	json_object *d;
	if (!json_object_object_get_ex(m, "data", &d))
		return;
	const char *st = lines_str(m, "stream"), *why;
	size_t n;
	char *data = base64_decode(json_object_get_string(d), (size_t)json_object_get_string_len(d),
				   &n, &why);
	if (!data) {
		fprintf(stderr, "agentbox: an output message's data is not base64: %s\n", why);
		return;
	}
	if (st && !strcmp(st, "stderr"))
		detach_write_all(STDERR_FILENO, data, n);
	else
		ab_term_write_out(data, n);
	free(data);
}

static int result_code(json_object *m)
{
	json_object *e;
	return json_object_object_get_ex(m, "exit_code", &e) ? json_object_get_int(e)
							     : AB_EXIT_FAILURE;
}

/* Output to our stdout and stderr until the result: its exit code. */
static int exec_relay(struct lines *l, const char *id)
{
	for (;;) {
		json_object *m = lines_next_cancel(l, exec_id);
		if (!m)
			return detach_fail("sandbox %s: its launcher hung up before the result",
					   id);
		const char *type = lines_str(m, "type"), *mid = lines_str(m, "id");
		int code = -1;
		if (!mid || strcmp(mid, exec_id) != 0) {
			/* another request's (the cancel's ok) */
		} else if (!strcmp(type, "output")) {
			write_output(m);
		} else if (!strcmp(type, "result")) {
			code = result_code(m);
			l->result = json_object_get(m);
		} else if (!strcmp(type, "error")) {
			code = detach_fail("sandbox %s: %s", id, lines_str(m, "message"));
		}
		json_object_put(m);
		if (code >= 0)
			return code;
	}
}

/* ---- exec -t: the caller's terminal relayed to a new one inside ---- */

/* What relays the caller's terminal to the command's: the stdin op in
 * flight (one at a time, as the protocol wants; kept to send again while
 * the command is still queued) and a resize to send again likewise. */
struct tty_relay {
	struct lines *l;
	int code;		  /* the result's exit status; -1 until it came */
	char why[512];		  /* why there is none, said once the modes are back */
	bool in_open, in_busy;	  /* stdin read; a stdin op waits for its answer */
	char *in_line;		  /* that op, to send again on busy */
	bool retry, resize_again; /* busy: send again in a moment */
};

static void tty_send(struct tty_relay *t, json_object *o)
{
	if (send_line(t->l->fd, o) < 0 && !t->why[0])
		snprintf(t->why, sizeof(t->why), "cannot send to the sandbox: %s", strerror(errno));
	json_object_put(o);
}

static json_object *tty_op(const char *op, const char *id)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "op", json_object_new_string(op));
	json_object_object_add(o, "id", json_object_new_string(id));
	json_object_object_add(o, "target", json_object_new_string(exec_id));
	return o;
}

static void tty_resize(struct tty_relay *t)
{
	struct winsize ws = ab_term_size();
	json_object *o = tty_op("resize", "size");
	json_object_object_add(o, "rows", json_object_new_int(ws.ws_row));
	json_object_object_add(o, "cols", json_object_new_int(ws.ws_col));
	tty_send(t, o);
}

/* Each signal that came: SIGWINCH a resize, the others to the command's
 * process group, as agentbox run -t passes them on. */
static void tty_signals(struct tty_relay *t, int sigfd)
{
	struct signalfd_siginfo si;
	while (read(sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGWINCH) {
			tty_resize(t);
			continue;
		}
		const char *name = sigabbrev_np((int)si.ssi_signo);
		json_object *o = tty_op("signal", "sig");
		json_object_object_add(o, "signal", json_object_new_string(name ? name : "TERM"));
		tty_send(t, o);
	}
}

/* What the caller typed, to the command's terminal: one op at a time. */
static void tty_stdin(struct tty_relay *t)
{
	char buf[4096];
	ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		t->in_open = false; /* the caller's terminal is gone */
		return;
	}
	char *data = base64_encode(buf, (size_t)n);
	json_object *o = tty_op("stdin", "in");
	json_object_object_add(o, "data", json_object_new_string(data ? data : ""));
	json_object_object_add(o, "encoding", json_object_new_string("base64"));
	free(data);
	free(t->in_line);
	t->in_line = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	t->in_busy = true;
	tty_send(t, o);
}

/* One message from the launcher. */
static void tty_message(struct tty_relay *t, json_object *m)
{
	const char *type = lines_str(m, "type"), *mid = lines_str(m, "id"),
		   *code = lines_str(m, "code");
	bool busy = type && !strcmp(type, "error") && code && !strcmp(code, "busy");
	if (!type || !mid)
		return;
	if (!strcmp(mid, exec_id)) {
		if (!strcmp(type, "output"))
			write_output(m);
		else if (!strcmp(type, "result") && !t->l->result) {
			t->code = result_code(m);
			t->l->result = json_object_get(m);
		} else if (!strcmp(type, "error"))
			snprintf(t->why, sizeof(t->why), "%s", lines_str(m, "message"));
	} else if (!strcmp(mid, "in") && busy) {
		t->retry = true; /* the command is still queued */
	} else if (!strcmp(mid, "in")) {
		/* taken; or refused: the command's terminal is closed */
		t->in_busy = false;
		t->in_open = t->in_open && !strcmp(type, "ok");
	} else if (!strcmp(mid, "size") && busy) {
		t->retry = t->resize_again = true;
	}
}

/* Sends again what came back busy (the command was still queued). */
static void tty_retry(struct tty_relay *t)
{
	t->retry = false;
	if (t->in_busy && t->in_line) {
		json_object *o = json_tokener_parse(t->in_line);
		if (o)
			tty_send(t, o);
	}
	if (t->resize_again) {
		t->resize_again = false;
		tty_resize(t);
	}
}

/* exec -t: the caller's terminal (in raw mode: raw) relayed to the
 * command's until its result: its exit status. */
static int exec_tty(struct lines *l, const char *id, int sigfd, struct winsize sent,
		    struct ab_raw_tty *raw)
{
	struct tty_relay t = {.l = l, .code = -1, .in_open = true};
	struct winsize now = ab_term_size();
	if (now.ws_row != sent.ws_row || now.ws_col != sent.ws_col)
		tty_resize(&t); /* resized before SIGWINCH was watched */
	while (t.code < 0 && !t.why[0]) {
		bool bad;
		json_object *m;
		while (t.code < 0 && (m = lines_take(l, &bad))) {
			tty_message(&t, m);
			json_object_put(m);
		}
		if (t.code >= 0 || t.why[0])
			break;
		if (bad || l->eof) {
			snprintf(t.why, sizeof(t.why), "%s",
				 bad ? "its launcher sent what is not a protocol line"
				     : "its launcher hung up before the result");
			break;
		}
		struct pollfd p[3] = {
			{.fd = l->fd, .events = POLLIN},
			{.fd = sigfd, .events = POLLIN},
			{.fd = t.in_open && !t.in_busy ? STDIN_FILENO : -1, .events = POLLIN},
		};
		int n = poll(p, 3, t.retry ? 20 : -1);
		if (n < 0 && errno != EINTR)
			snprintf(t.why, sizeof(t.why), "poll: %s", strerror(errno));
		if (n == 0)
			tty_retry(&t);
		if (p[0].revents && !lines_fill(l))
			snprintf(t.why, sizeof(t.why), "a line from its launcher is too long");
		if (p[1].revents)
			tty_signals(&t, sigfd);
		if (p[2].revents)
			tty_stdin(&t);
	}
	free(t.in_line);
	ab_term_raw_restore(raw); /* before anything is said */
	if (t.code >= 0)
		return t.code;
	return detach_fail("sandbox %s: %s", id, t.why);
}

/* exec -t: SIGWINCH and every signal agentbox run -t passes on, taken
 * through a signalfd. */
static int tty_signals_fd(void)
{
	return ab_forwarded_signals_fd(SIGWINCH, NULL);
}

struct exec_opts {
	bool in, tty, keep_background, quiet;
	const char *timeout;
};

/* exec's options from argv[*i] on, up to the first word that is not one
 * (ID, the command, "--" or "-c"). 1: --help was asked; -1 on error. */
static int exec_options(int argc, char **argv, int *i, struct exec_opts *o)
{
	for (; *i < argc && argv[*i][0] == '-'; (*i)++) {
		const char *a = argv[*i];
		if (!strcmp(a, "--") || !strcmp(a, "-c"))
			break;
		if (detach_is_help(a)) {
			fputs(usage_exec, stdout);
			return 1;
		} else if (!strcmp(a, "-i")) {
			o->in = true;
		} else if (!strcmp(a, "-t")) {
			o->tty = true;
		} else if (!strcmp(a, "--no-keep-background")) {
			o->keep_background = false;
		} else if (!strcmp(a, "--quiet")) {
			o->quiet = true;
		} else if (!strcmp(a, "--timeout")) {
			if (*i + 1 >= argc) {
				detach_fail(
					"exec: --timeout needs a duration (500ms, 30s, 10m, 1h)");
				return -1;
			}
			o->timeout = argv[++*i];
		} else {
			detach_bad_arg("exec", "unknown option", a);
			return -1;
		}
	}
	return 0;
}

int detach_cli_exec(int argc, char **argv)
{
	struct exec_opts o = {.keep_background = true};
	int i = 1, r = exec_options(argc, argv, &i, &o);
	if (r != 0)
		return r > 0 ? 0 : AB_EXIT_FAILURE;
	if (i >= argc || !strcmp(argv[i], "--") || !strcmp(argv[i], "-c"))
		return detach_fail("exec: which sandbox? (agentbox exec ID -- COMMAND)");
	const char *id = argv[i++];
	if ((r = exec_options(argc, argv, &i, &o)) != 0)
		return r > 0 ? 0 : AB_EXIT_FAILURE;
	bool in = o.in, tty = o.tty;
	const char *timeout = o.timeout;
	struct ab_error err = {0};
	if (in && tty)
		return detach_fail("exec: -i and -t: with -t the command's stdin is its terminal, "
				   "which your terminal types into; give one of them");
	if (tty && ab_term_check(&err) < 0)
		return detach_fail("exec: %s", err.msg);
	struct winsize ws = ab_term_size();
	exec_id_init();
	json_object *req =
		exec_request(argc, argv, i, timeout, tty ? &ws : NULL, o.keep_background);
	if (!req || (in && add_stdin(req) < 0)) {
		json_object_put(req);
		return AB_EXIT_FAILURE;
	}
	char root[PATH_MAX];
	cleanup_fd int fd = detach_cli_dial(id, "exec", root, sizeof(root));
	signal(SIGPIPE, SIG_IGN);
	cleanup_fd int sigfd = tty ? tty_signals_fd() : ab_ending_signals_fd();
	struct lines l = {.fd = fd, .sigfd = sigfd};
	/* without -t the request goes before the hello is read: one round
	 * trip, not two (the launcher reads it after its hello; a connection
	 * it refuses is closed unread). With -t, after the terminal is raw. */
	int sent = fd >= 0 && !tty ? send_line(fd, req) : 1;
	int code = fd < 0 ? AB_EXIT_FAILURE : lines_hello(&l, id);
	/* raw before the command starts: no command is left without its
	 * terminal for a mode that could not be set */
	ab_cleanup_raw_tty struct ab_raw_tty raw = {0};
	if (code == 0 && tty && ab_term_raw_enter(&raw, &err) < 0)
		code = detach_fail("exec: %s", err.msg);
	if (code == 0 && sent > 0)
		sent = send_line(fd, req);
	if (code == 0 && sent < 0) {
		ab_term_raw_restore(&raw);
		code = detach_fail("sandbox %s: cannot send the request: %s", id, strerror(errno));
	}
	if (code == 0)
		code = tty ? exec_tty(&l, id, sigfd, ws, &raw) : exec_relay(&l, id);
	ab_term_raw_restore(&raw);
	unsigned long long ms = 0;
	if (l.result && !o.quiet && (!timeout || ab_parse_duration(timeout, &ms) == 0))
		ab_result_say_json(stderr, l.result, l.hello, ms);
	json_object_put(req);
	json_object_put(l.hello);
	json_object_put(l.result);
	free(l.buf);
	return code;
}

/* ---- connect ---- */

static const char usage_connect[] =
	"Usage: agentbox connect ID\n"
	"\n"
	"Bridge stdin and stdout to sandbox ID's protocol (docs/protocol.md), as\n"
	"agentbox serve speaks it: a client that runs a command reaches the sandbox\n"
	"through any transport (ssh HOST agentbox connect ID, kubectl exec -i POD --\n"
	"agentbox connect ID). End of stdin ends the connection once the answers to\n"
	"its requests are written, never the sandbox (a shutdown request does).\n"
	"One client at a time; results that came while none was attached are sent\n"
	"right after the hello.\n";

int detach_cli_connect(int argc, char **argv)
{
	if (argc == 2 && detach_is_help(argv[1])) {
		fputs(usage_connect, stdout);
		return 0;
	}
	if (argc != 2)
		return detach_fail("connect: one sandbox id (agentbox connect ID)");
	char root[PATH_MAX];
	cleanup_fd int fd = detach_cli_dial(argv[1], "sock", root, sizeof(root));
	if (fd < 0)
		return AB_EXIT_FAILURE;
	signal(SIGPIPE, SIG_IGN);
	static char buf[1 << 16];
	bool in_open = true;
	for (;;) {
		/* stdout watched too: a reader gone (its client killed) ends the
		 * connection before a reply is read that it could not take,
		 * so the sandbox keeps it for the next client */
		struct pollfd p[3] = {{.fd = in_open ? STDIN_FILENO : -1, .events = POLLIN},
				      {.fd = fd, .events = POLLIN},
				      {.fd = STDOUT_FILENO, .events = 0}};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			return detach_fail("connect: poll: %s", strerror(errno));
		}
		if (p[2].revents & (POLLERR | POLLHUP | POLLNVAL))
			return 0;
		if (p[1].revents) {
			ssize_t n = read(fd, buf, sizeof(buf));
			if (n <= 0)
				return 0; /* the launcher closed the connection */
			if (detach_write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
				return 0; /* our reader is gone: so is the connection */
		}
		if (p[0].revents) {
			ssize_t n = read(STDIN_FILENO, buf, sizeof(buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				in_open = false;
				shutdown(fd, SHUT_WR);
			} else if (detach_write_all(fd, buf, (size_t)n) < 0) {
				return 0;
			}
		}
	}
}

/* ---- logs ---- */

static const char usage_logs[] =
	"Usage: agentbox logs [--follow] ID\n"
	"\n"
	"What sandbox ID's launcher said: its notices, and for each command that\n"
	"timed out, was killed for memory, or was denied a syscall or a connection,\n"
	"the line agentbox run prints, with the time and the request's id. With\n"
	"--follow (-f), new lines as they come, until the sandbox ends or Ctrl-C.\n";

/* What is in fd from where it stands to its end, to stdout. */
static int copy_log(int fd)
{
	char buf[65536];
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -1 : 0;
		if (detach_write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
			return -1;
	}
}

int detach_cli_logs(int argc, char **argv)
{
	bool follow = false;
	const char *id = NULL;
	int r = detach_simple_args(argc, argv, "logs", usage_logs, "--follow", "-f", &follow, &id);
	if (r >= 0)
		return r;
	if (!id)
		return detach_fail("logs: which sandbox? (agentbox logs ID)");
	char root[PATH_MAX], path[PATH_MAX], dir[PATH_MAX + 80];
	struct ab_error err = {0};
	if (!detach_id_valid(id))
		return detach_fail("'%s' is not a sandbox id (agentbox ls lists them)", id);
	if (detach_root(root, sizeof(root), false, &err) < 0 ||
	    detach_path(path, sizeof(path), root, id, "log", &err) < 0)
		return detach_fail("no sandbox %s (agentbox ls lists them)", id);
	/* its own file, never what a link there names */
	cleanup_fd int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return detach_fail("no sandbox %s (agentbox ls lists them)", id);
	if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", root, id) >= sizeof(dir))
		return detach_fail("no sandbox %s (agentbox ls lists them)", id);
	signal(SIGPIPE, SIG_IGN);
	for (;;) {
		if (copy_log(fd) < 0)
			return 0; /* our reader is gone */
		if (!follow)
			return 0;
		/* until the sandbox's directory is gone (rm, its end) */
		if (access(dir, F_OK) < 0) {
			copy_log(fd);
			return 0;
		}
		poll(NULL, 0, 200);
	}
}
