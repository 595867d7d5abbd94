/* An OCI image layout read (oci.h): index.json, one manifest, its config.
 * What the layout holds is as hostile as a layer: every file is opened
 * without following a link, size-checked, and a blob is believed only
 * when its bytes hash to its name. */
#include "image/oci.h"

#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/sha256.h"
#include "util/error.h"
#include "util/util.h"

#define MAX_JSON (4 << 20) /* index.json, a manifest or a config */

bool oci_is_hex(const char *s)
{
	size_t i = 0;
	for (; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')) || i >= 64)
			return false;
	return i == 64;
}

static int open_file_at(int dir, const char *name)
{
	int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	return fd;
}

int oci_open_blob(const char *dir, const char *hex)
{
	cleanup_fd int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	cleanup_fd int blobs =
		root < 0 ? -1
			 : openat(root, "blobs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	cleanup_fd int alg =
		blobs < 0 ? -1
			  : openat(blobs, "sha256", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (alg < 0)
		return -errno;
	return open_file_at(alg, hex);
}

/* The text of fd (at most MAX_JSON), hashed into hex when hex; NULL with
 * err set. */
static char *read_text(int fd, const char *what, const char *dir, char *hex, struct ab_error *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0 || st.st_size > MAX_JSON) {
		ab_error_plain(err, EFBIG, "--image oci:%s: %s is over 4 MiB", dir, what);
		return NULL;
	}
	cleanup_free char *buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		ab_error_set(err, ENOMEM, "reading %s", what);
		return NULL;
	}
	size_t got = 0;
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n <= 0) {
			ab_error_set(err, n < 0 ? errno : EIO, "--image oci:%s: cannot read %s",
				     dir, what);
			return NULL;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	if (hex && sha256_hex_of(buf, got, hex, err) < 0)
		return NULL;
	char *out = buf;
	buf = NULL;
	return out;
}

/* text parsed: a JSON object, or NULL with err set. */
static json_object *parse_obj(const char *text, const char *what, const char *dir,
			      struct ab_error *err)
{
	json_object *j = json_tokener_parse(text);
	if (!j || !json_object_is_type(j, json_type_object)) {
		json_object_put(j);
		ab_error_plain(err, EINVAL, "--image oci:%s: %s is not a JSON object", dir, what);
		return NULL;
	}
	return j;
}

static const char *str_of(json_object *o, const char *key)
{
	json_object *v;
	if (!o || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* descriptor's digest "sha256:HEX" into hex, or an error naming what. */
static int digest_of(json_object *desc, const char *dir, const char *what, char hex[65],
		     struct ab_error *err)
{
	const char *d = str_of(desc, "digest");
	if (!d || strncmp(d, "sha256:", 7) != 0 || !oci_is_hex(d + 7))
		return ab_error_plain(err, EINVAL,
				      "--image oci:%s: %s has no sha256 digest (\"%.80s\"): only "
				      "sha256 is supported",
				      dir, what, d ? d : "");
	memcpy(hex, d + 7, 65);
	return 0;
}

char *oci_read_blob_text(const char *dir, const char *hex, const char *what, struct ab_error *err)
{
	cleanup_fd int fd = oci_open_blob(dir, hex);
	if (fd < 0) {
		ab_error_set(err, -fd, "--image oci:%s: cannot open the %s blobs/sha256/%s", dir,
			     what, hex);
		return NULL;
	}
	char got[65];
	char *text = read_text(fd, what, dir, got, err);
	if (text && strcmp(got, hex) != 0) {
		free(text);
		ab_error_plain(err, EBADMSG,
			       "--image oci:%s: the %s blob sha256:%s does not match its digest "
			       "(its content hashes to sha256:%s): the layout is corrupt",
			       dir, what, hex, got);
		return NULL;
	}
	return text;
}

/* The descriptor of index.json's manifests for tag. */
static json_object *pick_manifest(json_object *index, const char *dir, const char *tag,
				  struct ab_error *err)
{
	json_object *list;
	if (!json_object_object_get_ex(index, "manifests", &list) ||
	    !json_object_is_type(list, json_type_array)) {
		ab_error_plain(err, EINVAL, "--image oci:%s: index.json has no manifests", dir);
		return NULL;
	}
	size_t n = json_object_array_length(list);
	const char *want = tag ? tag : "latest";
	char tags[512] = "";
	for (size_t i = 0; i < n; i++) {
		json_object *m = json_object_array_get_idx(list, i), *ann;
		const char *name = json_object_object_get_ex(m, "annotations", &ann)
					   ? str_of(ann, "org.opencontainers.image.ref.name")
					   : NULL;
		if (name && strcmp(name, want) == 0)
			return m;
		if (name && strlen(tags) + strlen(name) + 3 < sizeof(tags))
			snprintf(tags + strlen(tags), sizeof(tags) - strlen(tags), "%s%s",
				 tags[0] ? ", " : "", name);
	}
	if (!tag && n == 1)
		return json_object_array_get_idx(list, 0);
	if (n == 0)
		ab_error_plain(err, ENOENT, "--image oci:%s: index.json lists no manifest", dir);
	else
		ab_error_plain(err, ENOENT,
			       "--image oci:%s: no manifest tagged '%s' (its tags: %s); name one "
			       "as oci:DIR:TAG",
			       dir, want, tags[0] ? tags : "none");
	return NULL;
}

static const char *this_arch(void)
{
#if defined(__x86_64__)
	return "amd64";
#elif defined(__aarch64__)
	return "arm64";
#elif defined(__i386__)
	return "386";
#elif defined(__arm__)
	return "arm";
#elif defined(__riscv)
	return "riscv64";
#elif defined(__s390x__)
	return "s390x";
#elif defined(__powerpc64__)
	return "ppc64le";
#else
	return NULL;
#endif
}

/* A multi-platform index in the manifest's place: its entry for linux
 * and this machine's architecture. */
static json_object *pick_platform(json_object *index, const char *dir, struct ab_error *err)
{
	json_object *list;
	if (!json_object_object_get_ex(index, "manifests", &list) ||
	    !json_object_is_type(list, json_type_array))
		goto none;
	for (size_t i = 0; i < json_object_array_length(list); i++) {
		json_object *m = json_object_array_get_idx(list, i), *p;
		if (!json_object_object_get_ex(m, "platform", &p))
			continue;
		const char *os = str_of(p, "os"), *arch = str_of(p, "architecture");
		if (os && arch && strcmp(os, "linux") == 0 && this_arch() &&
		    strcmp(arch, this_arch()) == 0)
			return m;
	}
none:
	ab_error_plain(err, ENOEXEC,
		       "--image oci:%s: the image index has no manifest for linux/%s; copy the "
		       "image for this machine's platform",
		       dir, this_arch() ? this_arch() : "this architecture");
	return NULL;
}

static int parse_layers(json_object *manifest, struct oci_image *img, struct ab_error *err)
{
	json_object *list;
	if (!json_object_object_get_ex(manifest, "layers", &list) ||
	    !json_object_is_type(list, json_type_array))
		return ab_error_plain(err, EINVAL, "--image oci:%s: the manifest has no layers",
				      img->dir);
	size_t n = json_object_array_length(list);
	if (n == 0 || n > OCI_MAX_LAYERS)
		return ab_error_plain(err, E2BIG,
				      "--image oci:%s: the manifest has %zu layers (1 to %d "
				      "supported)",
				      img->dir, n, OCI_MAX_LAYERS);
	if (!(img->layers = calloc(n, sizeof(*img->layers))))
		return ab_error_set(err, ENOMEM, "reading the manifest");
	img->n_layers = n;
	for (size_t i = 0; i < n; i++) {
		json_object *d = json_object_array_get_idx(list, i), *sz;
		struct oci_layer *l = &img->layers[i];
		char what[32];
		snprintf(what, sizeof(what), "layer %zu", i + 1);
		if (digest_of(d, img->dir, what, l->hex, err) < 0)
			return -err->code;
		const char *mt = str_of(d, "mediaType");
		mt = mt ? mt : "";
		size_t len = strlen(mt);
		if (len >= 5 && strcmp(mt + len - 5, "+zstd") == 0)
			l->comp = OCI_ZSTD;
		else if ((len >= 5 && strcmp(mt + len - 5, "+gzip") == 0) ||
			 (len >= 7 && strcmp(mt + len - 7, "tar.gzip") == 0))
			l->comp = OCI_GZIP;
		else if (len >= 4 && strcmp(mt + len - 4, ".tar") == 0)
			l->comp = OCI_TAR;
		else
			return ab_error_plain(
				err, EINVAL,
				"--image oci:%s: layer %zu has the media type '%.100s', "
				"not a tar layer agentbox can unpack",
				img->dir, i + 1, mt);
		if (l->comp == OCI_ZSTD)
			return ab_error_plain(err, ENOTSUP,
					      "--image oci:%s: layer %zu is zstd-compressed, which "
					      "agentbox does not unpack; copy the image with gzip "
					      "layers (skopeo copy --dest-compress-format gzip)",
					      img->dir, i + 1);
		if (json_object_object_get_ex(d, "size", &sz))
			l->size = (unsigned long long)json_object_get_int64(sz);
	}
	return 0;
}

static int parse_config(json_object *config, struct oci_image *img, struct ab_error *err)
{
	const char *arch = str_of(config, "architecture");
	if (arch && this_arch() && strcmp(arch, this_arch()) != 0 &&
	    !(strcmp(this_arch(), "amd64") == 0 && strcmp(arch, "386") == 0))
		return ab_error_plain(err, ENOEXEC,
				      "--image oci:%s: the image is built for %s, and this machine "
				      "is %s; copy the image for this machine's architecture",
				      img->dir, arch, this_arch());
	json_object *c, *env;
	if (!json_object_object_get_ex(config, "config", &c))
		return 0;
	const char *wd = str_of(c, "WorkingDir"), *user = str_of(c, "User");
	if ((wd && *wd && !(img->workdir = strdup(wd))) ||
	    (user && *user && !(img->user = strdup(user))))
		return ab_error_set(err, ENOMEM, "reading the image config");
	if (!json_object_object_get_ex(c, "Env", &env) ||
	    !json_object_is_type(env, json_type_array))
		return 0;
	size_t n = json_object_array_length(env);
	if (!(img->env = calloc(n + 1, sizeof(char *))))
		return ab_error_set(err, ENOMEM, "reading the image config");
	for (size_t i = 0; i < n; i++) {
		json_object *v = json_object_array_get_idx(env, i);
		const char *s =
			json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
		if (!s || !strchr(s, '=') || s == strchr(s, '='))
			continue; /* not NAME=VALUE: nothing a process could be given */
		if (!(img->env[img->n_env] = strdup(s)))
			return ab_error_set(err, ENOMEM, "reading the image config");
		img->n_env++;
	}
	return 0;
}

static int open_layout(const char *dir, struct ab_error *err)
{
	cleanup_fd int root = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return ab_error_set(err, errno, "--image oci:%s: cannot open the directory", dir);
	cleanup_fd int marker = open_file_at(root, "oci-layout");
	if (marker < 0)
		return ab_error_plain(err, EINVAL,
				      "--image oci:%s: not an OCI image layout (no oci-layout "
				      "file); make one with skopeo copy ... oci:DIR:TAG",
				      dir);
	int fd = open_file_at(root, "index.json");
	if (fd < 0)
		return ab_error_set(err, -fd, "--image oci:%s: cannot open index.json", dir);
	return fd;
}

char *oci_read_index(const char *dir, struct ab_error *err)
{
	cleanup_fd int fd = open_layout(dir, err);
	return fd < 0 ? NULL : read_text(fd, "index.json", dir, NULL, err);
}

int oci_parse_index(const char *dir, const char *text, const char *tag, char hex[65],
		    struct ab_error *err)
{
	json_object *index = parse_obj(text, "index.json", dir, err);
	json_object *desc = index ? pick_manifest(index, dir, tag, err) : NULL;
	int r = desc ? digest_of(desc, dir, "the manifest", hex, err) : -err->code;
	json_object_put(index);
	return r;
}

int oci_parse_manifest(const char *dir, const char *text, bool may_be_index, bool *is_index,
		       char hex[65], struct oci_image *img, struct ab_error *err)
{
	*is_index = false;
	json_object *m = parse_obj(text, "manifest", dir, err), *cdesc;
	if (!m)
		return -err->code;
	const char *mt = str_of(m, "mediaType");
	int r;
	if (may_be_index && mt && strstr(mt, "image.index")) {
		/* a multi-platform image: the manifest of this platform */
		json_object *pick = pick_platform(m, dir, err);
		*is_index = pick != NULL;
		r = pick ? digest_of(pick, dir, "the platform's manifest", hex, err) : -err->code;
	} else if (!json_object_object_get_ex(m, "config", &cdesc)) {
		r = ab_error_plain(err, EINVAL, "--image oci:%s: the manifest has no config", dir);
	} else {
		r = digest_of(cdesc, dir, "the config", hex, err);
		if (r == 0)
			r = parse_layers(m, img, err);
	}
	json_object_put(m);
	return r;
}

int oci_parse_config(const char *dir, const char *text, struct oci_image *img, struct ab_error *err)
{
	json_object *cfg = parse_obj(text, "config", dir, err);
	int r = cfg ? parse_config(cfg, img, err) : -err->code;
	json_object_put(cfg);
	return r;
}

void oci_forget_parsed(struct oci_image *img)
{
	free(img->layers);
	for (size_t i = 0; i < img->n_env; i++)
		free(img->env[i]);
	free(img->env);
	free(img->workdir);
	free(img->user);
	img->layers = NULL;
	img->env = NULL;
	img->workdir = img->user = NULL;
	img->n_layers = img->n_env = 0;
}

void oci_free(struct oci_image *img)
{
	oci_forget_parsed(img);
	free(img->dir);
	free(img->tag);
	memset(img, 0, sizeof(*img));
}
