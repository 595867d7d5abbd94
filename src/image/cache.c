/* The image layer cache (cache.h). Layout of its directory:
 *   lock               flock: exclusive while layers are unpacked or pruned
 *   layers/HEX/        a layer's tree, complete (renamed from tmp/)
 *   layers/HEX.lock    shared-locked by every sandbox that uses the layer
 *   layers/HEX.info    what unpacking it found: bytes, entries, devices
 *   layers/HEX.seal    its tree as unpacked, checked at every use (seal.h)
 *   images/HEX         an image seen (HEX: its manifest's sha256): its
 *                      source, tag and layers, for agentbox images
 *   tmp/               layers being unpacked (stale ones removed)
 *   empty/             an empty directory, the overlays' bottom layer */
#include "image/cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "image/cache_dir.h"
#include "image/layout_proc.h"
#include "image/seal.h"
#include "image/tree_check.h"
#include "image/unpack_proc.h"
#include "image/untar.h"
#include "util/error.h"
#include "util/util.h"

#define LOCK_WAIT_MS (10 * 60 * 1000)

/* Where the cache is (cache_dir.c: made when missing, trusted only when
 * no one but its owner can change it), as a path overlay's options can
 * name. */
static int cache_base(char *buf, size_t n, struct ab_error *err)
{
	int fd = cache_dir_open(buf, n, err);
	if (fd < 0)
		return fd;
	close(fd);
	if (strpbrk(buf, ":,\\\n"))
		return ab_error_plain(err, EINVAL,
				      "--image: the image cache %s has a ':', ',' or '\\' in its "
				      "path, which overlay's options cannot name; set "
				      "XDG_STATE_HOME elsewhere",
				      buf);
	return 0;
}

/* The cache's lock, exclusive: waited for (another agentbox unpacking) at
 * most LOCK_WAIT_MS. */
static int lock_cache(const char *base, struct ab_error *err)
{
	char p[PATH_MAX + 200];
	snprintf(p, sizeof(p), "%s/lock", base);
	int fd = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return ab_error_set(err, errno, "cannot open %s", p);
	for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB) < 0; waited += 50) {
		if (errno != EWOULDBLOCK || waited >= LOCK_WAIT_MS) {
			close(fd);
			return ab_error_set(err, errno == EWOULDBLOCK ? ETIMEDOUT : errno,
					    "cannot lock the image cache %s (another agentbox has "
					    "held it for 10 minutes)",
					    base);
		}
		nanosleep(&(struct timespec){0, 50 * 1000 * 1000}, NULL);
	}
	return fd;
}

/* oci:DIR[:TAG] into dir and tag (a last ':' followed by no '/'). */
static int parse_spec(const char *spec, char **dir, char **tag, struct ab_error *err)
{
	if (strncmp(spec, "containers-storage:", 19) == 0)
		return ab_error_plain(err, ENOTSUP,
				      "--image %s: containers-storage is not supported; copy the "
				      "image to a layout with skopeo copy containers-storage:%s "
				      "oci:DIR:TAG and use --image oci:DIR:TAG",
				      spec, spec + 19);
	if (strncmp(spec, "oci:", 4) != 0 || !spec[4])
		return ab_error_plain(err, EINVAL,
				      "--image '%s': expected oci:DIR[:TAG], an OCI image layout "
				      "directory",
				      spec);
	cleanup_free char *d = strdup(spec + 4);
	if (!d)
		return ab_error_set(err, ENOMEM, "--image");
	char *colon = strrchr(d, ':');
	if (colon && !strchr(colon, '/')) {
		*colon = '\0';
		if (!colon[1] || !d[0])
			return ab_error_plain(err, EINVAL,
					      "--image '%s': an empty directory or tag", spec);
		if (!(*tag = strdup(colon + 1)))
			return ab_error_set(err, ENOMEM, "--image");
	}
	*dir = realpath(d, NULL);
	if (!*dir)
		return ab_error_set(err, errno, "--image %s: cannot find the directory '%s'", spec,
				    d);
	return 0;
}

static int write_text(const char *path, const char *text)
{
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	cleanup_fd int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	size_t len = strlen(text);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || rename(tmp, path) < 0)
		return -errno;
	return 0;
}

static long long ms_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000LL + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

struct name80 {
	char s[80];
};

static struct name80 seal_name(const char *hex)
{
	struct name80 n;
	snprintf(n.s, sizeof(n.s), "%.64s.seal", hex);
	return n;
}

static int open_layers(const char *base, struct ab_error *err)
{
	char p[PATH_MAX + 16];
	snprintf(p, sizeof(p), "%s/layers", base);
	int fd = open(p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? ab_error_set(err, errno, "cannot open %s", p) : fd;
}

/* tmp/HEX.XXXXXX (the caller's, 0700: no one else reaches what is in it)
 * and tree in it, an empty directory of the unpack helper's uid, into
 * tmp and *outer; an fd on tree, or -errno. */
static int make_tmp(const struct image_use *u, const char *hex, char *tmp, size_t n, int *outer,
		    struct ab_error *err)
{
	snprintf(tmp, n, "%s/tmp/%s.XXXXXX", u->base, hex);
	if (!mkdtemp(tmp))
		return ab_error_set(err, errno, "cannot make a directory in %s/tmp", u->base);
	*outer = open(tmp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	uid_t uid;
	gid_t gid;
	bool switch_id;
	unpack_proc_identity(&uid, &gid, &switch_id);
	/* 0700 whatever the umask, and no set-gid bit a set-gid tmp/ gave it */
	if (*outer < 0 || mkdirat(*outer, "tree", 0700) < 0 ||
	    (switch_id && fchownat(*outer, "tree", uid, gid, AT_SYMLINK_NOFOLLOW) < 0) ||
	    fchmodat(*outer, "tree", 0700, 0) < 0)
		return ab_error_set(err, errno, "cannot make a directory in %s", tmp);
	int fd = openat(*outer, "tree", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? ab_error_set(err, errno, "cannot open %s/tree", tmp) : fd;
}

/* The tree the helper made, checked (tree_check.h) and, root's, given to
 * root; its bytes as the launcher counted them into stats. */
static int check_tree(int root, const char *what, struct untar_stats *stats, struct ab_error *err)
{
	bool switch_id;
	struct tree_check tc = {0};
	gid_t gid;
	unpack_proc_identity(&tc.owner, &gid, &switch_id);
	tc.chown = switch_id;
	int r = tree_check(root, what, &tc, err);
	stats->bytes = tc.bytes;
	return r;
}

/* Layer i into layers/HEX through a temporary directory, unpacked by the
 * confined helper (unpack_proc.h) and checked here before it is sealed. */
static int unpack(struct image_use *u, size_t i, struct ab_error *err)
{
	const struct oci_layer *l = &u->img.layers[i];
	char what[PATH_MAX + 200], tmp[PATH_MAX], p[PATH_MAX];
	snprintf(what, sizeof(what), "--image %s: layer %zu (sha256:%.12s)", u->spec, i + 1,
		 l->hex);
	cleanup_fd int blob = oci_open_blob(u->img.dir, l->hex);
	if (blob < 0)
		return ab_error_set(err, -blob, "%s: cannot open its blob blobs/sha256/%s", what,
				    l->hex);
	struct stat st;
	if (fstat(blob, &st) < 0 || (l->size && (unsigned long long)st.st_size != l->size))
		return ab_error_plain(err, EBADMSG,
				      "%s: the blob has %lld bytes, the manifest says %llu: the "
				      "layout is corrupt",
				      what, (long long)st.st_size, l->size);
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	struct untar_stats stats = {0};
	cleanup_fd int outer = -1;
	tmp[0] = '\0';
	cleanup_fd int root = make_tmp(u, l->hex, tmp, sizeof(tmp), &outer, err);
	int r = root < 0 ? root : unpack_proc_run(blob, l, what, root, &stats, err);
	if (r == 0)
		r = check_tree(root, what, &stats, err);
	if (r == 0 && fchmod(root, 0755) < 0)
		r = ab_error_set(err, errno, "cannot write %s", tmp);
	/* sealed as it is now: every later use compares the tree with this */
	char seal_new[80];
	snprintf(seal_new, sizeof(seal_new), "%s.seal.new", l->hex);
	cleanup_fd int layers = open_layers(u->base, err);
	cleanup_fd int seal = -1;
	if (r == 0 && layers < 0)
		r = layers;
	if (r == 0 &&
	    (seal = openat(layers, seal_new, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
			   0600)) < 0)
		r = ab_error_set(err, errno, "cannot write %s/layers/%s", u->base, seal_new);
	if (r == 0)
		r = seal_write(root, seal, err);
	/* the tree and its seal reach the disk before the name says complete */
	if (r == 0 && syncfs(root) < 0)
		r = ab_error_set(err, errno, "cannot write %s", tmp);
	if (r < 0 && layers >= 0)
		unlinkat(layers, seal_new, 0);
	if (r == 0 && renameat(layers, seal_new, layers, seal_name(l->hex).s) < 0)
		r = ab_error_set(err, errno, "cannot put the layer's seal in %s/layers", u->base);
	if (r == 0) {
		char info[256];
		snprintf(info, sizeof(info),
			 "bytes=%llu\nentries=%lu\ndevices=%lu\nunpack_ms=%lld\n", stats.bytes,
			 stats.entries, stats.devices, ms_since(&t0));
		snprintf(p, sizeof(p), "%s/layers/%s.info", u->base, l->hex);
		int w = write_text(p, info);
		snprintf(p, sizeof(p), "%s/layers/%s", u->base, l->hex);
		if (w < 0 || renameat(outer, "tree", layers, l->hex) < 0)
			r = ab_error_set(err, w < 0 ? -w : errno, "cannot put the layer at %s", p);
		else
			rmdir(tmp); /* else swept by the next start */
	}
	if (r < 0) {
		cleanup_fd int t = open(u->base, O_PATH | O_DIRECTORY | O_CLOEXEC);
		char rel[PATH_MAX];
		snprintf(rel, sizeof(rel), "tmp/%s",
			 strrchr(tmp, '/') ? strrchr(tmp, '/') + 1 : "");
		if (t >= 0 && tmp[0])
			untar_remove(t, rel, UNTAR_MAX_DEPTH + 4);
		return r;
	}
	u->unpacked++;
	return 0;
}

/* Every directory in tmp/: left by an agentbox that died unpacking (the
 * cache's lock is held). */
static void sweep_tmp(const char *base)
{
	char p[PATH_MAX + 200];
	snprintf(p, sizeof(p), "%s/tmp", base);
	cleanup_fd int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d)
		return;
	fd = -1;
	struct dirent *de;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			untar_remove(dirfd(d), de->d_name, UNTAR_MAX_DEPTH + 4);
	closedir(d);
}

static int record_image(struct image_use *u)
{
	char text[PATH_MAX + OCI_MAX_LAYERS * 66 + 128], p[PATH_MAX];
	int n = snprintf(text, sizeof(text), "source=%s\ntag=%s\nlayers=", u->img.dir,
			 u->img.tag ? u->img.tag : "");
	for (size_t i = 0; i < u->img.n_layers; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n, "%s%s", i ? " " : "",
			      u->img.layers[i].hex);
	snprintf(text + n, sizeof(text) - (size_t)n, "\n");
	snprintf(p, sizeof(p), "%s/images/%s", u->base, u->img.manifest_hex);
	/* unchanged: not written again (a start would pay a journal commit) */
	char old[sizeof(text)];
	cleanup_fd int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ssize_t got = fd < 0 ? -1 : read(fd, old, sizeof(old) - 1);
	if (got == (ssize_t)strlen(text) && memcmp(old, text, (size_t)got) == 0)
		return 0;
	return write_text(p, text);
}

/* The seal of layer hex in layers: an fd when it is a regular file of the
 * caller's, else -1. */
static int open_seal(int layers, const char *hex)
{
	int fd = openat(layers, seal_name(hex).s, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Layer i, found unpacked in the cache without a seal this version reads
 * (unpacked before layers were sealed, or its seal removed): removed, to
 * be unpacked anew from its blob, when no sandbox uses it (the cache's
 * lock held). */
static int unsealed_layer(struct image_use *u, size_t i, struct ab_error *err)
{
	const char *hex = u->img.layers[i].hex;
	char name[80];
	cleanup_fd int layers = open_layers(u->base, err);
	if (layers < 0)
		return layers;
	cleanup_fd int seal = open_seal(layers, hex);
	if (seal >= 0 && seal_known(seal))
		return 0;
	snprintf(name, sizeof(name), "%.64s.lock", hex);
	cleanup_fd int lk = openat(layers, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (lk < 0 || flock(lk, LOCK_EX | LOCK_NB) < 0)
		return ab_error_plain(err, EBUSY,
				      "--image %s: layer %zu at %s/layers/%s has no seal (it was "
				      "unpacked by an older agentbox) and a sandbox uses it: run "
				      "again when that sandbox has ended, and it is unpacked anew",
				      u->spec, i + 1, u->base, hex);
	int r = untar_remove(layers, hex, UNTAR_MAX_DEPTH + 4);
	if (r < 0)
		return ab_error_set(err, -r, "cannot remove %s/layers/%s to unpack it anew",
				    u->base, hex);
	unlinkat(layers, seal_name(hex).s, 0);
	return 0;
}

/* Layer i compared with its seal (its shared lock held, so that prune
 * leaves it): a layer changed since it was unpacked is refused, never
 * repaired silently: someone changed it. */
static int check_layer(struct image_use *u, size_t i, struct ab_error *err)
{
	const char *hex = u->img.layers[i].hex;
	char what[2 * PATH_MAX];
	snprintf(what, sizeof(what), "--image %s: layer %zu (sha256:%.12s) at %s/layers/%s",
		 u->spec, i + 1, hex, u->base, hex);
	cleanup_fd int layers = open_layers(u->base, err);
	if (layers < 0)
		return layers;
	cleanup_fd int root =
		openat(layers, hex, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (root < 0)
		return ab_error_set(err, errno, "%s: cannot open it", what);
	cleanup_fd int seal = open_seal(layers, hex);
	int r = seal < 0 ? -ENOENT : seal_check(root, seal, what, err);
	if (r == -ENOENT)
		return ab_error_plain(err, EBADMSG, "%s: its seal is gone or not the caller's",
				      what);
	return r;
}

/* empty/, the overlays' bottom layer, must be empty: a name in it would be
 * in every sandbox's system. */
static int check_empty(const struct image_use *u, struct ab_error *err)
{
	int fd = open(u->empty, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		ab_close_keep_errno(fd);
		return ab_error_set(err, errno, "cannot open %s", u->empty);
	}
	struct dirent *de;
	const char *found = NULL;
	while (!found && (de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			found = de->d_name;
	int r = found ? ab_error_plain(err, EBADMSG,
				       "the image cache's %s must be empty and has '%.200s': "
				       "someone put it there; refused: remove it",
				       u->empty, found)
		      : 0;
	closedir(d);
	return r;
}

static int use_layers(struct image_use *u, struct ab_error *err)
{
	cleanup_fd int lock = lock_cache(u->base, err);
	if (lock < 0)
		return lock;
	sweep_tmp(u->base);
	int r = check_empty(u, err);
	if (r < 0)
		return r;
	bool fresh[OCI_MAX_LAYERS] = {false}; /* unpacked and sealed by this start */
	for (size_t i = 0; i < u->img.n_layers; i++) {
		const char *hex = u->img.layers[i].hex;
		char p[PATH_MAX + 200];
		snprintf(p, sizeof(p), "%s/layers/%s", u->base, hex);
		struct stat st;
		r = 0;
		size_t before = u->unpacked;
		if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
			r = unsealed_layer(u, i, err);
		if (r == 0 && (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode)))
			r = unpack(u, i, err);
		fresh[i] = u->unpacked > before;
		if (r == 0 && !(u->layer_dirs[i] = strdup(p)))
			r = ab_error_set(err, ENOMEM, "--image");
		if (r < 0)
			return r;
		snprintf(p, sizeof(p), "%s/layers/%s.lock", u->base, hex);
		u->lock_fds[i] = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		/* not waited on: only prune takes it exclusively, under the
		 * cache's lock, which is held here */
		if (u->lock_fds[i] < 0 || flock(u->lock_fds[i], LOCK_SH | LOCK_NB) < 0)
			return ab_error_set(err, errno, "cannot lock %s", p);
	}
	record_image(u); /* only for agentbox images */
	/* checked without the cache's lock: other sandboxes start meanwhile */
	close(ab_steal_fd(&lock));
	for (size_t i = 0; i < u->img.n_layers && r == 0; i++)
		if (!fresh[i])
			r = check_layer(u, i, err);
	return r;
}

int image_use_relock(struct image_use *u, struct ab_error *err)
{
	for (size_t i = 0; i < u->img.n_layers; i++) {
		char p[PATH_MAX + 8];
		snprintf(p, sizeof(p), "%s.lock", u->layer_dirs[i]);
		/* held meanwhile by the process that opened u: no prune between */
		u->lock_fds[i] = open(p, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (u->lock_fds[i] < 0 || flock(u->lock_fds[i], LOCK_SH | LOCK_NB) < 0)
			return ab_error_set(err, errno, "cannot lock %s", p);
	}
	return 0;
}

int image_use_open(const char *spec, struct image_use **out, struct ab_error *err)
{
	struct image_use *u = calloc(1, sizeof(*u));
	if (!u)
		return ab_error_set(err, ENOMEM, "--image");
	for (size_t i = 0; i < OCI_MAX_LAYERS; i++)
		u->lock_fds[i] = -1;
	char base[PATH_MAX], empty[PATH_MAX + 8];
	cleanup_free char *dir = NULL, *tag = NULL;
	int r = (u->spec = strdup(spec)) ? 0 : ab_error_set(err, ENOMEM, "--image");
	if (r == 0)
		r = parse_spec(spec, &dir, &tag, err);
	if (r == 0)
		r = cache_base(base, sizeof(base), err);
	if (r == 0)
		r = layout_proc_read(dir, tag, base, &u->img, err);
	if (r == 0) {
		snprintf(empty, sizeof(empty), "%s/empty", base);
		if (!(u->base = strdup(base)) || !(u->empty = strdup(empty)))
			r = ab_error_set(err, ENOMEM, "--image");
	}
	if (r == 0)
		r = use_layers(u, err);
	if (r < 0) {
		image_use_free(u);
		return r;
	}
	*out = u;
	return 0;
}

void image_use_free(struct image_use *u)
{
	if (!u)
		return;
	for (size_t i = 0; i < OCI_MAX_LAYERS; i++) {
		free(u->layer_dirs[i]);
		ab_close_keep_errno(u->lock_fds[i]);
	}
	oci_free(&u->img);
	free(u->spec);
	free(u->base);
	free(u->empty);
	free(u);
}

/* ---- agentbox images ---- */

static unsigned long long info_bytes(const char *base, const char *hex)
{
	char p[PATH_MAX + 200], buf[256] = "";
	snprintf(p, sizeof(p), "%s/layers/%s.info", base, hex);
	cleanup_fd int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) < 0)
		return 0;
	const char *b = strstr(buf, "bytes=");
	return b ? strtoull(b + 6, NULL, 10) : 0;
}

/* Whether a sandbox holds the layer's lock (the cache's lock held). */
static bool layer_in_use(const char *base, const char *hex)
{
	char p[PATH_MAX + 200];
	snprintf(p, sizeof(p), "%s/layers/%s.lock", base, hex);
	cleanup_fd int fd = open(p, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0)
		return errno == EWOULDBLOCK;
	flock(fd, LOCK_UN);
	return false;
}

/* The names in base/sub that are 64 hex digits (with suffix). */
static size_t list_hex(const char *base, const char *sub, char (*out)[65], size_t max)
{
	char p[PATH_MAX + 200];
	snprintf(p, sizeof(p), "%s/%s", base, sub);
	DIR *d = opendir(p);
	size_t n = 0;
	struct dirent *de;
	while (d && (de = readdir(d)) && n < max) {
		if (strlen(de->d_name) == 64 && oci_is_hex(de->d_name))
			memcpy(out[n++], de->d_name, 65);
	}
	if (d)
		closedir(d);
	return n;
}

#define MAX_LIST 4096

/* The cache's base, its layers and images, listed under its lock. */
struct cache_listing {
	char base[PATH_MAX];
	char layers[MAX_LIST][65], images[MAX_LIST][65];
	size_t nl, ni;
};

/* l filled under the cache's lock: the lock's fd, held while the caller
 * lists or prunes (a sandbox takes its layers' locks under it:
 * layer_in_use), or -errno. */
static int open_listing(struct cache_listing *l, struct ab_error *err)
{
	if (cache_base(l->base, sizeof(l->base), err) < 0)
		return -err->code;
	int lock = lock_cache(l->base, err);
	if (lock >= 0) {
		l->nl = list_hex(l->base, "layers", l->layers, MAX_LIST);
		l->ni = list_hex(l->base, "images", l->images, MAX_LIST);
	}
	return lock;
}

static char *read_record(const char *base, const char *hex)
{
	char p[PATH_MAX + 200];
	snprintf(p, sizeof(p), "%s/images/%s", base, hex);
	cleanup_fd int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	char *buf = calloc(1, PATH_MAX + OCI_MAX_LAYERS * 66 + 128);
	if (fd < 0 || !buf || read(fd, buf, PATH_MAX + OCI_MAX_LAYERS * 66 + 127) < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static const char *field(const char *rec, const char *key, char *out, size_t n)
{
	const char *p = strstr(rec, key);
	out[0] = '\0';
	if (p) {
		p += strlen(key);
		snprintf(out, n, "%.*s", (int)strcspn(p, "\n"), p);
	}
	return out;
}

int image_cache_list(FILE *out, bool json, struct ab_error *err)
{
	static struct cache_listing l;
	cleanup_fd int lock = open_listing(&l, err);
	if (lock < 0)
		return lock;
	json_object *jo = json_object_new_object(), *ja = json_object_new_array(),
		    *jl = json_object_new_array();
	if (!json)
		fprintf(out, "%-14s %10s %-6s %s\n", "IMAGE", "SIZE", "IN USE", "SOURCE");
	for (size_t i = 0; i < l.ni; i++) {
		cleanup_free char *rec = read_record(l.base, l.images[i]);
		if (!rec)
			continue;
		char src[PATH_MAX], tag[256], lay[OCI_MAX_LAYERS * 66];
		field(rec, "source=", src, sizeof(src));
		field(rec, "tag=", tag, sizeof(tag));
		field(rec, "layers=", lay, sizeof(lay));
		unsigned long long size = 0;
		bool used = false, complete = true;
		json_object *ll = json_object_new_array();
		for (char *save, *h = strtok_r(lay, " ", &save); h;
		     h = strtok_r(NULL, " ", &save)) {
			char p[PATH_MAX + 200];
			snprintf(p, sizeof(p), "%s/layers/%s", l.base, h);
			complete &= access(p, F_OK) == 0;
			size += info_bytes(l.base, h);
			used |= layer_in_use(l.base, h);
			json_object_array_add(ll, json_object_new_string(h));
		}
		if (json) {
			json_object *e = json_object_new_object();
			json_object_object_add(e, "manifest", json_object_new_string(l.images[i]));
			json_object_object_add(e, "source", json_object_new_string(src));
			json_object_object_add(e, "tag", json_object_new_string(tag));
			json_object_object_add(e, "layers", ll);
			json_object_object_add(e, "bytes", json_object_new_int64((int64_t)size));
			json_object_object_add(e, "in_use", json_object_new_boolean(used));
			json_object_object_add(e, "complete", json_object_new_boolean(complete));
			json_object_array_add(ja, e);
		} else {
			json_object_put(ll);
			fprintf(out, "%.12s   %9.1fM %-6s oci:%s%s%s%s\n", l.images[i],
				(double)size / (1 << 20), used ? "yes" : "no", src,
				tag[0] ? ":" : "", tag, complete ? "" : " (layers pruned)");
		}
	}
	if (!json)
		fprintf(out, "\n%-14s %10s %s\n", "LAYER", "SIZE", "IN USE");
	for (size_t i = 0; i < l.nl; i++) {
		char p[PATH_MAX + 200];
		snprintf(p, sizeof(p), "%s/layers/%.64s", l.base, l.layers[i]);
		struct stat st;
		if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		unsigned long long size = info_bytes(l.base, l.layers[i]);
		bool used = layer_in_use(l.base, l.layers[i]);
		if (json) {
			json_object *e = json_object_new_object();
			json_object_object_add(e, "digest", json_object_new_string(l.layers[i]));
			json_object_object_add(e, "bytes", json_object_new_int64((int64_t)size));
			json_object_object_add(e, "in_use", json_object_new_boolean(used));
			json_object_array_add(jl, e);
		} else {
			fprintf(out, "%.12s   %9.1fM %s\n", l.layers[i], (double)size / (1 << 20),
				used ? "yes" : "no");
		}
	}
	json_object_object_add(jo, "cache", json_object_new_string(l.base));
	json_object_object_add(jo, "images", ja);
	json_object_object_add(jo, "layers", jl);
	if (json)
		fprintf(out, "%s\n", json_object_to_json_string_ext(jo, JSON_C_TO_STRING_PLAIN));
	json_object_put(jo);
	return 0;
}

int image_cache_prune(FILE *out, struct ab_error *err)
{
	static struct cache_listing l;
	cleanup_fd int lock = open_listing(&l, err);
	if (lock < 0)
		return lock;
	sweep_tmp(l.base);
	cleanup_fd int dir = -1;
	char p[PATH_MAX + 200];
	snprintf(p, sizeof(p), "%s/layers", l.base);
	dir = open(p, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return ab_error_set(err, errno, "cannot open %s", p);
	size_t removed = 0, kept = 0;
	unsigned long long bytes = 0;
	for (size_t i = 0; i < l.nl; i++) {
		char name[80];
		snprintf(name, sizeof(name), "%.64s.lock", l.layers[i]);
		cleanup_fd int lk =
			openat(dir, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (lk < 0 || flock(lk, LOCK_EX | LOCK_NB) < 0) {
			kept++; /* a sandbox uses it */
			continue;
		}
		bytes += info_bytes(l.base, l.layers[i]);
		int r = untar_remove(dir, l.layers[i], UNTAR_MAX_DEPTH + 4);
		if (r < 0)
			return ab_error_set(err, -r, "cannot remove %s/%s", p, l.layers[i]);
		snprintf(name, sizeof(name), "%.64s.info", l.layers[i]);
		unlinkat(dir, name, 0);
		unlinkat(dir, seal_name(l.layers[i]).s, 0);
		snprintf(name, sizeof(name), "%.64s.lock", l.layers[i]);
		unlinkat(dir, name, 0);
		removed++;
	}
	/* the l.images whose l.layers are gone */
	size_t gone = 0;
	for (size_t i = 0; i < l.ni; i++) {
		cleanup_free char *rec = read_record(l.base, l.images[i]);
		char lay[OCI_MAX_LAYERS * 66];
		bool complete = rec != NULL;
		field(rec ? rec : "", "layers=", lay, sizeof(lay));
		for (char *save, *h = strtok_r(lay, " ", &save); h && complete;
		     h = strtok_r(NULL, " ", &save)) {
			struct stat st;
			complete = fstatat(dir, h, &st, AT_SYMLINK_NOFOLLOW) == 0;
		}
		if (complete)
			continue;
		snprintf(p, sizeof(p), "%s/images/%.64s", l.base, l.images[i]);
		if (unlink(p) == 0)
			gone++;
	}
	/* what the layout helper found, remembered: found again when needed */
	snprintf(p, sizeof(p), "%s/images", l.base);
	DIR *d = opendir(p);
	for (struct dirent *de; d && (de = readdir(d));) {
		size_t len = strlen(de->d_name);
		if (len > 7 && strcmp(de->d_name + len - 7, ".parsed") == 0)
			unlinkat(dirfd(d), de->d_name, 0);
	}
	if (d)
		closedir(d);
	fprintf(out, "removed %zu layers (%.1f MiB) and %zu images; %zu layers in use kept\n",
		removed, (double)bytes / (1 << 20), gone, kept);
	return 0;
}
