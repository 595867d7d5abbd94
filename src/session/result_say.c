/* What agentbox says on stderr of a command's end (result_say.h): one
 * wording for `agentbox run` and `agentbox exec`. */
#include "session/result_say.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "net/netreport.h"

/* A duration as --timeout takes it: 1500ms, 2s, 3m. */
static void duration_text(char *out, size_t len, unsigned long long ms)
{
	if (ms % 60000 == 0)
		snprintf(out, len, "%llum", ms / 60000);
	else if (ms % 1000 == 0)
		snprintf(out, len, "%llus", ms / 1000);
	else
		snprintf(out, len, "%llums", ms);
}

void ab_result_say(FILE *f, const struct ab_result *res, const struct ab_say_limits *lim,
		   bool denials)
{
	char t[32], k[32];
	if (res->timed_out) {
		duration_text(t, sizeof(t), res->timeout_ms);
		duration_text(k, sizeof(k), lim->kill_after_ms);
		fprintf(f,
			"agentbox: timed out after %s (--timeout): SIGTERM to every process of "
			"the command, SIGKILL %s later to what was left (--kill-after)\n",
			t, k);
	}
	if (res->oom_killed && lim->memory)
		fprintf(f,
			"agentbox: killed for running out of memory: the sandbox's limit is "
			"%llu MiB (--memory)\n",
			(lim->memory + (1 << 20) - 1) >> 20);
	else if (res->oom_killed)
		fputs("agentbox: killed by the kernel's OOM killer: the host ran out of memory "
		      "(no --memory limit)\n",
		      f);
	if (res->pids_refused)
		fprintf(f, "agentbox: the pids limit (--pids %lu) refused %llu fork%s\n", lim->pids,
			res->pids_refused, res->pids_refused == 1 ? "" : "s");
	if (!denials)
		return;
	if (res->n_denied) {
		fputs("agentbox: seccomp denied:", f);
		for (size_t i = 0; i < res->n_denied; i++)
			fprintf(f, "%s %s (%lu)", i ? "," : "", res->denied[i].name,
				res->denied[i].count);
		fputc('\n', f);
	}
	ab_net_report_print_denials(&res->network, f); /* --net allow= */
}

static json_object *member(json_object *o, const char *key)
{
	json_object *v = NULL;
	return o && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static unsigned long long ull_of(json_object *o, const char *key)
{
	json_object *v = member(o, key);
	int64_t n = v && json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : 0;
	return n > 0 ? (unsigned long long)n : 0;
}

static void copy_text(char *dst, size_t size, json_object *o, const char *key)
{
	json_object *v = member(o, key);
	snprintf(dst, size, "%s",
		 v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "?");
}

/* The array a of objects into *out (n entries) with fill() for each. */
static int array_of(json_object *a, size_t size, void **out, size_t *n,
		    void (*fill)(void *entry, json_object *o))
{
	size_t len = a && json_object_is_type(a, json_type_array) ? json_object_array_length(a) : 0;
	if (!len)
		return 0;
	char *v = calloc(len, size);
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < len; i++)
		fill(v + i * size, json_object_array_get_idx(a, i));
	*out = v;
	*n = len;
	return 0;
}

static void fill_denied(void *entry, json_object *o)
{
	struct ab_denied_syscall *d = entry;
	copy_text(d->name, sizeof(d->name), o, "syscall");
	d->count = (unsigned long)ull_of(o, "count");
}

static void fill_conn(void *entry, json_object *o)
{
	struct ab_net_conn *c = entry;
	copy_text(c->host, sizeof(c->host), o, "host");
	copy_text(c->why, sizeof(c->why), o, "reason");
	c->port = (unsigned)ull_of(o, "port");
	c->count = (unsigned long)ull_of(o, "count");
}

static int result_from_json(json_object *m, struct ab_result *res)
{
	memset(res, 0, sizeof(*res));
	res->timed_out = json_object_get_boolean(member(m, "timed_out"));
	res->oom_killed = json_object_get_boolean(member(m, "oom_killed"));
	json_object *net = member(m, "network");
	res->network.on = net != NULL;
	if (array_of(member(m, "denied_syscalls"), sizeof(*res->denied), (void **)&res->denied,
		     &res->n_denied, fill_denied) < 0 ||
	    array_of(member(net, "denied"), sizeof(*res->network.denied),
		     (void **)&res->network.denied, &res->network.n_denied, fill_conn) < 0)
		return -ENOMEM;
	return 0;
}

static void limits_from_hello(json_object *hello, struct ab_say_limits *lim)
{
	json_object *limits = member(hello, "limits");
	lim->kill_after_ms = ull_of(member(hello, "defaults"), "kill_after_ms");
	lim->memory = ull_of(member(limits, "memory"), "value");
	lim->pids = (unsigned long)ull_of(member(limits, "pids"), "value");
}

static unsigned long long hello_timeout_ms(json_object *hello, unsigned long long timeout_ms)
{
	json_object *d = member(hello, "defaults");
	unsigned long long t = timeout_ms ? timeout_ms : ull_of(d, "timeout_ms");
	unsigned long long max = ull_of(d, "max_timeout_ms");
	return max && (t == 0 || t > max) ? max : t; /* as sandbox_timeout clamps */
}

void ab_result_say_json(FILE *f, json_object *result, json_object *hello,
			unsigned long long timeout_ms)
{
	struct ab_result res;
	struct ab_say_limits lim;
	if (result_from_json(result, &res) == 0) {
		res.timeout_ms = hello_timeout_ms(hello, timeout_ms);
		limits_from_hello(hello, &lim);
		ab_result_say(f, &res, &lim, true);
	}
	ab_result_free(&res);
}
