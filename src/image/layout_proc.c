/* An OCI layout's JSON parsed in a confined helper (layout_proc.h). One
 * stream socket; each way a frame: a 32-bit length, then its bytes. The
 * launcher's frames are the files' texts; the helper's are lists of
 * NUL-ended strings: "ok" HEX (the manifest), "index" HEX (this platform's
 * manifest), "manifest" CONFIG N then HEX COMP SIZE for each layer, "config"
 * WORKDIR USER ENV..., or "err" ERRNO MESSAGE. */
#include "image/layout_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "confine/confine.h"
#include "image/sha256.h"
#include "image/unpack_proc.h"
#include "util/error.h"
#include "util/util.h"

#define MAX_TEXT  (4 << 20)		  /* oci.c's MAX_JSON */
#define MAX_REPLY (MAX_TEXT + (64 << 10)) /* a config's Env, at most its text */
#define SOCK	  3			  /* the helper's socket */

/* json-c's parsing and the frames: no file, no socket made, no exec. */
static const int helper_syscalls[] = {UNPACK_PROC_BASE_SYSCALLS};

static int io_full(int fd, void *buf, size_t n, bool out)
{
	for (size_t done = 0; done < n;) {
		ssize_t k = out ? send(fd, (char *)buf + done, n - done, MSG_NOSIGNAL)
				: read(fd, (char *)buf + done, n - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

static int send_frame(int fd, const void *p, size_t len)
{
	uint32_t n = (uint32_t)len;
	return io_full(fd, &n, sizeof(n), true) < 0 || io_full(fd, (void *)p, len, true) < 0 ? -1
											     : 0;
}

/* A frame of at most max bytes, NUL added; NULL at its end or on error. */
static char *recv_frame(int fd, size_t max, size_t *len)
{
	uint32_t n;
	if (io_full(fd, &n, sizeof(n), false) < 0 || n > max)
		return NULL;
	char *buf = malloc((size_t)n + 1);
	if (!buf || io_full(fd, buf, n, false) < 0) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* ---- the helper ---- */

struct out {
	char buf[MAX_REPLY];
	size_t len;
	bool full;
};

static void put(struct out *o, const char *s)
{
	size_t n = strlen(s) + 1;
	if (o->full || n > sizeof(o->buf) - o->len) {
		o->full = true;
		return;
	}
	memcpy(o->buf + o->len, s, n);
	o->len += n;
}

static void putu(struct out *o, unsigned long long v)
{
	char s[32];
	snprintf(s, sizeof(s), "%llu", v);
	put(o, s);
}

static _Noreturn void answer(struct out *o, int r, const struct ab_error *err)
{
	if (r < 0) {
		o->len = 0;
		o->full = false;
		put(o, "err");
		putu(o, (unsigned long long)(err->code > 0 && err->code < 4096 ? err->code : EIO));
		put(o, err->msg[0] ? err->msg : "cannot read the layout");
	}
	bool sent = !o->full && send_frame(SOCK, o->buf, o->len) == 0;
	_exit(r < 0 || !sent ? 1 : 0);
}

static void reply(struct out *o)
{
	if (o->full || send_frame(SOCK, o->buf, o->len) < 0)
		_exit(1);
	o->len = 0;
}

/* The texts in turn, parsed; an answer to each. */
static _Noreturn void serve(const char *dir, const char *tag, struct out *o)
{
	struct ab_error err = {0};
	struct oci_image img = {.dir = (char *)dir};
	char hex[65];
	bool index;
	size_t len;
	char *text = recv_frame(SOCK, MAX_TEXT, &len);
	int r = text ? oci_parse_index(dir, text, tag, hex, &err) : -EIO;
	free(text);
	if (r < 0)
		answer(o, r, &err);
	put(o, "ok");
	put(o, hex);
	reply(o);
	for (bool may_be_index = true;; may_be_index = false) {
		text = recv_frame(SOCK, MAX_TEXT, &len);
		r = text ? oci_parse_manifest(dir, text, may_be_index, &index, hex, &img, &err)
			 : -EIO;
		free(text);
		if (r < 0)
			answer(o, r, &err);
		if (!index)
			break;
		put(o, "index");
		put(o, hex);
		reply(o);
	}
	put(o, "manifest");
	put(o, hex);
	putu(o, img.n_layers);
	for (size_t i = 0; i < img.n_layers; i++) {
		put(o, img.layers[i].hex);
		putu(o, img.layers[i].comp);
		putu(o, img.layers[i].size);
	}
	reply(o);
	text = recv_frame(SOCK, MAX_TEXT, &len);
	r = text ? oci_parse_config(dir, text, &img, &err) : -EIO;
	free(text);
	if (r < 0)
		answer(o, r, &err);
	put(o, "config");
	put(o, img.workdir ? img.workdir : "");
	put(o, img.user ? img.user : "");
	for (size_t i = 0; i < img.n_env; i++)
		put(o, img.env[i]);
	answer(o, 0, &err);
}

int layout_proc_main(int argc, char **argv)
{
	/* agentbox __read-layout PARENT STOP DIR [TAG], its socket on 3 */
	long parent = argc >= 5 ? strtol(argv[2], NULL, 10) : 0;
	struct stat st;
	if (argc < 5 || argc > 6 || parent <= 1 || fstat(SOCK, &st) < 0 || !S_ISSOCK(st.st_mode)) {
		fputs("agentbox: __read-layout is agentbox's own, started by --image\n", stderr);
		return AB_EXIT_FAILURE;
	}
	unpack_proc_prelude("agentbox-layout");
	/* json-c's hash seed taken now, while it may still read /dev/urandom */
	json_object_put(json_tokener_parse("{\"seed\":1}"));
	static struct out o;
	struct confine_spec spec = {
		.keep_fds = (int[]){SOCK},
		.n_keep = 1,
		.mem_bytes = unpack_proc_mem(),
		.write_dir = -1, /* Landlock without a rule: no file at all */
		.parent = (pid_t)parent,
		.syscalls = helper_syscalls,
		.n_syscalls = AB_ARRAY_SIZE(helper_syscalls),
	};
	unpack_proc_identity(&spec.uid, &spec.gid, &spec.switch_id);
	struct ab_error err = {0}, cerr = {0};
	int abi;
	if (confine_self(&spec, &abi, &cerr) < 0)
		answer(&o,
		       ab_error_plain(&err, cerr.code,
				      "--image oci:%s: cannot confine the layout "
				      "helper: %s",
				      argv[4], cerr.msg),
		       &err);
	if (strcmp(argv[3], "1") == 0)
		raise(SIGSTOP); /* AGENTBOX_TEST_LAYOUT_STOP: looked at from outside */
	serve(argv[4], argc == 6 ? argv[5] : NULL, &o);
}

/* ---- the launcher ---- */

struct answer {
	char *buf;
	const char **s;
	size_t n;
};

static void answer_free(struct answer *a)
{
	free(a->buf);
	free(a->s);
	memset(a, 0, sizeof(*a));
}

/* a->buf's len bytes as its strings: 0, -ENOMEM, or -EINVAL when they do
 * not end with a NUL. */
static int split(struct answer *a, size_t len)
{
	if (len == 0 || a->buf[len - 1] != '\0')
		return -EINVAL;
	for (size_t i = 0; i < len; i++)
		a->n += a->buf[i] == '\0';
	if (!(a->s = calloc(a->n, sizeof(*a->s))))
		return -ENOMEM;
	for (size_t i = 0, k = 0; i < len; i += strlen(a->buf + i) + 1)
		a->s[k++] = a->buf + i;
	return 0;
}

/* The helper's next answer, split; its "err" as err (its message's
 * control characters made '?'); want: the kind expected (NULL: any), with
 * at least min strings. */
static int get_answer(int fd, const char *want, size_t min, struct answer *a, const char *what,
		      struct ab_error *err)
{
	answer_free(a);
	size_t len;
	a->buf = recv_frame(fd, MAX_REPLY, &len);
	int r = a->buf ? split(a, len) : -EPIPE;
	if (r == -ENOMEM)
		return ab_error_set(err, ENOMEM, "%s", what);
	if (r < 0)
		return -EPIPE;
	if (a->n == 3 && strcmp(a->s[0], "err") == 0) {
		long code = strtol(a->s[1], NULL, 10);
		for (char *c = (char *)a->s[2]; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				*c = '?';
		if (code > 0 && code < 4096 && a->s[2][0])
			return ab_error_plain(err, (int)code, "%s", a->s[2]);
	}
	return a->n >= min && (!want || strcmp(a->s[0], want) == 0) ? 0 : -EPIPE;
}

static int send_text(int fd, char *text)
{
	int r = send_frame(fd, text, strlen(text)) < 0 ? -EPIPE : 0;
	free(text);
	return r;
}

static bool is_count(const char *s, unsigned long long max, unsigned long long *v)
{
	char *end;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return *s >= '0' && *s <= '9' && !*end && !errno && *v <= max;
}

/* The manifest answer into img: each field checked. */
static int take_layers(const struct answer *a, struct oci_image *img, char chex[65])
{
	unsigned long long n, comp, size;
	if (a->n < 3 || !oci_is_hex(a->s[1]) || !is_count(a->s[2], OCI_MAX_LAYERS, &n) || n < 1 ||
	    a->n != 3 + 3 * n || !(img->layers = calloc(n, sizeof(*img->layers))))
		return -EPIPE;
	memcpy(chex, a->s[1], 65);
	img->n_layers = n;
	for (size_t i = 0; i < n; i++) {
		const char **f = a->s + 3 + 3 * i;
		if (!oci_is_hex(f[0]) || !is_count(f[1], OCI_GZIP, &comp) ||
		    !is_count(f[2], INT64_MAX, &size))
			return -EPIPE;
		memcpy(img->layers[i].hex, f[0], 65);
		img->layers[i].comp = (enum oci_compression)comp;
		img->layers[i].size = size;
	}
	return 0;
}

/* The config answer into img: NAME=VALUE entries only. */
static int take_config(const struct answer *a, struct oci_image *img, struct ab_error *err)
{
	if (a->n < 3)
		return -EPIPE;
	if ((a->s[1][0] && !(img->workdir = strdup(a->s[1]))) ||
	    (a->s[2][0] && !(img->user = strdup(a->s[2]))) ||
	    !(img->env = calloc(a->n - 3 + 1, sizeof(char *))))
		return ab_error_set(err, ENOMEM, "reading the image config");
	for (size_t i = 3; i < a->n; i++) {
		const char *eq = strchr(a->s[i], '=');
		if (!eq || eq == a->s[i])
			return -EPIPE;
		if (!(img->env[img->n_env++] = strdup(a->s[i])))
			return ab_error_set(err, ENOMEM, "reading the image config");
	}
	return 0;
}

/* text sent (a helper that ended early still has its answer read), the
 * answer taken. */
static int step(int fd, char *text, const char *want, size_t min, struct answer *a,
		struct ab_error *err)
{
	if (!text)
		return -err->code;
	send_text(fd, text);
	return get_answer(fd, want, min, a, "--image", err);
}

/* The texts sent in turn, the answers taken: 0, -EPIPE when the helper
 * failed to answer (or answered nonsense), or -errno with err. */
static int exchange(int fd, const char *dir, char *index, struct oci_image *img, char chex[65],
		    struct ab_error *err)
{
	struct answer a = {0};
	int r = step(fd, index, "ok", 2, &a, err);
	if (r == 0 && !oci_is_hex(a.s[1]))
		r = -EPIPE;
	if (r == 0) {
		memcpy(img->manifest_hex, a.s[1], 65);
		r = step(fd, oci_read_blob_text(dir, img->manifest_hex, "manifest", err), NULL, 2,
			 &a, err);
	}
	if (r == 0 && strcmp(a.s[0], "index") == 0) {
		/* a multi-platform image: this platform's manifest */
		r = oci_is_hex(a.s[1]) ? 0 : -EPIPE;
		if (r == 0) {
			memcpy(img->manifest_hex, a.s[1], 65);
			r = step(fd, oci_read_blob_text(dir, img->manifest_hex, "manifest", err),
				 "manifest", 3, &a, err);
		}
	}
	if (r == 0)
		r = strcmp(a.s[0], "manifest") == 0 ? take_layers(&a, img, chex) : -EPIPE;
	if (r == 0)
		r = step(fd, oci_read_blob_text(dir, chex, "config", err), "config", 3, &a, err);
	if (r == 0)
		r = take_config(&a, img, err);
	answer_free(&a);
	return r;
}

/* ---- what the helper found, remembered ----
 * images/KEY.parsed in the cache (KEY: the sha256 of index.json's text, a
 * NUL and the tag): the manifest's digest, then the helper's manifest and
 * config answers, as strings. Written by the launcher into the cache it
 * trusts (cache_dir.h), read back only when the caller's, checked as an
 * answer is; a start whose index.json and tag are the same as an earlier
 * one's needs no parse, only the manifest's and config's blobs hashed
 * again. `agentbox images prune` removes them. */

static int memo_path(char *p, size_t n, const char *base, const char *index, const char *tag,
		     struct ab_error *err)
{
	struct sha256 h;
	char key[65];
	int r = sha256_init(&h, err);
	if (r < 0)
		return r;
	sha256_update(&h, index, strlen(index) + 1);
	sha256_update(&h, tag ? tag : "", tag ? strlen(tag) : 0);
	sha256_hex(&h, key);
	snprintf(p, n, "%s/images/%s.parsed", base, key);
	return 0;
}

/* The record at p into img and chex: 0, or -ENOENT (none, or not one to
 * believe: parsed anew). */
static int memo_read(const char *p, struct oci_image *img, char chex[65])
{
	cleanup_fd int fd = open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    st.st_size < 2 || st.st_size > MAX_REPLY)
		return -ENOENT;
	struct answer a = {.buf = malloc((size_t)st.st_size)}, m, c;
	size_t len = (size_t)st.st_size;
	int r = a.buf && read(fd, a.buf, len) == (ssize_t)len ? split(&a, len) : -ENOENT;
	unsigned long long n;
	if (r == 0 && (a.n < 4 || !oci_is_hex(a.s[0]) || strcmp(a.s[1], "manifest") ||
		       !is_count(a.s[3], OCI_MAX_LAYERS, &n) || a.n < 1 + 3 + 3 * n + 3))
		r = -ENOENT;
	if (r == 0) {
		memcpy(img->manifest_hex, a.s[0], 65);
		m = (struct answer){.s = a.s + 1, .n = 3 + 3 * n};
		c = (struct answer){.s = a.s + 4 + 3 * n, .n = a.n - 4 - 3 * n};
		struct ab_error ignored = {0};
		if (strcmp(c.s[0], "config") || take_layers(&m, img, chex) < 0 ||
		    take_config(&c, img, &ignored) < 0)
			r = -ENOENT;
	}
	answer_free(&a);
	return r;
}

static void memo_write(const char *p, const struct oci_image *img, const char chex[65])
{
	cleanup_free struct out *o = calloc(1, sizeof(*o));
	if (!o)
		return;
	put(o, img->manifest_hex);
	put(o, "manifest");
	put(o, chex);
	putu(o, img->n_layers);
	for (size_t i = 0; i < img->n_layers; i++) {
		put(o, img->layers[i].hex);
		putu(o, img->layers[i].comp);
		putu(o, img->layers[i].size);
	}
	put(o, "config");
	put(o, img->workdir ? img->workdir : "");
	put(o, img->user ? img->user : "");
	for (size_t i = 0; i < img->n_env; i++)
		put(o, img->env[i]);
	char tmp[PATH_MAX + 200];
	snprintf(tmp, sizeof(tmp), "%s.new", p);
	cleanup_fd int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (o->full || fd < 0 || write(fd, o->buf, o->len) != (ssize_t)o->len || rename(tmp, p) < 0)
		unlink(tmp);
}

/* The layout through the helper; chex: the config's digest. */
static int parse_in_helper(const char *dir, const char *tag, char *index, struct oci_image *img,
			   char chex[65], struct ab_error *err)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		free(index);
		return ab_error_set(err, errno, "--image oci:%s: cannot make a socket", dir);
	}
	char parent[32], what[PATH_MAX + 16];
	snprintf(parent, sizeof(parent), "%d", (int)getpid());
	snprintf(what, sizeof(what), "--image oci:%s", dir);
	bool stop = getenv("AGENTBOX_TEST_LAYOUT_STOP") != NULL;
	char *argv[] = {"agentbox",  "__read-layout", parent, stop ? "1" : "0",
			(char *)dir, (char *)tag,     NULL};
	pid_t pid = unpack_proc_spawn(argv, &sv[1], 1);
	close(sv[1]);
	cleanup_fd int fd = sv[0];
	if (pid < 0) {
		free(index);
		return ab_error_set(err, (int)-pid, "%s: cannot start the layout helper", what);
	}
	if (stop) {
		fprintf(stderr, "agentbox: test: the layout helper is pid %d\n", (int)pid);
		fflush(stderr);
	}
	int r = exchange(fd, dir, index, img, chex, err);
	close(ab_steal_fd(&fd));
	if (r < 0)
		kill(pid, SIGKILL);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (r == -EPIPE) {
		r = unpack_proc_ended(status, what, "layout", false, err);
		if (r == 0)
			r = ab_error_plain(err, EIO, "%s: the layout helper's answer is malformed",
					   what);
	}
	return r;
}

int layout_proc_read(const char *dir, const char *tag, const char *base, struct oci_image *img,
		     struct ab_error *err)
{
	memset(img, 0, sizeof(*img));
	if (!(img->dir = strdup(dir)) || (tag && !(img->tag = strdup(tag))))
		return ab_error_set(err, ENOMEM, "reading the image");
	char *index = oci_read_index(dir, err);
	if (!index)
		return -err->code;
	char memo[PATH_MAX + 100], chex[65];
	int r = base ? memo_path(memo, sizeof(memo), base, index, tag, err) : -ENOENT;
	if (r < 0 && r != -ENOENT) {
		free(index);
		return r;
	}
	if (r == 0 && memo_read(memo, img, chex) == 0) {
		/* remembered: the blobs it names still hash to their digests */
		free(index);
		char *m = oci_read_blob_text(dir, img->manifest_hex, "manifest", err);
		char *c = m ? oci_read_blob_text(dir, chex, "config", err) : NULL;
		free(m);
		free(c);
		return c ? 0 : -err->code;
	}
	oci_forget_parsed(img);
	r = parse_in_helper(dir, tag, index, img, chex, err);
	if (r == 0 && base)
		memo_write(memo, img, chex);
	return r;
}
