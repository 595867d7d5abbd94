/* A command's result, decided here once for `agentbox run` and every
 * session command alike (docs/result.md): the exit status from the shim's
 * validated report (124 on a timeout, 128+N for a signal), OOM from the
 * cgroup's own events, CPU and memory from the shim's accounting of every
 * process of the command's tree, the denials routed to it, the protected
 * workspace paths it changed, and its output; then the command's slot is
 * released. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "util/error.h"
#include "layer/layer.h"
#include "layer/protect.h"
#include "layer/protect_quarantine.h"
#include "net/netproc.h"
#include "net/netproxy.h"
#include "session/session.h"
#include "util/util.h"

void command_clear(struct cmd *c)
{
	net_report_free(&c->net);
	capture_free(&c->out);
	capture_free(&c->err);
	free(c->in_buf);
	memset(c, 0, sizeof(*c));
	c->ctl = c->out_rd = c->err_rd = c->shim_pidfd = c->cmd_pidfd = c->in_wr = -1;
}

void command_release(struct ab_session *s, struct cmd *c)
{
	session_unwatch(s, &c->ctl);
	session_unwatch(s, &c->out_rd);
	session_unwatch(s, &c->err_rd);
	session_unwatch(s, &c->in_wr);
	if (c->shim_pidfd >= 0)
		close(c->shim_pidfd);
	if (c->cmd_pidfd >= 0)
		close(c->cmd_pidfd);
	command_clear(c);
	s->running--;
}

bool command_oom(struct ab_session *s, const struct cmd *c)
{
	return ab_cgroup_oom_kills(s->sb.cg) > c->oom_before;
}

int denials_collect(const struct ab_denials *d, struct ab_denied_syscall **out, size_t *nout)
{
	size_t n = d->n + (d->other ? 1 : 0);
	*out = NULL;
	*nout = 0;
	if (n == 0)
		return 0;
	struct ab_denied_syscall *v = calloc(n, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < d->n; i++) {
		snprintf(v[i].name, sizeof(v[i].name), "%s", d->e[i].name);
		v[i].count = d->e[i].count;
	}
	if (d->other) {
		snprintf(v[d->n].name, sizeof(v[d->n].name), "other");
		v[d->n].count = d->other;
	}
	/* most frequent first */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && v[j].count > v[j - 1].count; j--) {
			struct ab_denied_syscall t = v[j];
			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	*out = v;
	*nout = n;
	return 0;
}

/* The protected paths changed since the last command that changed one
 * (or since the sandbox was built): each change is reported once, by the
 * command that ends first after it. */
/* In an overlay workspace: the protected paths the layer holds (layer.h),
 * each reported once, by the first command to end after it got there. */
static char **layer_protected_once(struct ab_session *s, char ***created)
{
	char **all = layer_protected_changes(s->sb.plan.layer);
	size_t n_new = 0, n_seen = 0;
	while (s->layer_seen && s->layer_seen[n_seen])
		n_seen++;
	for (size_t i = 0; all && all[i]; i++) {
		bool seen = false;
		for (size_t j = 0; j < n_seen && !seen; j++)
			seen = strcmp(all[i], s->layer_seen[j]) == 0;
		char **grown = seen ? NULL : realloc(s->layer_seen, (n_seen + 2) * sizeof(char *));
		if (seen || !grown) {
			free(all[i]);
			continue;
		}
		s->layer_seen = grown;
		s->layer_seen[n_seen++] = strdup(all[i]);
		s->layer_seen[n_seen] = NULL;
		all[n_new++] = all[i];
	}
	if (!all || n_new == 0) {
		free(all);
		return NULL;
	}
	all[n_new] = NULL;
	*created = protect_created_layer(s->sb.plan.layer->workspace, s->sb.plan.layer->dir, all);
	return all;
}

/* v (NULL-terminated, or NULL) with path added when it is not there */
static char **strv_add_once(char **v, const char *path)
{
	size_t n = 0;
	for (; v && v[n]; n++)
		if (strcmp(v[n], path) == 0)
			return v;
	ab_strv_push(&v, &n, path);
	return v;
}

/* In a direct workspace: the changes since the last scan, then what of
 * them (against the sandbox's start: a path created by an earlier command
 * and rewritten in place by this one too) the host would run, put out of
 * effect before the result goes out (protect_quarantine.h). */
static char **protected_changes(struct ab_session *s, struct ab_result *res)
{
	if (s->sb.plan.layer)
		return layer_protected_once(s, &res->protected_created);
	const struct protect_state *base = s->have_seen ? &s->seen : &s->sb.protect;
	char **changed = protect_changes(&s->sb.cfg, base);
	if (changed)
		res->protected_created = protect_created(&s->sb.cfg, base, changed);
	cleanup_strv char **kept = NULL;
	if (protect_quarantine(&s->sb.cfg, &s->sb.protect, &res->quarantined, &res->n_quarantined,
			       &kept) < 0 &&
	    s->sb.cfg.notice)
		s->sb.cfg.notice("out of memory while putting protected paths out of effect");
	/* what it judged safe (a repository's own config) is reported as
	 * what git init makes is: without a warning */
	for (char **k = kept; k && *k; k++)
		for (char **c = changed; c && *c; c++)
			if (strcmp(*c, *k) == 0)
				res->protected_created = strv_add_once(res->protected_created, *k);
	for (size_t i = 0; i < res->n_quarantined; i++)
		if (res->quarantined[i].path)
			changed = strv_add_once(changed, res->quarantined[i].path);
	if (!changed)
		return NULL;
	struct protect_state now = {0};
	struct ab_error ignored;
	if (protect_scan(&s->sb.cfg, &now, &ignored) == 0) {
		protect_state_free(&s->seen);
		s->seen = now;
		s->have_seen = true;
	}
	return changed;
}

void command_quarantine_at_close(struct ab_session *s)
{
	/* a run's one command was checked once its processes were gone */
	if (s->sb.plan.layer || s->sb.cfg.exit_after_run)
		return;
	struct ab_quarantined *q = NULL;
	size_t n = 0;
	cleanup_strv char **kept = NULL;
	protect_quarantine(&s->sb.cfg, &s->sb.protect, &q, &n, &kept);
	for (size_t i = 0; i < n && s->sb.cfg.notice; i++) {
		char line[1024];
		snprintf(line, sizeof(line), "after the session's last command, %s %s; %s%s",
			 q[i].path ? q[i].path : "?", q[i].reason ? q[i].reason : "",
			 q[i].moved_to ? "moved aside to " : "it could not be moved aside: ",
			 q[i].moved_to ? q[i].moved_to : (q[i].error ? q[i].error : "?"));
		s->sb.cfg.notice(line);
	}
	protect_quarantined_free(q, n);
}

/* The exit status and signal, from the main process's wait status. */
static void result_status(struct cmd *c, struct ab_result *res)
{
	int st = c->msg.status;
	if (WIFSIGNALED(st)) {
		res->signal = WTERMSIG(st);
		res->exit_code = AB_EXIT_SIGNAL_BASE + res->signal;
	} else {
		res->exit_code = WEXITSTATUS(st);
	}
	if (c->timed_out) {
		/* GNU timeout's status, whatever the command made of the signal */
		res->timed_out = true;
		res->exit_code = AB_EXIT_TIMEOUT;
		if (!res->signal)
			res->signal = c->timeout_signal;
	}
	res->cancelled = c->cancelled;
}

static void result_background(const struct cmd *c, struct ab_result *res)
{
	if (!c->keep_bg || !c->msg.n_background)
		return;
	res->background = calloc(c->msg.n_background, sizeof(*res->background));
	for (uint32_t i = 0; res->background && i < c->msg.n_background; i++) {
		res->background[i].pid = c->msg.background[i].pid;
		snprintf(res->background[i].command, sizeof(res->background[i].command), "%s",
			 c->msg.background[i].comm);
	}
	res->n_background = res->background ? c->msg.n_background : 0;
	snprintf(res->background_log, sizeof(res->background_log), "%.63s", c->msg.text);
}

/* Everything of a command that ran; -ENOMEM when some of it could not be
 * kept. */
static int result_fill(struct ab_session *s, struct cmd *c, struct ab_result *res)
{
	result_status(c, res);
	res->cpu_user_ms = c->msg.utime_us / 1000;
	res->cpu_system_ms = c->msg.stime_us / 1000;
	res->max_rss_kb = c->msg.maxrss_kb;
	res->oom_killed = command_oom(s, c);
	res->pids_refused = ab_cgroup_pids_refused(s->sb.cg) - c->pids_before;
	result_background(c, res);
	/* a file operation's reply has no such fields: a change it made (or a
	 * command before it) is the next command's to report */
	if (!c->file_op) {
		res->protected_changed = protected_changes(s, res);
		res->protected_refused = protect_watch_refused(&s->sb.watch);
	}
	if (s->net) { /* --net allow=: the command's connections move into the result */
		netproc_settle(s->net, 250);
		res->network = c->net;
		res->network.on = true;
		if (netproc_died(s->net)) /* its reports are gone with it */
			snprintf(res->network.failed, sizeof(res->network.failed), "%s",
				 netproc_died(s->net));
		memset(&c->net, 0, sizeof(c->net));
	}
	if (denials_collect(&c->denials, &res->denied, &res->n_denied) < 0 ||
	    capture_take(&c->out, &res->out) < 0 || capture_take(&c->err, &res->err) < 0)
		return -ENOMEM;
	return 0;
}

void command_finish(struct ab_session *s, struct cmd *c, ab_event_fn fn, void *arg)
{
	struct ab_result res = {0};
	struct ab_error error = {0};
	const struct ab_error *failure = NULL;
	sandbox_limits_into(&s->sb, &res);
	res.timeout_ms = c->timeout_ms;
	res.landlock_abi = s->limits.landlock_abi;
	res.duration_ms = session_now_ms() - c->started_ms;
	if (c->failed || !c->exited) {
		ab_error_plain(&error, c->failed ? c->msg.status : EIO, "%s",
			       c->failed ? c->msg.text : "the command's supervisor ended early");
		failure = &error;
	} else if (result_fill(s, c, &res) < 0) {
		ab_error_set(&error, ENOMEM, "collecting the result");
		failure = &error;
	}
	unsigned long long tag = c->tag;
	bool input_pending = c->in_busy;
	command_release(s, c);
	if (fn && input_pending) {
		/* what the command never read: its write's answer, before the result */
		struct ab_error gone = {0};
		ab_error_plain(&gone, EPIPE, "the command ended before it read all of its stdin");
		struct ab_event ev = {.kind = AB_EVENT_STDIN, .tag = tag, .error = &gone};
		fn(&ev, arg);
	}
	s->commands_run++;
	if (fn) {
		struct ab_event ev = {
			.kind = AB_EVENT_RESULT,
			.tag = tag,
			.result = &res,
			.error = failure,
		};
		fn(&ev, arg);
	}
	ab_result_free(&res);
}

void ab_result_free(struct ab_result *res)
{
	free(res->denied);
	free(res->network.allowed); /* --net allow= */
	free(res->network.denied);
	free(res->background);
	free(res->out.data);
	free(res->err.data);
	ab_cleanup_strvp(&res->protected_changed);
	ab_cleanup_strvp(&res->protected_created);
	ab_cleanup_strvp(&res->protected_refused);
	protect_quarantined_free(res->quarantined, res->n_quarantined);
	memset(res, 0, sizeof(*res));
}
