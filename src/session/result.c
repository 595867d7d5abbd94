/* The result report: one JSON object, built with json-c and written with
 * jsonw.h, documented field by field in docs/result.md. */
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agentbox/agentbox.h"
#include "util/error.h"
#include "sandbox/isolation.h"
#include "util/jsonw.h"
#include "util/output.h"
#include "util/parse.h"
#include "session/result.h"
#include "net/netreport.h"
#include "util/util.h"

int ab_report_open(const char *spec, bool *owned, struct ab_error *err)
{
	*owned = false;
	if (strncmp(spec, "fd:", 3) == 0) {
		int fd = atoi(spec + 3);
		int fl = fcntl(fd, F_GETFL);
		if (fl < 0)
			return ab_error_set(err, errno, "--report %s: not an open fd", spec);
		if ((fl & O_ACCMODE) == O_RDONLY)
			return ab_error_plain(err, EBADF, "--report %s: the fd is not writable",
					      spec);
		/* never into the sandbox */
		fcntl(fd, F_SETFD, FD_CLOEXEC);
		return fd;
	}
	int fd = open(spec, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0)
		return ab_error_set(err, errno, "--report: cannot write '%s'", spec);
	*owned = true;
	return fd;
}

static json_object *output_json(bool base64, const struct ab_output *o)
{
	if (!o->data)
		return NULL;
	/* encoded when written, from the result's own bytes */
	return base64 ? ab_json_base64(o->data, o->len) : ab_json_text(o->data, o->len);
}

static json_object *limit_json(const struct ab_limit_report *lr, json_object *value)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "value", value);
	json_object_object_add(o, "how", json_object_new_string(lr->how ? lr->how : "not set"));
	json_object_object_add(o, "why", lr->why[0] ? json_object_new_string(lr->why) : NULL);
	return o;
}

/* A limit's number, null where 0 means not set. */
static json_object *set_or_null(unsigned long long v)
{
	return v ? json_object_new_int64((int64_t)v) : NULL;
}

json_object *ab_limits_json(const struct ab_config *cfg, const struct ab_result *res)
{
	json_object *l = json_object_new_object();
	json_object_object_add(l, "memory", limit_json(&res->memory, set_or_null(cfg->memory)));
	json_object_object_add(
		l, "cpus",
		limit_json(&res->cpu, cfg->cpu_millis
					      ? json_object_new_double(cfg->cpu_millis / 1000.0)
					      : NULL));
	json_object_object_add(l, "pids", limit_json(&res->pids, set_or_null(cfg->pids)));
	json_object_object_add(
		l, "cgroup",
		json_object_new_string(res->cgroup_version ? res->cgroup_version : "none"));
	json_object_object_add(l, "cgroup_path",
			       res->cgroup_path[0] ? json_object_new_string(res->cgroup_path)
						   : NULL);
	json_object_object_add(l, "timeout_ms", set_or_null(res->timeout_ms));
	json_object_object_add(l, "kill_after_ms",
			       json_object_new_int64((int64_t)cfg->kill_after_ms));
	json_object_object_add(l, "tmpfs_size", json_object_new_int64((int64_t)cfg->tmpfs_size));
	json_object_object_add(l, "max_output", json_object_new_int64((int64_t)cfg->max_output));
	json_object *rl = json_object_new_object();
	for (size_t i = 0; i < cfg->n_rlimits; i++)
		json_object_object_add(
			rl, ab_rlimit_name(cfg->rlimits[i].resource),
			cfg->rlimits[i].value == RLIM_INFINITY
				? json_object_new_string("unlimited")
				: json_object_new_int64((int64_t)cfg->rlimits[i].value));
	json_object_object_add(l, "rlimits", rl);
	json_object_object_add(l, "seccomp",
			       json_object_new_string(cfg->seccomp ? cfg->seccomp : "none"));
	json_object *ll = json_object_new_object();
	json_object_object_add(ll, "active", json_object_new_boolean(res->landlock_abi > 0));
	json_object_object_add(ll, "abi", json_object_new_int(res->landlock_abi));
	json_object_object_add(l, "landlock", ll);
	return l;
}

json_object *ab_result_fields_json(const struct ab_result *res, bool ran, bool captured,
				   bool merged, bool base64)
{
	json_object *o = json_object_new_object();
	if (!o)
		return NULL;
#define INT_OR_NULL(v) (ran ? json_object_new_int64((int64_t)(v)) : NULL)
	json_object_object_add(o, "exit_code",
			       json_object_new_int(ran ? res->exit_code : AB_EXIT_FAILURE));
	char signame[32] = "";
	if (ran && res->signal) {
		const char *abbrev = sigabbrev_np(res->signal);
		snprintf(signame, sizeof(signame), "SIG%s", abbrev ? abbrev : "UNKNOWN");
	}
	json_object_object_add(o, "signal", signame[0] ? json_object_new_string(signame) : NULL);
	json_object_object_add(o, "timed_out", json_object_new_boolean(ran && res->timed_out));
	/* from the cgroup's own events only, never guessed from SIGKILL */
	json_object_object_add(o, "oom_killed", json_object_new_boolean(ran && res->oom_killed));
	json_object_object_add(o, "duration_ms", INT_OR_NULL(res->duration_ms));
	json_object_object_add(o, "cpu_user_ms", INT_OR_NULL(res->cpu_user_ms));
	json_object_object_add(o, "cpu_system_ms", INT_OR_NULL(res->cpu_system_ms));
	json_object_object_add(o, "max_rss_kb", INT_OR_NULL(res->max_rss_kb));
	captured = captured && ran;
	if (captured && merged) {
		json_object_object_add(o, "output", output_json(base64, &res->out));
	} else if (captured) {
		json_object_object_add(o, "stdout", output_json(base64, &res->out));
		json_object_object_add(o, "stderr", output_json(base64, &res->err));
	}
	if (captured)
		json_object_object_add(o, "encoding",
				       json_object_new_string(base64 ? "base64" : "utf-8"));
	/* passed-through output is never seen by agentbox, so it is not counted */
	json_object_object_add(o, "stdout_bytes", captured ? INT_OR_NULL(res->out.total) : NULL);
	json_object_object_add(o, "stderr_bytes",
			       captured && !merged ? INT_OR_NULL(res->err.total) : NULL);
	json_object_object_add(
		o, "truncated",
		json_object_new_boolean(captured && (res->out.truncated || res->err.truncated)));
	json_object_object_add(o, "denied_syscalls",
			       ab_denied_json(ran ? res->denied : NULL, ran ? res->n_denied : 0));
	json_object *prot = json_object_new_array();
	for (char **p = ran ? res->protected_changed : NULL; p && *p; p++)
		json_object_array_add(prot, json_object_new_string(*p));
	json_object_object_add(o, "protected_paths_changed", prot);
	/* what of them was put out of effect (protect_quarantine.h) */
	json_object *quar = json_object_new_array();
	for (size_t i = 0; ran && i < res->n_quarantined; i++) {
		const struct ab_quarantined *q = &res->quarantined[i];
		json_object *e = json_object_new_object();
		json_object_object_add(e, "path", json_object_new_string(q->path ? q->path : ""));
		json_object_object_add(e, "reason",
				       json_object_new_string(q->reason ? q->reason : ""));
		json_object_object_add(e, "moved_to",
				       q->moved_to ? json_object_new_string(q->moved_to) : NULL);
		if (!q->moved_to)
			json_object_object_add(
				e, "error",
				json_object_new_string(q->error ? q->error : "unknown"));
		json_object_array_add(quar, e);
	}
	json_object_object_add(o, "protected_paths_quarantined", quar);
	if (ran && res->network.on) /* --net allow= (netreport.h) */
		json_object_object_add(o, "network", ab_net_report_json(&res->network));
	/* "full", or what --isolation best dropped (isolation.h) */
	json_object_object_add(o, "isolation",
			       ran ? ab_isolation_json(res->isolation_missing) : NULL);
#undef INT_OR_NULL
	return o;
}

json_object *ab_denied_json(const struct ab_denied_syscall *d, size_t n)
{
	json_object *a = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		json_object *e = json_object_new_object();
		json_object_object_add(e, "syscall", json_object_new_string(d[i].name));
		json_object_object_add(e, "count", json_object_new_int64((int64_t)d[i].count));
		json_object_array_add(a, e);
	}
	return a;
}

int ab_json_write_line(json_object *o, int fd, struct ab_error *err)
{
	struct ab_jw w;
	ab_jw_init(&w, ab_jw_fd_sink, (void *)(intptr_t)fd);
	ab_jw_value(&w, o);
	ab_jw_raw(&w, "\n", 1);
	int r = ab_jw_finish(&w);
	return r < 0 ? ab_error_set(err, -r, "writing JSON") : 0;
}

int ab_result_write_json(const struct ab_config *cfg, const struct ab_result *res,
			 const struct ab_error *failure, int fd, struct ab_error *err)
{
	bool ran = failure == NULL;
	json_object *o = ab_result_fields_json(res, ran, cfg->capture, cfg->merge_output,
					       cfg->output_base64);
	if (!o)
		return ab_error_set(err, ENOMEM, "writing the report");
	json_object_object_add(o, "limits", ab_limits_json(cfg, res));
	if (failure) {
		json_object *e = json_object_new_object();
		const char *code = strerrorname_np(failure->code);
		json_object_object_add(e, "code", json_object_new_string(code ? code : "EIO"));
		json_object_object_add(e, "message", json_object_new_string(failure->msg));
		json_object_object_add(o, "error", e);
	} else {
		json_object_object_add(o, "error", NULL);
	}
	int r = ab_json_write_line(o, fd, err);
	if (r < 0)
		ab_error_set(err, err->code, "writing the report");
	json_object_put(o);
	return r;
}
