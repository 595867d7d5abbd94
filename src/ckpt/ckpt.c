/* Checkpoints: the stack's state and the protocol's ops (ckpt.h). */
#include "ckpt/ckpt.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layer/layer_review.h"
#include "util/error.h"
#include "util/util.h"

#define STACK_FILE   "ckpt.stack"
#define NAME_MAX_LEN 63

struct ckpt {
	char name[NAME_MAX_LEN + 1];
	char **layers; /* upper first */
	size_t n;
};

struct stack {
	unsigned next;
	char **top;
	size_t n_top;
	struct ckpt *c;
	size_t n_c;
	/* a fork's: the layers beneath every list above, in layer directories
	 * beside this one ("DIR/uN", top first; ckpt_fork.c) */
	char **base;
	size_t n_base;
};

static void stack_free(struct stack *s)
{
	ab_cleanup_strvp(&s->top);
	ab_cleanup_strvp(&s->base);
	for (size_t i = 0; i < s->n_c; i++)
		ab_cleanup_strvp(&s->c[i].layers);
	free(s->c);
	*s = (struct stack){0};
}

static bool layer_name_ok(const char *s)
{
	if (!strcmp(s, "upper"))
		return true;
	if (s[0] != 'u' || !s[1])
		return false;
	for (const char *p = s + 1; *p; p++)
		if (*p < '0' || *p > '9')
			return false;
	return strlen(s) < 12;
}

bool ckpt_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > NAME_MAX_LEN || s[0] == '.' || s[0] == '-')
		return false;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			return false;
	return true;
}

/* A fork's base layer: "DIR/uN", DIR a layer directory beside this one. */
bool ckpt_base_name_ok(const char *s)
{
	const char *slash = strchr(s, '/');
	if (!slash || slash == s || slash - s > 32 || s[0] == '.')
		return false;
	for (const char *p = s; p < slash; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
			return false;
	return layer_name_ok(slash + 1);
}

/* The words of line after the first (layer names), into *out. */
static int words(char *line, char ***out, size_t *n, bool (*ok)(const char *))
{
	char *save = NULL;
	for (char *w = strtok_r(line, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		if (!ok(w) || *n > CKPT_MAX_DEPTH)
			return -EBADMSG;
		if (ab_strv_push(out, n, w) < 0)
			return -ENOMEM;
	}
	return *n ? 0 : -EBADMSG;
}

static int stack_read(const struct ab_layer *l, struct stack *s, struct ab_error *err)
{
	*s = (struct stack){.next = 1};
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" STACK_FILE, l->dir);
	FILE *f = fopen(path, "re");
	if (!f && errno == ENOENT)
		return ab_strv_push(&s->top, &s->n_top, "upper") < 0
			       ? ab_error_set(err, ENOMEM, "checkpoint")
			       : 0;
	if (!f)
		return ab_error_set(err, errno, "cannot read %s", path);
	char line[4096];
	int r = 0;
	while (r == 0 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strncmp(line, "next ", 5)) {
			s->next = (unsigned)strtoul(line + 5, NULL, 10);
		} else if (!strncmp(line, "top ", 4)) {
			r = words(line + 4, &s->top, &s->n_top, layer_name_ok);
		} else if (!strncmp(line, "base ", 5) && !s->n_base) {
			r = words(line + 5, &s->base, &s->n_base, ckpt_base_name_ok);
		} else if (!strncmp(line, "ckpt ", 5)) {
			char *name = line + 5, *sp = strchr(name, ' ');
			struct ckpt *c = sp ? realloc(s->c, (s->n_c + 1) * sizeof(*c)) : NULL;
			if (!c) {
				r = sp ? -ENOMEM : -EBADMSG;
				break;
			}
			s->c = c;
			c = &s->c[s->n_c++];
			*c = (struct ckpt){0};
			*sp = '\0';
			if (!ckpt_name_ok(name)) {
				r = -EBADMSG;
				break;
			}
			memcpy(c->name, name, strlen(name) + 1);
			r = words(sp + 1, &c->layers, &c->n, layer_name_ok);
		} else
			r = -EBADMSG;
	}
	fclose(f);
	if (r == 0 && !s->n_top)
		r = -EBADMSG;
	if (r < 0)
		return ab_error_set(err, -r, "%s is not what agentbox wrote", path);
	return 0;
}

static void put_list(FILE *f, char *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, " %s", v[i]);
	fputc('\n', f);
}

/* Written to a new file and renamed over the old: either is whole. */
static int stack_write(const struct ab_layer *l, const struct stack *s, struct ab_error *err)
{
	char path[PATH_MAX], tmp[PATH_MAX];
	snprintf(path, sizeof(path), "%s/" STACK_FILE, l->dir);
	snprintf(tmp, sizeof(tmp), "%s/" STACK_FILE ".new", l->dir);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		ab_close_keep_errno(fd);
		return ab_error_set(err, errno, "cannot write %s", tmp);
	}
	fprintf(f, "next %u\ntop", s->next);
	put_list(f, s->top, s->n_top);
	for (size_t i = 0; i < s->n_c; i++) {
		fprintf(f, "ckpt %s", s->c[i].name);
		put_list(f, s->c[i].layers, s->c[i].n);
	}
	if (s->n_base) {
		fputs("base", f);
		put_list(f, s->base, s->n_base);
	}
	if (fclose(f) != 0 || rename(tmp, path) < 0)
		return ab_error_set(err, errno, "cannot write %s", path);
	return 0;
}

static struct ckpt *find(struct stack *s, const char *name)
{
	for (size_t i = 0; i < s->n_c; i++)
		if (!strcmp(s->c[i].name, name))
			return &s->c[i];
	return NULL;
}

/* DIR/uN and DIR/wN, owned by whom the sandbox writes as. */
static int new_upper(const struct ab_layer *l, unsigned n, char *upper, char *work,
		     struct ab_error *err)
{
	snprintf(upper, 16, "u%u", n);
	snprintf(work, 16, "w%u", n);
	struct stat st;
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/upper", l->dir);
	if (stat(path, &st) < 0)
		return ab_error_set(err, errno, "cannot read the layer %s", path);
	const char *sub[] = {upper, work};
	for (size_t i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", l->dir, sub[i]);
		if (mkdir(path, 0755) < 0 ||
		    (geteuid() == 0 && chown(path, st.st_uid, st.st_gid) < 0))
			return ab_error_set(err, errno, "cannot create %s", path);
	}
	return 0;
}

/* The switch: a fresh upper over layers (upper first), then the state. */
static int switch_to(const struct ab_layer *l, struct stack *s, char *const *layers, size_t n,
		     struct ab_error *err)
{
	if (n + 1 + s->n_base > CKPT_MAX_DEPTH)
		return ab_error_plain(err, EINVAL,
				      "the workspace stands on %zu layers already, at most %d: "
				      "restore an earlier checkpoint, or commit and start a "
				      "new sandbox",
				      n + s->n_base, CKPT_MAX_DEPTH);
	if (s->next > CKPT_MAX_SWITCHES)
		return ab_error_plain(err, EINVAL,
				      "this sandbox has switched its workspace %d times, the "
				      "most it may",
				      CKPT_MAX_SWITCHES);
	char upper[16], work[16];
	int r = new_upper(l, s->next, upper, work, err);
	if (r < 0)
		return r;
	char *names[CKPT_MAX_DEPTH + 1];
	names[0] = upper;
	for (size_t i = 0; i < n; i++)
		names[i + 1] = layers[i];
	for (size_t i = 0; i < s->n_base; i++) /* a fork's: beneath them all */
		names[n + 1 + i] = s->base[i];
	if ((r = ckpt_mount(l, names, n + 1 + s->n_base, work, err)) < 0) {
		/* nothing mounted (or all taken off again): the next try makes
		 * them again; ESTALE: still mounted, its upper in use */
		cleanup_fd int dfd =
			err->code == ESTALE ? -1 : open(l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			layer_remove_tree_at(dfd, upper);
			layer_remove_tree_at(dfd, work);
		}
		return r;
	}
	char **top = NULL;
	size_t n_top = 0;
	for (size_t i = 0; i < n + 1; i++)
		if (ab_strv_push(&top, &n_top, names[i]) < 0) {
			ab_cleanup_strvp(&top);
			return ab_error_set(err, ENOMEM, "checkpoint");
		}
	ab_cleanup_strvp(&s->top);
	s->top = top;
	s->n_top = n_top;
	s->next++;
	return stack_write(l, s, err);
}

static const char *str_field(json_object *req, const char *key)
{
	json_object *v;
	if (!json_object_object_get_ex(req, key, &v) || json_object_is_type(v, json_type_null))
		return NULL;
	return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "";
}

/* What a switch restacks: /workspace, and /tmp and home where they are
 * overlays (view/owntmp.h). */
static json_object *paths_of(const struct ab_layer *l)
{
	json_object *arr = json_object_new_array();
	json_object_array_add(arr, json_object_new_string("/workspace"));
	for (size_t i = 0; i < l->n_own; i++)
		if (l->own[i].tree >= 0)
			json_object_array_add(arr, json_object_new_string(l->own[i].dst));
	return arr;
}

/* The bytes of layer name of /tmp's and home's, in the sandbox's memory. */
static long long own_bytes(const struct ab_layer *l, const char *name)
{
	long long n = 0;
	for (size_t i = 0; i < l->n_own; i++) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", l->own[i].tree, name);
		if (l->own[i].tree >= 0)
			n += ckpt_tree_bytes(path);
	}
	return n;
}

/* --layer-quota: what the layers of all the caller's sandboxes hold (the
 * directory l->dir is in), under the bound. A walk of them all: its time
 * grows with their entries, which only a quota asks for. */
static int quota_check(const struct ab_layer *l, struct ab_error *err)
{
	char base[PATH_MAX];
	const char *slash = strrchr(l->dir, '/');
	if (!l->quota || !slash)
		return 0;
	snprintf(base, sizeof(base), "%.*s", (int)(slash - l->dir), l->dir);
	long long used = 0;
	int r = ckpt_tree_bytes_all(base, &used);
	if (r < 0 && r != -E2BIG)
		return ab_error_set(err, -r, "checkpoint: cannot count the layers in %s", base);
	if (r == 0 && (unsigned long long)used < l->quota)
		return 0;
	return ab_error_plain(err, EDQUOT,
			      "checkpoint: the layers of your sandboxes (%s) hold %s%lld bytes, "
			      "the quota is %llu (--layer-quota): commit and rm a sandbox, or "
			      "restore an earlier checkpoint",
			      base, r < 0 ? "more than " : "", used, l->quota);
}

static int op_checkpoint(const struct ab_layer *l, struct stack *s, json_object *req,
			 json_object *o, struct ab_error *err)
{
	const char *name = str_field(req, "name");
	char auto_name[32];
	if (!name) {
		for (unsigned i = (unsigned)s->n_c + 1;; i++) {
			snprintf(auto_name, sizeof(auto_name), "c%u", i);
			if (!find(s, auto_name))
				break;
		}
		name = auto_name;
	}
	if (!ckpt_name_ok(name))
		return ab_error_plain(err, EINVAL,
				      "checkpoint: 'name' must be 1 to %d letters, digits, '.', "
				      "'_' or '-', not starting with '.' or '-'",
				      NAME_MAX_LEN);
	if (find(s, name))
		return ab_error_plain(err, EEXIST, "checkpoint: there is a checkpoint %s already",
				      name);
	int r = quota_check(l, err);
	if (r < 0)
		return r;
	struct ckpt *c = realloc(s->c, (s->n_c + 1) * sizeof(*c));
	if (!c)
		return ab_error_set(err, ENOMEM, "checkpoint");
	s->c = c;
	c = &s->c[s->n_c];
	*c = (struct ckpt){0};
	memcpy(c->name, name, strlen(name) + 1); /* checked: at most NAME_MAX_LEN */
	for (size_t i = 0; i < s->n_top; i++)
		if (ab_strv_push(&c->layers, &c->n, s->top[i]) < 0) {
			ab_cleanup_strvp(&c->layers);
			return ab_error_set(err, ENOMEM, "checkpoint");
		}
	s->n_c++;
	r = switch_to(l, s, c->layers, c->n, err);
	if (r < 0)
		return r;
	json_object_object_add(o, "checkpoint", json_object_new_string(name));
	json_object_object_add(o, "layers", json_object_new_int((int)c->n));
	json_object_object_add(o, "paths", paths_of(l));
	return 0;
}

static int op_restore(const struct ab_layer *l, struct stack *s, json_object *req, json_object *o,
		      struct ab_error *err)
{
	const char *name = str_field(req, "checkpoint");
	if (!name || !*name)
		return ab_error_plain(err, EINVAL, "restore: 'checkpoint' (a name) is required");
	struct ckpt *c = find(s, name);
	if (!c)
		return ab_error_plain(err, ENOENT, "restore: no checkpoint %.64s", name);
	int r = switch_to(l, s, c->layers, c->n, err);
	if (r < 0)
		return r;
	json_object_object_add(o, "checkpoint", json_object_new_string(name));
	json_object_object_add(o, "paths", paths_of(l));
	return 0;
}

static int op_list(const struct ab_layer *l, struct stack *s, json_object *o)
{
	json_object *arr = json_object_new_array();
	for (size_t i = 0; i < s->n_c; i++) {
		json_object *e = json_object_new_object();
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", l->dir, s->c[i].layers[0]);
		json_object_object_add(e, "name", json_object_new_string(s->c[i].name));
		json_object_object_add(e, "layers", json_object_new_int((int)s->c[i].n));
		/* what this checkpoint's own layer holds: the writes since the one below */
		json_object_object_add(e, "bytes", json_object_new_int64(ckpt_tree_bytes(path)));
		json_object_object_add(e, "own_bytes",
				       json_object_new_int64(own_bytes(l, s->c[i].layers[0])));
		json_object_array_add(arr, e);
	}
	json_object_object_add(o, "checkpoints", arr);
	json_object_object_add(o, "paths", paths_of(l));
	json_object_object_add(o, "layers", json_object_new_int((int)s->n_top));
	return 0;
}

const char *const *ckpt_op_fields(const char *op)
{
	static const char *const checkpoint[] = {"name", NULL};
	static const char *const restore[] = {"checkpoint", NULL};
	static const char *const fork[] = {"from", "count", "name", NULL}; /* ckpt_fork.c */
	static const char *const none[] = {NULL};
	return !strcmp(op, "checkpoint")    ? checkpoint
	       : !strcmp(op, "restore")	    ? restore
	       : !strcmp(op, "checkpoints") ? none
	       : !strcmp(op, "fork")	    ? fork
					    : NULL;
}

bool ckpt_op_switches(const char *op)
{
	return !strcmp(op, "checkpoint") || !strcmp(op, "restore");
}

bool ckpt_stacked(const struct ab_layer *l)
{
	char path[PATH_MAX];
	if (!l)
		return false;
	snprintf(path, sizeof(path), "%s/" STACK_FILE, l->dir);
	return access(path, F_OK) == 0;
}

int ckpt_review_prepare(struct ab_layer *l, struct ab_error *err)
{
	struct stack s;
	int r = stack_read(l, &s, err);
	if (r < 0)
		return r;
	/* a fork's: its own layers over the ones it stands on ("DIR/uN",
	 * DIR beside l->dir) */
	cleanup_strv char **names = NULL;
	char rel[PATH_MAX];
	size_t n = 0;
	for (size_t i = 0; r == 0 && i < s.n_top + s.n_base; i++) {
		if (i >= s.n_top)
			snprintf(rel, sizeof(rel), "../%s", s.base[i - s.n_top]);
		if (ab_strv_push(&names, &n, i < s.n_top ? s.top[i] : rel) < 0)
			r = ab_error_set(err, ENOMEM, "changes: out of memory");
	}
	if (r == 0 && (r = ckpt_merge(l, names, n, err)) == 0)
		l->review_upper = CKPT_MERGED;
	stack_free(&s);
	return r;
}

bool ckpt_is_changes_since(const char *op, json_object *req)
{
	return !strcmp(op, "changes") && str_field(req, "since");
}

/* Why op cannot be done on l (direct mode, a kept layer), or 0. */
static int refused(const struct ab_layer *l, const char *op, struct ab_error *err)
{
	if (!l)
		return ab_error_plain(err, EINVAL,
				      "%s: the workspace is in direct mode: the sandbox writes to "
				      "the host's files, which no checkpoint can take back; "
				      "create it with --workspace-mode overlay",
				      op);
	if (l->keep && (ckpt_op_switches(op) || !strcmp(op, "fork")))
		return ab_error_plain(err, EINVAL,
				      "%s: the layer is kept (--keep-changes), and a kept layer "
				      "is one upper; checkpoints are for a layer that goes with "
				      "its sandbox",
				      op);
	return 0;
}

int ckpt_fork_base(struct ab_layer *l, const char *from, bool busy, char ***base, size_t *n_base,
		   char *name, size_t size, struct ab_error *err)
{
	struct stack s;
	int r = refused(l, "fork", err);
	if (r < 0 || (r = stack_read(l, &s, err)) < 0)
		return r;
	struct ckpt *c = from ? find(&s, from) : NULL;
	if (from && !c)
		r = ab_error_plain(err, ENOENT, "fork: no checkpoint %.64s", from);
	else if (!from && busy)
		r = ab_error_plain(err, EBUSY,
				   "fork: commands are running; fork from a checkpoint taken "
				   "before (--from C), or between commands");
	else if (!from) { /* the state now, checkpointed */
		json_object *req = json_object_new_object(), *o = json_object_new_object();
		r = op_checkpoint(l, &s, req, o, err);
		json_object_put(req);
		json_object_put(o);
		c = r < 0 ? NULL : &s.c[s.n_c - 1];
	}
	const char *dir = strrchr(l->dir, '/') + 1;
	for (size_t i = 0; c && r == 0 && i < c->n + s.n_base; i++) {
		char b[PATH_MAX];
		if (i < c->n)
			snprintf(b, sizeof(b), "%s/%s", dir, c->layers[i]);
		if (ab_strv_push(base, n_base, i < c->n ? b : s.base[i - c->n]) < 0)
			r = ab_error_set(err, ENOMEM, "fork");
	}
	if (r == 0 && *n_base + 1 > CKPT_MAX_DEPTH)
		r = ab_error_plain(err, EINVAL,
				   "fork: checkpoint %s stands on %zu layers, at most %d: fork "
				   "from an earlier one",
				   c->name, *n_base, CKPT_MAX_DEPTH - 1);
	if (r == 0)
		snprintf(name, size, "%s", c->name);
	stack_free(&s);
	return r;
}

int ckpt_fork_begin(struct ab_layer *l, char *const *base, size_t n,
		    const struct ckpt_fork_own *own, size_t n_own, struct ab_error *err)
{
	struct stack s = {.next = 1};
	int r = 0;
	for (size_t i = 0; i < l->n_own; i++) /* the same options: the same paths */
		for (size_t k = 0; k < n_own; k++)
			if (l->own[i].from < 0 && own[k].tree >= 0 &&
			    !strcmp(l->own[i].dst, own[k].dst))
				l->own[i].from = own[k].tree;
	for (size_t i = 0; r == 0 && i < n; i++) {
		char dir[40];
		if (!ckpt_base_name_ok(base[i]))
			return ab_error_plain(err, EINVAL, "fork: a bad layer %.64s", base[i]);
		snprintf(dir, sizeof(dir), "%.*s", (int)(strchr(base[i], '/') - base[i]), base[i]);
		r = layer_hold(l, dir, err);
		if (r == 0 && ab_strv_push(&s.base, &s.n_base, base[i]) < 0)
			r = ab_error_set(err, ENOMEM, "fork");
	}
	/* a fresh upper over them: the fork's first write goes there */
	if (r == 0)
		r = switch_to(l, &s, NULL, 0, err);
	stack_free(&s);
	for (size_t i = 0; i < l->n_own; i++) /* copied: the maker's memory is not ours */
		l->own[i].from = -1;
	for (size_t k = 0; k < n_own; k++)
		ab_close_keep_errno(own[k].tree);
	return r;
}

int ckpt_session_op(struct ab_layer *l, const char *op, json_object *req, json_object **reply,
		    struct ab_error *err)
{
	*reply = NULL;
	struct stack s;
	int r = refused(l, op, err);
	if (r < 0 || (r = stack_read(l, &s, err)) < 0)
		return r;
	json_object *o = json_object_new_object();
	if (!strcmp(op, "checkpoint"))
		r = op_checkpoint(l, &s, req, o, err);
	else if (!strcmp(op, "restore"))
		r = op_restore(l, &s, req, o, err);
	else if (!strcmp(op, "checkpoints"))
		r = op_list(l, &s, o);
	else {
		const char *since = str_field(req, "since");
		struct ckpt *c = since ? find(&s, since) : NULL;
		if (!c)
			r = ab_error_plain(err, ENOENT, "changes: no checkpoint %.64s",
					   since ? since : "");
		else
			r = ckpt_changes(l, s.top, s.n_top, c->layers, c->n, o, err);
	}
	stack_free(&s);
	if (r < 0) {
		json_object_put(o);
		return r;
	}
	*reply = o;
	return 0;
}
