/* agentbox e2b's control API (E2B's spec/openapi.yml, the routes its SDK
 * calls): sandboxes made, listed, read, killed, their timeout, pause,
 * resume and connect, their metrics; every request with the server's key
 * (X-API-Key). And envd's plain routes besides /files: /health. Errors in
 * E2B's shape, {"code": STATUS, "message": ...}. */
#include "e2b/e2b_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statvfs.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "crypto/ossl.h"
#include "util/base64.h"

/* E2B's default timeout of a sandbox (openapi.yml: 15 s), and its most
 * (a day, as E2B's Pro tier). */
#define E2B_TIMEOUT_DEFAULT_S 15
#define E2B_TIMEOUT_MAX_S     86400

static void reply_json(struct e2b_http *h, int status, json_object *o)
{
	size_t n;
	const char *s = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
	e2b_http_reply(h, status, NULL, s, n);
	json_object_put(o);
}

static json_object *iso_time(long long ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char b[64];
	gmtime_r(&t, &tm);
	size_t n = strftime(b, sizeof(b), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(b + n, sizeof(b) - n, ".%03lldZ", ms % 1000);
	return json_object_new_string(b);
}

/* The Sandbox of create, resume and connect; with detail, the
 * SandboxDetail and ListedSandbox fields too. */
static json_object *sbx_json(struct e2b_sbx *s, bool detail, bool token)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "templateID", json_object_new_string(s->template_id));
	json_object_object_add(o, "alias", json_object_new_string(s->template_id));
	json_object_object_add(o, "sandboxID", json_object_new_string(s->id));
	json_object_object_add(o, "clientID", json_object_new_string("agentbox"));
	json_object_object_add(o, "envdVersion", json_object_new_string(E2B_ENVD_VERSION));
	if (token)
		json_object_object_add(o, "envdAccessToken", json_object_new_string(s->token));
	/* getHost(port) is PORT-ID.DOMAIN:N, the server's (e2b_host.c) */
	json_object_object_add(o, "domain", json_object_new_string(s->srv->domain_port));
	if (!detail) {
		json_object_object_add(o, "trafficAccessToken",
				       token && s->traffic[0] ? json_object_new_string(s->traffic)
							      : NULL);
		return o;
	}
	json_object_object_add(o, "startedAt", iso_time(s->started_ms));
	json_object_object_add(o, "endAt", iso_time(s->end_ms ? s->end_ms : s->started_ms));
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	struct sysinfo si;
	long long mem = sysinfo(&si) == 0 ? (long long)si.totalram * si.mem_unit >> 20 : 0;
	struct statvfs vfs;
	long long disk =
		statvfs(s->workdir, &vfs) == 0 ? (long long)(vfs.f_blocks * vfs.f_frsize >> 20) : 0;
	json_object_object_add(o, "cpuCount", json_object_new_int(cpus > 0 ? (int)cpus : 1));
	json_object_object_add(o, "memoryMB", json_object_new_int64(mem));
	json_object_object_add(o, "diskSizeMB", json_object_new_int64(disk));
	json_object_object_add(o, "metadata",
			       s->metadata ? json_object_get(s->metadata)
					   : json_object_new_object());
	json_object_object_add(o, "state",
			       json_object_new_string(s->paused ? "paused" : "running"));
	return o;
}

/* The body's JSON object ({} when empty), or NULL after a 400. */
static json_object *body_object(struct e2b_http *h)
{
	if (!h->body_len)
		return json_object_new_object();
	json_tokener *tok = json_tokener_new_ex(32);
	json_object *o =
		tok ? json_tokener_parse_ex(tok, (const char *)h->body, (int)h->body_len) : NULL;
	bool whole = tok && json_tokener_get_error(tok) == json_tokener_success &&
		     json_tokener_get_parse_end(tok) == h->body_len;
	json_tokener_free(tok);
	if (o && whole && json_object_is_type(o, json_type_object))
		return o;
	json_object_put(o);
	e2b_http_error(h, 400, "the body is not a JSON object");
	return NULL;
}

/* A body's "timeout" in seconds (the default when not given and not
 * required), or -1 after a 400. */
static long long timeout_of(struct e2b_http *h, json_object *body, bool required)
{
	json_object *t = json_object_object_get(body, "timeout");
	long long secs = E2B_TIMEOUT_DEFAULT_S;
	if (t && !json_object_is_type(t, json_type_int)) {
		e2b_http_error(h, 400, "timeout: an integer of seconds");
		return -1;
	}
	if (!t && required) {
		e2b_http_error(h, 400, "timeout: required");
		return -1;
	}
	if (t)
		secs = json_object_get_int64(t);
	if (secs < 0 || secs > E2B_TIMEOUT_MAX_S) {
		e2b_http_error(h, 400, "timeout: from 0 to %d seconds", E2B_TIMEOUT_MAX_S);
		return -1;
	}
	return secs;
}

/* The same into s's end (-1 after a 400). */
static int set_timeout(struct e2b_http *h, struct e2b_sbx *s, json_object *body, bool required)
{
	long long secs = timeout_of(h, body, required);
	if (secs < 0)
		return -1;
	s->end_ms = e2b_now_ms() + secs * 1000;
	return 0;
}

/* An object of strings (metadata, envVars), or NULL after a 400. */
static bool strings_ok(struct e2b_http *h, json_object *o, const char *what)
{
	if (!o)
		return true;
	if (!json_object_is_type(o, json_type_object)) {
		e2b_http_error(h, 400, "%s: an object of strings", what);
		return false;
	}
	json_object_object_foreach(o, k, v)
	{
		(void)k;
		if (!json_object_is_type(v, json_type_string)) {
			e2b_http_error(h, 400, "%s: an object of strings", what);
			return false;
		}
	}
	return true;
}

/* The sandbox made (why NULL) or not: create's answer. */
static void created(void *arg, struct e2b_sbx *s, const char *why)
{
	struct e2b_http *h = arg;
	if (why)
		return e2b_http_error(h, 500, "cannot make the sandbox: %s", why);
	reply_json(h, 201, sbx_json(s, false, true));
}

/* A sandbox made from a snapshot: create's answer. */
static void forked_one(struct e2b_http *h, struct e2b_sbx **made, size_t n, const char *why,
		       int status)
{
	if (!made || n != 1)
		return e2b_http_error(h, made ? 500 : status, "cannot make the sandbox: %s",
				      made ? "not one sandbox made" : why);
	reply_json(h, 201, sbx_json(made[0], false, true));
}

/* E2B's fork: one result each, {"sandbox": ...}. */
static void forked_many(struct e2b_http *h, struct e2b_sbx **made, size_t n, const char *why,
			int status)
{
	if (!made)
		return e2b_http_error(h, status, "cannot fork: %s", why);
	json_object *a = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		json_object *o = json_object_new_object();
		json_object_object_add(o, "sandbox", sbx_json(made[i], false, true));
		json_object_array_add(a, o);
	}
	reply_json(h, 201, a);
}

/* POST /sandboxes/ID/fork {timeout, count}: count forks of s's state now
 * (agentbox's fork without --from: a checkpoint taken first). */
static void fork_route(struct e2b_http *h, struct e2b_sbx *s)
{
	json_object *body = body_object(h);
	if (!body)
		return;
	json_object *c = json_object_object_get(body, "count");
	long long secs = timeout_of(h, body, false);
	long long count = c ? json_object_get_int64(c) : 1;
	if (secs >= 0 && (c && !json_object_is_type(c, json_type_int)))
		e2b_http_error(h, 400, "count: an integer");
	else if (secs >= 0 && (count < 1 || count > 100))
		e2b_http_error(h, 400, "count: from 1 to 100");
	else if (secs >= 0) {
		struct e2b_fork_opts o = {.secs = secs, .metadata = s->metadata, .envs = s->envs};
		snprintf(o.template_id, sizeof(o.template_id), "%s", s->template_id);
		e2b_snap_fork(h, s, NULL, (int)count, &o, forked_many);
	}
	json_object_put(body);
}

static void create(struct e2b_http *h)
{
	json_object *body = body_object(h);
	if (!body)
		return;
	json_object *tpl = json_object_object_get(body, "templateID");
	json_object *meta = json_object_object_get(body, "metadata");
	json_object *envs = json_object_object_get(body, "envVars");
	const char *t =
		json_object_is_type(tpl, json_type_string) ? json_object_get_string(tpl) : NULL;
	if (!t) {
		json_object_put(body);
		return e2b_http_error(h, 400, "templateID: required, a string");
	}
	struct e2b_snap *snap = strcmp(t, "base") ? e2b_snap_find(h->conn->srv, t) : NULL;
	if (strcmp(t, "base") != 0 && !snap) {
		e2b_http_error(h, 404,
			       "template '%s' not found (agentbox e2b has 'base' and snapshots)",
			       t);
		json_object_put(body);
		return;
	}
	long long secs = timeout_of(h, body, false);
	if (secs < 0 || !strings_ok(h, meta, "metadata") || !strings_ok(h, envs, "envVars")) {
		json_object_put(body);
		return;
	}
	if (snap) { /* a fork of the snapshot's sandbox from its checkpoint */
		struct e2b_fork_opts o = {.secs = secs, .metadata = meta, .envs = envs};
		snprintf(o.template_id, sizeof(o.template_id), "%s", t);
		e2b_snap_fork_from(h, snap, &o, forked_one);
		json_object_put(body);
		return;
	}
	struct e2b_sbx *s = NULL;
	struct ab_error err = {0};
	if (e2b_sbx_create(h->conn->srv, created, h, &s, &err) < 0) {
		json_object_put(body);
		return e2b_http_error(h, 500, "cannot make the sandbox: %s", err.msg);
	}
	snprintf(s->template_id, sizeof(s->template_id), "%s", t);
	s->metadata = meta ? json_object_get(meta) : NULL;
	s->envs = envs ? json_object_get(envs) : NULL;
	s->auto_pause = json_object_get_boolean(json_object_object_get(body, "autoPause"));
	/* its ports for its traffic token's holders only, as E2B's */
	json_object *pub = json_object_object_get(json_object_object_get(body, "network"),
						  "allowPublicTraffic");
	if (json_object_is_type(pub, json_type_boolean) && !json_object_get_boolean(pub))
		e2b_random_hex(s->traffic, E2B_KEY_LEN);
	s->end_ms = e2b_now_ms() + secs * 1000;
	json_object_put(body); /* answered by created() */
}

static void list(struct e2b_http *h, struct e2b *srv, bool v2)
{
	const char *state = e2b_http_query(h, "state");
	json_object *a = json_object_new_array();
	for (struct e2b_sbx *s = srv->sbxs; s; s = s->next) {
		if (s->dead || s->creating || s->retired)
			continue;
		const char *st = s->paused ? "paused" : "running";
		if (v2 && state && !strstr(state, st))
			continue;
		if (!v2 && s->paused)
			continue;
		json_object_array_add(a, sbx_json(s, true, false));
	}
	reply_json(h, 200, a);
}

/* ---- metrics: the sandbox's stats ---- */

struct metrics_req {
	struct e2b_http *h;
	struct e2b_sbx *s;
	long rq;
};

static void metrics_gone(struct e2b_http *h, void *data)
{
	struct metrics_req *m = data;
	(void)h;
	if (m->rq > 0 && !m->s->dead)
		e2b_sbx_forget(m->s, m->rq);
	free(m);
}

static long long num(json_object *o, const char *k)
{
	json_object *v = json_object_object_get(o, k);
	return json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : 0;
}

static void metrics_done(void *arg, json_object *msg, bool last)
{
	struct metrics_req *m = arg;
	if (!last)
		return;
	m->rq = 0;
	json_object *cg = msg ? json_object_object_get(msg, "cgroup") : NULL;
	struct e2b_sbx *s = m->s;
	long long now = e2b_now_ms(), cpu = num(cg, "cpu_user_ms") + num(cg, "cpu_system_ms");
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	double pct = s->m_at_ms && now > s->m_at_ms && cpus > 0
			     ? 100.0 * (double)(cpu - s->m_cpu_ms) / (double)(now - s->m_at_ms) /
				       (double)cpus
			     : 0;
	s->m_cpu_ms = cpu;
	s->m_at_ms = now;
	struct sysinfo si;
	struct statvfs vfs;
	bool vok = statvfs(s->workdir, &vfs) == 0;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "timestamp", iso_time(now));
	json_object_object_add(o, "timestampUnix", json_object_new_int64(now / 1000));
	json_object_object_add(o, "cpuCount", json_object_new_int(cpus > 0 ? (int)cpus : 1));
	json_object_object_add(o, "cpuUsedPct", json_object_new_double(pct < 0 ? 0 : pct));
	json_object_object_add(o, "memUsed", json_object_new_int64(num(cg, "memory_current")));
	json_object_object_add(o, "memTotal",
			       json_object_new_int64(sysinfo(&si) == 0
							     ? (long long)si.totalram * si.mem_unit
							     : 0));
	json_object_object_add(
		o, "diskUsed",
		json_object_new_int64(vok ? (long long)((vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize)
					  : 0));
	json_object_object_add(
		o, "diskTotal",
		json_object_new_int64(vok ? (long long)(vfs.f_blocks * vfs.f_frsize) : 0));
	json_object *a = json_object_new_array();
	json_object_array_add(a, o);
	reply_json(m->h, 200, a); /* frees m through metrics_gone */
}

static void metrics(struct e2b_http *h, struct e2b_sbx *s)
{
	struct metrics_req *m = calloc(1, sizeof(*m));
	if (!m)
		return e2b_http_error(h, 500, "out of memory");
	m->h = h;
	m->s = s;
	e2b_http_set_data(h, m, metrics_gone);
	json_object *req = json_object_new_object();
	json_object_object_add(req, "op", json_object_new_string("stats"));
	m->rq = e2b_sbx_request(s, req, metrics_done, m);
	if (m->rq < 0)
		e2b_http_error(h, 500, "the sandbox's link is down");
}

/* ---- one sandbox's routes ---- */

static void pause_resume(struct e2b_http *h, struct e2b_sbx *s, const char *what)
{
	bool pause = !strcmp(what, "pause");
	if (pause && s->paused)
		return e2b_http_error(h, 409, "sandbox %s is already paused", s->id);
	if (!strcmp(what, "resume") && !s->paused)
		return e2b_http_error(h, 409, "sandbox %s is already running", s->id);
	json_object *body = NULL;
	if (!pause && !(body = body_object(h)))
		return;
	bool was = s->paused;
	struct ab_error err = {0};
	if (s->paused == pause) {
		/* connect to a running one */
	} else if (e2b_sbx_ctl(s, pause ? "pause" : "resume", &err) < 0) {
		json_object_put(body);
		return e2b_http_error(h, 500, "%s", err.msg);
	}
	s->paused = pause;
	if (pause)
		return e2b_http_reply(h, 204, NULL, "", 0);
	if (set_timeout(h, s, body, !strcmp(what, "connect")) == 0)
		reply_json(h, was ? 201 : 200, sbx_json(s, false, true));
	json_object_put(body);
}

static void one(struct e2b_http *h, struct e2b_sbx *s, const char *what)
{
	const char *m = h->method;
	if (!*what && !strcmp(m, "GET"))
		return reply_json(h, 200, sbx_json(s, true, true));
	if (!*what && !strcmp(m, "DELETE")) {
		struct ab_error err = {0};
		if (!e2b_snaps_of(s->srv, s->id)) {
			e2b_sbx_kill(s);
		} else { /* its snapshots stand on it: kept, out of sight, paused */
			s->retired = true;
			if (!s->paused && e2b_sbx_ctl(s, "pause", &err) == 0)
				s->paused = true;
		}
		return e2b_http_reply(h, 204, NULL, "", 0);
	}
	if (!strcmp(what, "snapshots") && !strcmp(m, "POST")) {
		json_object *body = body_object(h);
		if (body)
			e2b_snap_create(h, s, body);
		json_object_put(body);
		return;
	}
	if (!strcmp(what, "fork") && !strcmp(m, "POST"))
		return fork_route(h, s);
	if (!strcmp(what, "timeout") && !strcmp(m, "POST")) {
		json_object *body = body_object(h);
		if (body && set_timeout(h, s, body, true) == 0)
			e2b_http_reply(h, 204, NULL, "", 0);
		json_object_put(body);
		return;
	}
	if (!strcmp(what, "refreshes") && !strcmp(m, "POST")) {
		json_object *body = body_object(h);
		json_object *d = body ? json_object_object_get(body, "duration") : NULL;
		long long secs = d ? json_object_get_int64(d) : 60;
		if (body && (secs < 0 || secs > E2B_TIMEOUT_MAX_S))
			e2b_http_error(h, 400, "duration: from 0 to %d seconds", E2B_TIMEOUT_MAX_S);
		else if (body && e2b_now_ms() + secs * 1000 > s->end_ms)
			s->end_ms = e2b_now_ms() + secs * 1000;
		if (body && secs >= 0 && secs <= E2B_TIMEOUT_MAX_S)
			e2b_http_reply(h, 204, NULL, "", 0);
		json_object_put(body);
		return;
	}
	if ((!strcmp(what, "pause") || !strcmp(what, "resume") || !strcmp(what, "connect")) &&
	    !strcmp(m, "POST"))
		return pause_resume(h, s, what);
	if (!strcmp(what, "metrics") && !strcmp(m, "GET"))
		return metrics(h, s);
	if (!strcmp(what, "network"))
		return e2b_http_error(h, 501, "agentbox e2b does not have %s yet (docs/e2b.md)",
				      what);
	e2b_http_error(h, 404, "no route %s %s", m, h->path);
}

void e2b_control_route(struct e2b_http *h)
{
	struct e2b *srv = h->conn->srv;
	if (!strcmp(h->path, "/health"))
		return e2b_http_reply(h, 200, NULL, "{\"message\":\"Health check successful\"}",
				      38);
	const char *key = e2b_http_header(h, "X-API-Key");
	const char *auth = e2b_http_header(h, "Authorization");
	if (!key && auth && !strncasecmp(auth, "Bearer ", 7))
		key = auth + 7;
	if (!key || !e2b_same(key, srv->key))
		return e2b_http_error(h, 401, "Invalid API key");
	/* /v2/sandboxes... (the SDK's create, list, connect): as /sandboxes... */
	const char *p = h->path;
	bool v2 = !strncmp(p, "/v2/sandboxes", 13) && (p[13] == 0 || p[13] == '/');
	p += v2 ? 3 : 0;
	if (!strcmp(p, "/sandboxes") && !strcmp(h->method, "POST"))
		return create(h);
	if (!strcmp(p, "/sandboxes") && !strcmp(h->method, "GET"))
		return list(h, srv, v2);
	if (!strcmp(p, "/snapshots") && !strcmp(h->method, "GET") && !v2)
		return e2b_snap_list(h);
	if (!strncmp(p, "/templates/", 11) && !strcmp(h->method, "DELETE") && !v2) {
		const char *t = p + 11; /* E2B's deleteSnapshot: a snapshot's id */
		if (!*t || strlen(t) > E2B_SNAP_ID_MAX || strchr(t, '/'))
			return e2b_http_error(h, 404, "snapshot not found");
		return e2b_snap_delete(h, t);
	}
	if (strncmp(p, "/sandboxes/", 11) != 0)
		return e2b_http_error(h, 404, "no route %s %s", h->method, p);
	char id[64];
	const char *slash = strchr(p + 11, '/');
	size_t n = slash ? (size_t)(slash - p - 11) : strlen(p + 11);
	if (n == 0 || n >= sizeof(id))
		return e2b_http_error(h, 404, "no such sandbox");
	memcpy(id, p + 11, n);
	id[n] = 0;
	struct e2b_sbx *s = e2b_sbx_find(srv, id);
	if (!s)
		return e2b_http_error(h, 404, "sandbox %s not found", id);
	one(h, s, slash ? slash + 1 : "");
}

/* Whether sig signs this /files request with s's access token, as the
 * SDK's getSignature: "v1_" and the unpadded base64 of the SHA-256 of
 * "PATH:OPERATION:USER:TOKEN[:EXPIRATION]", PATH, USER (username) and
 * EXPIRATION (signature_expiration) the query's, OPERATION read for GET
 * and write for POST. Compared in constant time. */
static bool signed_by(struct e2b_http *h, const struct e2b_sbx *s, const char *sig)
{
	const char *path = e2b_http_query(h, "path"), *user = e2b_http_query(h, "username");
	const char *exp = e2b_http_query(h, "signature_expiration");
	char *raw = NULL;
	int n = asprintf(&raw, "%s:%s:%s:%s%s%s", path ? path : "",
			 !strcmp(h->method, "GET") ? "read" : "write", user ? user : "", s->token,
			 exp ? ":" : "", exp ? exp : "");
	unsigned char d[32];
	unsigned int len = sizeof(d);
	bool ok = n >= 0 && EVP_Digest(raw, (size_t)n, d, &len, EVP_sha256(), NULL);
	free(raw);
	char want[3 + BASE64_LEN(32) + 1] = "v1_";
	size_t b = base64_encode_into(want + 3, d, sizeof(d));
	while (b && want[3 + b - 1] == '=')
		b--;
	want[3 + b] = 0;
	return ok && e2b_same(sig, want);
}

static int unsigned_by(struct e2b_http *h, const char *why)
{
	e2b_http_error(h, 401, "%s", why);
	return -1;
}

/* A signed /files URL (the SDK's downloadUrl and uploadUrl): with
 * E2B_SANDBOX_URL it names no sandbox, so the sandbox is the one whose
 * token signs it (h->sbx NULL), else it must be h->sbx; refused as envd
 * refuses. 0: h->sbx is it; else the answer is sent. */
static int by_signature(struct e2b_http *h, const char *sig, bool named)
{
	struct ab_error err = {0};
	if (strcmp(h->method, "GET") && strcmp(h->method, "POST"))
		return unsigned_by(h, "invalid signature");
	if (ab_crypto_load("signed URLs", &err) < 0)
		return unsigned_by(h, err.msg);
	struct e2b_sbx *found = NULL;
	for (struct e2b_sbx *s = h->conn->srv->sbxs; s; s = s->next)
		if (!s->dead && !s->creating && !s->retired && signed_by(h, s, sig) && !found)
			found = s; /* every one tried: the time tells nothing */
	if (!found || (named && found != h->sbx))
		return unsigned_by(h, "invalid signature");
	const char *exp = e2b_http_query(h, "signature_expiration");
	if (exp) {
		char *end;
		errno = 0;
		long long t = strtoll(exp, &end, 10);
		if (!*exp || *end || errno)
			return unsigned_by(h, "invalid signature_expiration");
		if (t < (long long)time(NULL))
			return unsigned_by(h, "signature is already expired");
	}
	h->sbx = found;
	return 0;
}

/* envd's routes: its own (/health, no token, as envd), then e2b.h's
 * table. A /files request may carry a signature instead of the token
 * (and then need not name its sandbox: e2b_http.c's dispatch). */
void e2b_envd_route(struct e2b_http *h)
{
	const char *id = e2b_http_header(h, "E2b-Sandbox-Id");
	const char *tok = e2b_http_header(h, "X-Access-Token");
	const char *sig = !strcmp(h->path, "/files") ? e2b_http_query(h, "signature") : NULL;
	bool by_sig = sig && !(id && tok);
	h->sbx = id ? e2b_sbx_find(h->conn->srv, id) : NULL;
	if (by_sig && by_signature(h, sig, id != NULL) < 0)
		return;
	if (!h->sbx || h->sbx->paused) /* as E2B's proxy: the SDK's isRunning() reads it */
		return e2b_http_error(h, 502, "sandbox %s is %s", h->sbx ? h->sbx->id : id,
				      h->sbx ? "paused" : "not found");
	if (!strcmp(h->path, "/health"))
		return e2b_http_reply(h, 204, NULL, "", 0);
	if (!by_sig && (!tok || !e2b_same(tok, h->sbx->token)))
		return e2b_http_error(h, 401, "a wrong or missing X-Access-Token");
	for (const struct e2b_route *r = e2b_fs_routes; r->method; r++)
		if (!strcmp(r->method, h->method) && !strcmp(r->path, h->path))
			return r->fn(h);
	e2b_http_error(h, 404, "no route %s %s", h->method, h->path);
}
