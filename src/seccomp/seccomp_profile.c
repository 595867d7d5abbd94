/* Seccomp profiles (OCI runtime-spec / Docker JSON), parsed and checked
 * into libseccomp rules; seccomp_bpf.c makes them a BPF program kept in
 * memory, and seccomp_profile.h says why denials go through user
 * notification. */
#include "seccomp/seccomp_profile.h"

#include "seccomp/seccomp_internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <linux/filter.h>
#include <seccomp.h>
#include <stdio.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "seccomp/policy_builtin.h"
#include "util/error.h"
#include "util/jsonw.h"
#include "util/util.h"

#ifndef AGENTBOX_INSTALL_POLICY_DIR
#define AGENTBOX_INSTALL_POLICY_DIR "/usr/share/agentbox/policy"
#endif
#ifndef AGENTBOX_SOURCE_POLICY_DIR
#define AGENTBOX_SOURCE_POLICY_DIR ""
#endif
#ifndef AGENTBOX_BUILD_DIR
#define AGENTBOX_BUILD_DIR ""
#endif
#ifndef AGENTBOX_BIN_TO_POLICY_DIR
#define AGENTBOX_BIN_TO_POLICY_DIR "../share/agentbox/policy"
#endif

#define MAX_PROFILE_BYTES (4 << 20)

const char *ab_policy_dir(void)
{
	const char *env = getenv("AGENTBOX_POLICY_DIR");
	if (env && *env)
		return env;
	static char exe[4096], beside[4096 + sizeof(AGENTBOX_BIN_TO_POLICY_DIR)];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	size_t b = strlen(AGENTBOX_BUILD_DIR);
	if (n <= 0)
		return AGENTBOX_INSTALL_POLICY_DIR;
	exe[n] = '\0';
	if (b > 0 && strncmp(exe, AGENTBOX_BUILD_DIR, b) == 0 && exe[b] == '/')
		return AGENTBOX_SOURCE_POLICY_DIR;
	/* installed with another prefix than configured (cmake --install
	 * --prefix DIR): the policy where it was put beside the binary */
	char *slash = strrchr(exe, '/');
	struct stat st;
	if (slash) {
		snprintf(beside, sizeof(beside), "%.*s/%s", (int)(slash - exe), exe,
			 AGENTBOX_BIN_TO_POLICY_DIR);
		if (stat(beside, &st) == 0 && S_ISDIR(st.st_mode))
			return beside;
	}
	return AGENTBOX_INSTALL_POLICY_DIR;
}

/* "seccomp profile FILE: " then the JSON path and the problem */
static int fail(struct loader *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct loader *l, const char *fmt, ...)
{
	char msg[400];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ab_error_plain(l->err, EINVAL, "seccomp profile %s: %s", l->file, msg);
}

/* How agentbox itself passes fds inside a sandbox after it confined
 * itself: a command (or a session's init) sends its seccomp listener to the
 * launcher, a session's init and shims pass commands' fds to each other. */
static const char *const plumbing[] = {"sendmsg", "recvmsg", "socketpair", NULL};

static bool is_plumbing(const char *name)
{
	for (const char *const *p = plumbing; *p; p++)
		if (strcmp(*p, name) == 0)
			return true;
	return false;
}

/* Allow the plumbing: sendmsg and recvmsg, and socketpair of AF_UNIX only. */
static int add_plumbing(struct loader *l, uint32_t def_action)
{
	if (def_action == SCMP_ACT_ALLOW)
		return 0;
	for (const char *const *p = plumbing; *p; p++) {
		int nr = seccomp_syscall_resolve_name(*p);
		bool pair = strcmp(*p, "socketpair") == 0;
		int r = pair ? seccomp_rule_add(l->ctx, SCMP_ACT_ALLOW, nr, 1,
						SCMP_A0(SCMP_CMP_EQ, AF_UNIX))
			     : seccomp_rule_add(l->ctx, SCMP_ACT_ALLOW, nr, 0);
		if (r < 0)
			return fail(l, "cannot allow \"%s\" for agentbox's own fd passing: %s", *p,
				    strerror(-r));
	}
	return 0;
}

static const char *type_name(json_object *o)
{
	return json_type_to_name(json_object_get_type(o));
}

/* Every key of o must be in allowed. */
static int check_keys(struct loader *l, json_object *o, const char *where,
		      const char *const *allowed)
{
	json_object_object_foreach(o, key, val)
	{
		(void)val;
		bool ok = false;
		for (const char *const *a = allowed; *a && !ok; a++)
			ok = strcmp(*a, key) == 0;
		if (!ok)
			return fail(l, "%s: unknown key \"%s\"", where, key);
	}
	return 0;
}

static int get_uint(struct loader *l, json_object *v, const char *where, unsigned long long max,
		    unsigned long long *out)
{
	if (!json_object_is_type(v, json_type_int))
		return fail(l, "%s: expected a number, got %s", where, type_name(v));
	/* json-c keeps values above INT64_MAX as uint64 */
	if (json_object_get_int64(v) < 0)
		return fail(l, "%s: expected a number >= 0, got %lld", where,
			    (long long)json_object_get_int64(v));
	unsigned long long u = json_object_get_uint64(v);
	if (u > max)
		return fail(l, "%s: %llu is out of range (at most %llu)", where, u, max);
	*out = u;
	return 0;
}

enum act_kind { ACT_ALLOW, ACT_ERRNO, ACT_KILL_THREAD, ACT_KILL_PROCESS, ACT_TRAP, ACT_LOG };

static int parse_action(struct loader *l, json_object *v, const char *where, enum act_kind *out)
{
	static const struct {
		const char *name;
		enum act_kind kind;
	} acts[] = {
		{"SCMP_ACT_ALLOW", ACT_ALLOW},
		{"SCMP_ACT_ERRNO", ACT_ERRNO},
		{"SCMP_ACT_KILL", ACT_KILL_THREAD},
		{"SCMP_ACT_KILL_THREAD", ACT_KILL_THREAD},
		{"SCMP_ACT_KILL_PROCESS", ACT_KILL_PROCESS},
		{"SCMP_ACT_TRAP", ACT_TRAP},
		{"SCMP_ACT_LOG", ACT_LOG},
	};
	if (!json_object_is_type(v, json_type_string))
		return fail(l, "%s: expected an action string, got %s", where, type_name(v));
	const char *s = json_object_get_string(v);
	for (size_t i = 0; i < AB_ARRAY_SIZE(acts); i++) {
		if (strcmp(s, acts[i].name) == 0) {
			*out = acts[i].kind;
			return 0;
		}
	}
	if (strcmp(s, "SCMP_ACT_TRACE") == 0 || strcmp(s, "SCMP_ACT_NOTIFY") == 0)
		return fail(l, "%s: action \"%s\" is not supported by agentbox", where, s);
	return fail(l, "%s: unknown action \"%s\"", where, s);
}

/* The libseccomp action; errno actions become notifications (counted and
 * answered by the supervisor) unless the errno is ENOSYS. */
static uint32_t scmp_action(struct loader *l, enum act_kind k, int err, bool *notified)
{
	*notified = false;
	switch (k) {
	case ACT_ALLOW:
		return SCMP_ACT_ALLOW;
	case ACT_ERRNO:
		if (l->use_notify && err != ENOSYS) {
			*notified = true;
			return SCMP_ACT_NOTIFY;
		}
		return SCMP_ACT_ERRNO((uint32_t)err);
	case ACT_KILL_THREAD:
		return SCMP_ACT_KILL_THREAD;
	case ACT_KILL_PROCESS:
		return SCMP_ACT_KILL_PROCESS;
	case ACT_TRAP:
		return SCMP_ACT_TRAP;
	case ACT_LOG:
		return SCMP_ACT_LOG;
	}
	return SCMP_ACT_KILL_PROCESS;
}

/* Docker's arch names ("amd64") and libseccomp's ("x86_64") from
 * "SCMP_ARCH_X86_64". */
static uint32_t arch_token(const char *scmp_name)
{
	if (strncmp(scmp_name, "SCMP_ARCH_", 10) != 0)
		return 0;
	char lower[32];
	size_t i = 0;
	for (const char *p = scmp_name + 10; *p && i < sizeof(lower) - 1; p++)
		lower[i++] = (char)tolower((unsigned char)*p);
	lower[i] = '\0';
	if (strcmp(lower, "x86") == 0)
		return SCMP_ARCH_X86;
	return seccomp_arch_resolve_name(lower);
}

static void native_arch_docker_name(char *out, size_t n)
{
	struct utsname u;
	uname(&u);
	const char *m = u.machine;
	if (strcmp(m, "x86_64") == 0)
		m = "amd64";
	else if (strcmp(m, "aarch64") == 0)
		m = "arm64";
	else if (strncmp(m, "i", 1) == 0 && strcmp(m + 2, "86") == 0)
		m = "386";
	snprintf(out, n, "%s", m);
}

static int add_arch(struct loader *l, json_object *v, const char *where)
{
	if (!json_object_is_type(v, json_type_string))
		return fail(l, "%s: expected an architecture name, got %s", where, type_name(v));
	const char *name = json_object_get_string(v);
	uint32_t a = arch_token(name);
	if (a == 0 && strncmp(name, "SCMP_ARCH_", 10) == 0)
		return 0; /* newer than this libseccomp: cannot be this machine's */
	if (a == 0)
		return fail(l, "%s: unknown architecture \"%s\"", where, name);
	int r = seccomp_arch_add(l->ctx, a);
	if (r < 0 && r != -EEXIST)
		return fail(l, "%s: cannot add architecture \"%s\": %s", where,
			    json_object_get_string(v), strerror(-r));
	return 0;
}

static int parse_arches(struct loader *l, json_object *root)
{
	json_object *archs, *map;
	char where[64];
	if (json_object_object_get_ex(root, "architectures", &archs)) {
		if (!json_object_is_type(archs, json_type_array))
			return fail(l, "%s: expected an array, got %s", "architectures",
				    type_name(archs));
		for (size_t i = 0; i < json_object_array_length(archs); i++) {
			snprintf(where, sizeof(where), "architectures[%zu]", i);
			int r = add_arch(l, json_object_array_get_idx(archs, i), where);
			if (r < 0)
				return r;
		}
	}
	if (!json_object_object_get_ex(root, "archMap", &map))
		return 0;
	if (!json_object_is_type(map, json_type_array))
		return fail(l, "%s: expected an array, got %s", "archMap", type_name(map));
	uint32_t native = seccomp_arch_native();
	for (size_t i = 0; i < json_object_array_length(map); i++) {
		json_object *e = json_object_array_get_idx(map, i), *a, *subs;
		snprintf(where, sizeof(where), "archMap[%zu]", i);
		static const char *const keys[] = {"architecture", "subArchitectures", NULL};
		if (!json_object_is_type(e, json_type_object))
			return fail(l, "%s: expected an object, got %s", where, type_name(e));
		int r = check_keys(l, e, where, keys);
		if (r < 0)
			return r;
		if (!json_object_object_get_ex(e, "architecture", &a) ||
		    !json_object_is_type(a, json_type_string))
			return fail(l, "%s: %s", where, "needs an \"architecture\" string");
		const char *aname = json_object_get_string(a);
		uint32_t tok = arch_token(aname);
		if (tok == 0 && strncmp(aname, "SCMP_ARCH_", 10) != 0)
			return fail(l, "%s.architecture: unknown architecture \"%s\"", where,
				    aname);
		if (tok != native)
			continue; /* only the sub-architectures of this machine's */
		if (!json_object_object_get_ex(e, "subArchitectures", &subs))
			continue;
		if (!json_object_is_type(subs, json_type_array))
			return fail(l, "%s.subArchitectures: expected an array, got %s", where,
				    type_name(subs));
		for (size_t j = 0; j < json_object_array_length(subs); j++) {
			char w2[200];
			snprintf(w2, sizeof(w2), "%s.subArchitectures[%zu]", where, j);
			if ((r = add_arch(l, json_object_array_get_idx(subs, j), w2)) < 0)
				return r;
		}
	}
	return 0;
}

/* includes/excludes: does the rule apply to a command with no capabilities
 * on this machine? */
static int rule_applies(struct loader *l, json_object *rule, const char *where, bool *applies)
{
	static const char *const keys[] = {"caps", "arches", "minKernel", NULL};
	*applies = true;
	for (int inc = 1; inc >= 0; inc--) {
		json_object *f, *v;
		const char *name = inc ? "includes" : "excludes";
		if (!json_object_object_get_ex(rule, name, &f) || f == NULL)
			continue;
		char w[200];
		snprintf(w, sizeof(w), "%s.%s", where, name);
		if (!json_object_is_type(f, json_type_object))
			return fail(l, "%s: expected an object, got %s", w, type_name(f));
		int r = check_keys(l, f, w, keys);
		if (r < 0)
			return r;
		if (json_object_object_get_ex(f, "caps", &v)) {
			if (!json_object_is_type(v, json_type_array))
				return fail(l, "%s.caps: expected an array, got %s", w,
					    type_name(v));
			/* the command holds no capability: a rule for holders never applies */
			if (inc && json_object_array_length(v) > 0)
				*applies = false;
		}
		if (json_object_object_get_ex(f, "arches", &v)) {
			if (!json_object_is_type(v, json_type_array))
				return fail(l, "%s.arches: expected an array, got %s", w,
					    type_name(v));
			bool listed = false;
			for (size_t i = 0; i < json_object_array_length(v); i++) {
				json_object *a = json_object_array_get_idx(v, i);
				if (json_object_is_type(a, json_type_string) &&
				    strcmp(json_object_get_string(a), l->native) == 0)
					listed = true;
			}
			if (inc ? !listed : listed)
				*applies = false;
		}
		if (json_object_object_get_ex(f, "minKernel", &v)) {
			unsigned maj, min;
			l->kernel_dependent = true;
			if (!json_object_is_type(v, json_type_string) ||
			    sscanf(json_object_get_string(v), "%u.%u", &maj, &min) != 2)
				return fail(l, "%s.minKernel: %s", w, "expected \"MAJOR.MINOR\"");
			bool at_least = l->kernel_major > maj ||
					(l->kernel_major == maj && l->kernel_minor >= min);
			if (inc ? !at_least : at_least)
				*applies = false;
		}
	}
	return 0;
}

static int parse_args(struct loader *l, json_object *args, const char *where,
		      struct scmp_arg_cmp *cmps, unsigned *n)
{
	static const struct {
		const char *name;
		enum scmp_compare op;
	} ops[] = {
		{"SCMP_CMP_NE", SCMP_CMP_NE},
		{"SCMP_CMP_LT", SCMP_CMP_LT},
		{"SCMP_CMP_LE", SCMP_CMP_LE},
		{"SCMP_CMP_EQ", SCMP_CMP_EQ},
		{"SCMP_CMP_GE", SCMP_CMP_GE},
		{"SCMP_CMP_GT", SCMP_CMP_GT},
		{"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ},
	};
	static const char *const keys[] = {"index", "value", "valueTwo", "op", NULL};
	*n = 0;
	if (args == NULL)
		return 0; /* Podman writes "args": null */
	if (!json_object_is_type(args, json_type_array))
		return fail(l, "%s.args: expected an array, got %s", where, type_name(args));
	size_t len = json_object_array_length(args);
	if (len > 6)
		return fail(l, "%s.args: %zu comparisons (at most 6)", where, len);
	for (size_t i = 0; i < len; i++) {
		json_object *a = json_object_array_get_idx(args, i), *v;
		char w[200];
		snprintf(w, sizeof(w), "%s.args[%zu]", where, i);
		if (!json_object_is_type(a, json_type_object))
			return fail(l, "%s: expected an object, got %s", w, type_name(a));
		int r = check_keys(l, a, w, keys);
		if (r < 0)
			return r;
		unsigned long long index = 0, value = 0, two = 0;
		char wk[260];
		snprintf(wk, sizeof(wk), "%s.index", w);
		if (!json_object_object_get_ex(a, "index", &v))
			return fail(l, "%s: %s", w, "needs \"index\"");
		if ((r = get_uint(l, v, wk, 5, &index)) < 0)
			return r;
		snprintf(wk, sizeof(wk), "%s.value", w);
		if (json_object_object_get_ex(a, "value", &v) &&
		    (r = get_uint(l, v, wk, UINT64_MAX, &value)) < 0)
			return r;
		snprintf(wk, sizeof(wk), "%s.valueTwo", w);
		if (json_object_object_get_ex(a, "valueTwo", &v) &&
		    (r = get_uint(l, v, wk, UINT64_MAX, &two)) < 0)
			return r;
		if (!json_object_object_get_ex(a, "op", &v) ||
		    !json_object_is_type(v, json_type_string))
			return fail(l, "%s.op: %s", w, "needs an operator string");
		const char *opname = json_object_get_string(v);
		size_t k = 0;
		while (k < AB_ARRAY_SIZE(ops) && strcmp(ops[k].name, opname) != 0)
			k++;
		if (k == AB_ARRAY_SIZE(ops))
			return fail(l, "%s.op: unknown operator \"%s\"", w, opname);
		/* OCI: for MASKED_EQ, value is the mask and valueTwo the datum */
		cmps[(*n)++] = (struct scmp_arg_cmp){
			.arg = (unsigned)index, .op = ops[k].op, .datum_a = value, .datum_b = two};
	}
	return 0;
}

/* Podman's profiles also spell errnos by name ("errno": "EPERM"). */
static int get_errno(struct loader *l, json_object *o, const char *num_key, const char *name_key,
		     const char *where, unsigned long long *out)
{
	json_object *v;
	char w[260];
	snprintf(w, sizeof(w), "%s%s%s", where, *where ? "." : "", num_key);
	if (json_object_object_get_ex(o, num_key, &v))
		return get_uint(l, v, w, 4095, out);
	if (!json_object_object_get_ex(o, name_key, &v))
		return 0;
	snprintf(w, sizeof(w), "%s%s%s", where, *where ? "." : "", name_key);
	if (!json_object_is_type(v, json_type_string))
		return fail(l, "%s: expected an errno name, got %s", w, type_name(v));
	for (int e = 1; e < 4096; e++) {
		const char *n = strerrorname_np(e);
		if (n && strcmp(n, json_object_get_string(v)) == 0) {
			*out = (unsigned long long)e;
			return 0;
		}
	}
	return fail(l, "%s: unknown errno \"%s\"", w, json_object_get_string(v));
}

static int remember_errno(struct loader *l, const char *name, int err)
{
	for (size_t i = 0; i < l->p->n_errnos; i++)
		if (strcmp(l->p->errnos[i].name, name) == 0)
			return 0; /* the first errno given for a syscall answers for it */
	struct ab_seccomp_errno *e = realloc(l->p->errnos, (l->p->n_errnos + 1) * sizeof(*e));
	if (!e)
		return ab_error_set(l->err, ENOMEM, "loading the seccomp profile");
	l->p->errnos = e;
	snprintf(e[l->p->n_errnos].name, sizeof(e->name), "%s", name);
	e[l->p->n_errnos++].err = err;
	return 0;
}

static void note_unknown(struct loader *l, const char *name)
{
	size_t n = strlen(name);
	char *u = realloc(l->unknown, l->unknown_len + n + 3);
	if (!u)
		return;
	l->unknown = u;
	if (l->unknown_len) {
		memcpy(u + l->unknown_len, ", ", 2);
		l->unknown_len += 2;
	}
	memcpy(u + l->unknown_len, name, n + 1);
	l->unknown_len += n;
}

static int parse_rule(struct loader *l, json_object *rule, size_t idx, uint32_t default_action)
{
	static const char *const keys[] = {"names", "name",    "action",   "errnoRet", "errno",
					   "args",  "comment", "includes", "excludes", NULL};
	char where[64];
	snprintf(where, sizeof(where), "syscalls[%zu]", idx);
	if (!json_object_is_type(rule, json_type_object))
		return fail(l, "%s: expected an object, got %s", where, type_name(rule));
	int r = check_keys(l, rule, where, keys);
	if (r < 0)
		return r;
	json_object *names, *name, *v;
	bool has_names = json_object_object_get_ex(rule, "names", &names);
	bool has_name = json_object_object_get_ex(rule, "name", &name);
	if (has_names && !json_object_is_type(names, json_type_array))
		return fail(l, "%s.names: expected an array, got %s", where, type_name(names));
	if (has_name && !json_object_is_type(name, json_type_string))
		return fail(l, "%s.name: expected a string, got %s", where, type_name(name));
	if (!has_names && !has_name)
		return fail(l, "%s: %s", where, "needs \"names\"");
	char wa[200];
	snprintf(wa, sizeof(wa), "%s.action", where);
	if (!json_object_object_get_ex(rule, "action", &v))
		return fail(l, "%s: %s", where, "needs an \"action\"");
	enum act_kind kind;
	if ((r = parse_action(l, v, wa, &kind)) < 0)
		return r;
	unsigned long long err = EPERM;
	if ((r = get_errno(l, rule, "errnoRet", "errno", where, &err)) < 0)
		return r;
	struct scmp_arg_cmp cmps[6];
	unsigned n_cmps = 0;
	if (json_object_object_get_ex(rule, "args", &v) &&
	    (r = parse_args(l, v, where, cmps, &n_cmps)) < 0)
		return r;
	bool applies;
	if ((r = rule_applies(l, rule, where, &applies)) < 0 || !applies)
		return r;

	bool notified;
	uint32_t action = scmp_action(l, kind, (int)err, &notified);
	/* the listener answers by syscall name: a conditional rule whose errno
	 * differs from the default's could not be told apart from the default
	 * there, so it gives its errno directly (exact, but not counted) */
	if (notified && n_cmps > 0 && (int)err != l->p->default_errno) {
		action = SCMP_ACT_ERRNO((uint32_t)err);
		notified = false;
	}
	size_t count = has_names ? json_object_array_length(names) : 1;
	for (size_t i = 0; i < count; i++) {
		json_object *nm = has_names ? json_object_array_get_idx(names, i) : name;
		if (!json_object_is_type(nm, json_type_string))
			return fail(l, "%s.names[%zu]: expected a string, got %s", where, i,
				    type_name(nm));
		const char *sys = json_object_get_string(nm);
		if (is_plumbing(sys))
			continue; /* add_plumbing decides */
		int nr = seccomp_syscall_resolve_name(sys);
		if (nr == __NR_SCMP_ERROR) {
			note_unknown(l, sys);
			continue;
		}
		/* before the skip below: a rule that notifies like the default
		 * still says which errno to answer with */
		if (notified && (r = remember_errno(l, sys, (int)err)) < 0)
			return r;
		if (action == default_action)
			continue; /* libseccomp refuses rules that change nothing */
		r = seccomp_rule_add_array(l->ctx, action, nr, n_cmps, cmps);
		/* a syscall this machine's architectures lack (nr < 0: a
		 * pseudo-syscall number) is nothing to filter */
		if (r < 0 && nr < 0)
			continue;
		if (r < 0)
			return fail(l, "%s: cannot add a rule for \"%s\": %s", where, sys,
				    strerror(-r));
	}
	return 0;
}

/* The profile file's bytes, NUL-terminated, in *out (*len of them). */
int secprof_read(struct loader *l, char **out, size_t *len)
{
	cleanup_fd int fd = open(l->file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ab_error_set(l->err, errno, "seccomp profile %s", l->file);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return ab_error_set(l->err, errno, "seccomp profile %s", l->file);
	if (!S_ISREG(st.st_mode) || st.st_size > MAX_PROFILE_BYTES)
		return ab_error_plain(l->err, EINVAL,
				      "seccomp profile %s: not a regular file of at most 4 MiB",
				      l->file);
	cleanup_free char *buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		return ab_error_set(l->err, ENOMEM, "reading %s", l->file);
	ssize_t n = read(fd, buf, (size_t)st.st_size);
	if (n < 0)
		return ab_error_set(l->err, errno, "reading %s", l->file);
	buf[n] = '\0';
	*len = (size_t)n;
	*out = ab_steal_pointer(&buf);
	return 0;
}

static int parse_profile(struct loader *l, const char *buf, size_t n, json_object **out)
{
	size_t off;
	enum json_tokener_error je;
	int r = ab_json_parse_whole(buf, n, out, &off, &je);
	if (r == -ENOMEM)
		return ab_error_set(l->err, ENOMEM, "reading %s", l->file);
	if (r == 0)
		return 0;
	return ab_error_plain(l->err, EINVAL, "seccomp profile %s: invalid JSON at byte %zu: %s",
			      l->file, off,
			      je == json_tokener_success    ? "trailing data"
			      : je == json_tokener_continue ? "unexpected end"
							    : json_tokener_error_desc(je));
}

static int load(struct loader *l, json_object *root)
{
	static const char *const keys[] = {"defaultAction",
					   "defaultErrnoRet",
					   "defaultErrno",
					   "architectures",
					   "archMap",
					   "syscalls",
					   "comment",
					   "flags",
					   "listenerPath",
					   "listenerMetadata",
					   NULL};
	if (!json_object_is_type(root, json_type_object))
		return fail(l, "%s: expected an object, got %s", "(top)", type_name(root));
	int r = check_keys(l, root, "(top)", keys);
	if (r < 0)
		return r;
	json_object *v;
	if (json_object_object_get_ex(root, "listenerPath", &v) ||
	    json_object_object_get_ex(root, "listenerMetadata", &v))
		return fail(l, "%s: %s", "listenerPath",
			    "a seccomp agent is not supported: agentbox is its own listener");
	if (json_object_object_get_ex(root, "flags", &v)) {
		static const char *const flags[] = {"SECCOMP_FILTER_FLAG_TSYNC",
						    "SECCOMP_FILTER_FLAG_LOG",
						    "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
						    "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV", NULL};
		if (!json_object_is_type(v, json_type_array))
			return fail(l, "%s: expected an array, got %s", "flags", type_name(v));
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			json_object *f = json_object_array_get_idx(v, i);
			bool ok = false;
			for (const char *const *k = flags; *k && !ok; k++)
				ok = json_object_is_type(f, json_type_string) &&
				     strcmp(json_object_get_string(f), *k) == 0;
			if (!ok)
				return fail(l, "flags[%zu]: unknown filter flag", i);
		}
	}
	if (!json_object_object_get_ex(root, "defaultAction", &v))
		return fail(l, "%s: %s", "(top)", "needs a \"defaultAction\"");
	enum act_kind def;
	if ((r = parse_action(l, v, "defaultAction", &def)) < 0)
		return r;
	unsigned long long def_err = EPERM;
	if ((r = get_errno(l, root, "defaultErrnoRet", "defaultErrno", "", &def_err)) < 0)
		return r;
	bool notified;
	uint32_t def_action = scmp_action(l, def, (int)def_err, &notified);
	l->p->default_errno = (int)def_err;
	l->ctx = seccomp_init(def_action);
	if (!l->ctx)
		return ab_error_plain(l->err, EINVAL, "seccomp profile %s: libseccomp refused it",
				      l->file);
	/* a foreign ABI (i386 or x32 on x86-64) not named by the profile kills
	 * the process: nothing legitimate uses one by accident */
	seccomp_attr_set(l->ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
	seccomp_attr_set(l->ctx, SCMP_FLTATR_CTL_NNP, 0);
	if (l->optimize)
		seccomp_attr_set(l->ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if ((r = parse_arches(l, root)) < 0)
		return r;
	if (json_object_object_get_ex(root, "syscalls", &v)) {
		if (!json_object_is_type(v, json_type_array))
			return fail(l, "%s: expected an array, got %s", "syscalls", type_name(v));
		for (size_t i = 0; i < json_object_array_length(v); i++)
			if ((r = parse_rule(l, json_object_array_get_idx(v, i), i, def_action)) < 0)
				return r;
	}
	if ((r = add_plumbing(l, def_action)) < 0)
		return r;
	return secprof_export(l);
}

void secprof_loader_init(struct loader *l)
{
	l->use_notify = seccomp_api_get() >= 6;
	native_arch_docker_name(l->native, sizeof(l->native));
	struct utsname u;
	uname(&u);
	sscanf(u.release, "%u.%u", &l->kernel_major, &l->kernel_minor);
}

/* Compile the file's bytes buf (len n) into l->p. */
int secprof_compile(struct loader *l, const char *buf, size_t n)
{
	json_object *root = NULL;
	int r = parse_profile(l, buf, n, &root);
	if (r == 0)
		r = load(l, root);
	if (root)
		json_object_put(root);
	if (l->ctx)
		seccomp_release(l->ctx);
	l->ctx = NULL;
	return r;
}

int ab_seccomp_load(const char *spec, struct ab_seccomp_profile **out, char **notices,
		    struct ab_error *err)
{
	*out = NULL;
	if (notices)
		*notices = NULL;
	if (!spec || strcmp(spec, "none") == 0)
		return 0;
	char path[4200], name[64] = "";
	if (strcmp(spec, "default") == 0 || strcmp(spec, "strict") == 0 ||
	    strcmp(spec, "permissive") == 0) {
		snprintf(name, sizeof(name), "seccomp/%s.json", spec);
		snprintf(path, sizeof(path), "%s/%s", ab_policy_dir(), name);
	} else {
		snprintf(path, sizeof(path), "%s", spec);
	}

	struct loader l = {.file = path, .err = err};
	secprof_loader_init(&l);
	l.p = calloc(1, sizeof(*l.p));
	if (!l.p)
		return ab_error_set(err, ENOMEM, "loading the seccomp profile");
	cleanup_free char *buf = NULL;
	size_t n = 0;
	int r = secprof_read(&l, &buf, &n);
	const struct ab_policy_file *builtin = NULL;
	if (r == -ENOENT && *name && (builtin = ab_policy_builtin(name))) {
		/* not on disk: the copy built into the binary */
		snprintf(path, sizeof(path), "(built-in) %s", name);
		*err = (struct ab_error){0};
		r = (buf = strndup(builtin->data, builtin->size)) ? 0 : -ENOMEM;
		n = builtin->size;
	}
	if (r == 0 && !secprof_take_precompiled(&l, buf, n))
		r = secprof_compile(&l, buf, n);
	if (r == 0 && l.unknown && notices &&
	    asprintf(notices, "seccomp profile %s: syscalls unknown to libseccomp skipped: %s",
		     path, l.unknown) < 0)
		*notices = NULL;
	free(l.unknown);
	if (r < 0) {
		ab_seccomp_free(l.p);
		return r;
	}
	*out = l.p;
	return 0;
}
