/* File operations, the sandbox's half (fileop_inside.h): read, write,
 * upload, edit and download, one file each. */
#include "files/fileop.h"
#include "files/fileop_inside.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/output.h"
#include "util/util.h"

/* ---- inside: read ---- */

struct sbuf {
	char *p;
	size_t len, cap;
};

static bool sb_add(struct sbuf *b, const char *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->len + n + 1)
			cap *= 2;
		char *p = realloc(b->p, cap);
		if (!p)
			return false;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
	return true;
}

static json_object *int_or_null(bool have, uint64_t v)
{
	return have ? json_object_new_int64((int64_t)v) : NULL;
}

static int read_binary(const char *path, int64_t size)
{
	char *data;
	size_t len;
	int r = fo_read_all(path, FILEOP_DATA_MAX, &data, &len);
	if (r == -EFBIG)
		return fo_fail(AB_ERRC_TOO_LARGE, path,
			       "%s is not UTF-8 text and has %lld bytes: at most %u are sent; "
			       "use exec to look into it",
			       path, (long long)size, FILEOP_DATA_MAX);
	if (r < 0)
		return fo_fail_errno(-r, path, "cannot read");
	char *b = base64_encode(data, len);
	free(data);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "encoding", json_object_new_string("base64"));
	json_object_object_add(o, "content", json_object_new_string(b ? b : ""));
	json_object_object_add(o, "total_lines", NULL);
	json_object_object_add(o, "start_line", NULL);
	json_object_object_add(o, "end_line", NULL);
	json_object_object_add(o, "next_offset", NULL);
	json_object_object_add(o, "size", json_object_new_int64((int64_t)len));
	json_object_object_add(o, "truncated", json_object_new_boolean(false));
	free(b);
	return fo_result(o);
}

int fo_read(json_object *q)
{
	const char *path = fo_jstr(q, "path", NULL);
	uint64_t first = (uint64_t)fo_jint(q, "offset", 0);
	uint64_t limit = (uint64_t)fo_jint(q, "limit", 2000);
	uint64_t stop = first + limit < first ? UINT64_MAX : first + limit;
	struct stat st;
	int fd = fo_open_regular(path, O_RDONLY, &st);
	if (fd < 0)
		return fo_fail_errno(-fd, path, "cannot read");
	static char buf[65536];
	struct sbuf content = {0};
	uint64_t line = 0, n_in = 0; /* lines seen in full, lines in content */
	size_t line_at = 0;	     /* where the current line starts in content */
	bool collecting = true, truncated = false, binary = false, last_nl = true;
	size_t sniffed = 0;
	for (;;) {
		ssize_t k = read(fd, buf, sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			close(fd);
			free(content.p);
			return fo_fail_errno(e, path, "cannot read");
		}
		if (k == 0)
			break;
		if (sniffed < SNIFF) {
			size_t n = (size_t)k < SNIFF - sniffed ? (size_t)k : SNIFF - sniffed;
			binary |= memchr(buf, '\0', n) != NULL;
			sniffed += n;
		}
		if (binary)
			break;
		last_nl = buf[k - 1] == '\n';
		for (char *p = buf, *e = buf + k; p < e;) {
			char *nl = memchr(p, '\n', (size_t)(e - p));
			char *end = nl ? nl + 1 : e;
			if (collecting && line >= first && line < stop) {
				size_t n = (size_t)(end - p);
				if (content.len + n > FILEOP_DATA_MAX) {
					if (line_at == 0) {
						/* one line over the limit: cut it */
						n = FILEOP_DATA_MAX - content.len;
						while (n > 0 &&
						       ((unsigned char)p[n] & 0xC0) == 0x80)
							n--;
						sb_add(&content, p, n);
						truncated = true;
						n_in = 1;
					} else {
						content.len =
							line_at; /* without the partial line */
					}
					collecting = false;
				} else if (!sb_add(&content, p, n)) {
					close(fd);
					free(content.p);
					return fo_fail(AB_ERRC_IO_ERROR, path,
						       "out of memory reading %s", path);
				}
			}
			if (nl) {
				if (collecting && line >= first && line < stop) {
					n_in++;
					line_at = content.len;
				}
				line++;
			}
			p = end;
		}
	}
	close(fd);
	/* a last line without a newline */
	uint64_t total = line + (!last_nl ? 1 : 0);
	if (!last_nl && collecting && line >= first && line < stop)
		n_in++;
	if (binary || (content.len && !utf8_valid(content.p, content.len))) {
		free(content.p);
		return read_binary(path, (int64_t)st.st_size);
	}
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "encoding", json_object_new_string("utf-8"));
	json_object_object_add(
		o, "content",
		json_object_new_string_len(content.p ? content.p : "", (int)content.len));
	json_object_object_add(o, "total_lines", json_object_new_int64((int64_t)total));
	json_object_object_add(o, "start_line",
			       json_object_new_int64(n_in ? (int64_t)first + 1 : 0));
	json_object_object_add(o, "end_line",
			       json_object_new_int64(n_in ? (int64_t)(first + n_in) : 0));
	json_object_object_add(o, "next_offset",
			       int_or_null(n_in && first + n_in < total, first + n_in));
	json_object_object_add(o, "size", json_object_new_int64((int64_t)st.st_size));
	json_object_object_add(o, "truncated", json_object_new_boolean(truncated));
	free(content.p);
	return fo_result(o);
}

/* ---- inside: write, upload ---- */

/* The reply of write and upload: size, the file's after it, for upload
 * only (-1: none). */
static int put_reply(const char *path, size_t len, bool created, int64_t size)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "bytes", json_object_new_int64((int64_t)len));
	json_object_object_add(o, "created", json_object_new_boolean(created));
	if (size >= 0)
		json_object_object_add(o, "size", json_object_new_int64(size));
	return fo_result(o);
}

/* An upload's chunk at offset > 0: appended to a file of exactly that
 * size, so a chunk lost or sent twice is an error, not a corrupt file. */
static int append_chunk(const char *path, const char *data, size_t len, int64_t offset)
{
	if (len > FILEOP_CHUNK_MAX)
		return fo_fail(AB_ERRC_TOO_LARGE, path, "upload: %zu bytes is over max_chunk, %u",
			       len, FILEOP_CHUNK_MAX);
	struct stat st;
	int fd = fo_open_regular(path, O_WRONLY, &st);
	if (fd == -ENOENT)
		return fo_fail(AB_ERRC_INVALID_REQUEST, path,
			       "upload: offset %lld, but %s does not exist (size 0): the first "
			       "chunk has offset 0",
			       (long long)offset, path);
	if (fd < 0)
		return fo_fail_errno(-fd, path, "cannot write");
	if (st.st_size != offset) {
		close(fd);
		return fo_fail(AB_ERRC_INVALID_REQUEST, path,
			       "upload: offset %lld, but %s has %lld bytes: a chunk goes at the "
			       "file's end",
			       (long long)offset, path, (long long)st.st_size);
	}
	int r = lseek(fd, (off_t)offset, SEEK_SET) < 0 ? -errno : fo_write_all(fd, data, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0)
		return fo_fail_errno(-r, path, "cannot write");
	return put_reply(path, len, false, offset + (int64_t)len);
}

/* write, and upload at offset 0 or without one (chunk: at most a chunk) */
static int put_file(const char *op, const char *path, const char *data, size_t len, bool overwrite,
		    bool chunk)
{
	size_t max = chunk ? FILEOP_CHUNK_MAX : FILEOP_DATA_MAX;
	if (len > max)
		return fo_fail(AB_ERRC_TOO_LARGE, path, "%s: %zu bytes is over the limit of %zu",
			       op, len, max);
	int r = fo_make_parents(path);
	if (r < 0)
		return fo_fail_errno(-r, path, "cannot create the directories of");
	bool created = true;
	int fd = fo_open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0644);
	if (fd < 0 && errno == EEXIST) {
		if (!overwrite)
			return fo_fail(AB_ERRC_EXISTS, path,
				       "%s exists; pass overwrite to replace it", path);
		struct stat st;
		created = false;
		fd = fo_open_regular(path, O_WRONLY, &st);
		if (fd < 0)
			return fo_fail_errno(-fd, path, "cannot write");
		if (ftruncate(fd, 0) < 0) {
			int e = errno;
			close(fd);
			return fo_fail_errno(e, path, "cannot write");
		}
	} else if (fd < 0) {
		return fo_fail_errno(errno, path, "cannot create");
	}
	r = fo_write_all(fd, data, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r < 0)
		return fo_fail_errno(-r, path, "cannot write");
	return put_reply(path, len, created, strcmp(op, "upload") == 0 ? (int64_t)len : -1);
}

int fo_write(json_object *q, bool upload)
{
	const char *path = fo_jstr(q, "path", NULL);
	size_t len;
	const char *data = fo_jstr(q, upload ? "data" : "content", &len);
	const char *enc = fo_jstr(q, "encoding", NULL);
	bool b64 = upload || (enc && strcmp(enc, "base64") == 0);
	if (!b64)
		return put_file("write", path, data, len, fo_jbool(q, "overwrite", false), false);
	size_t n;
	const char *why;
	char *raw = base64_decode(data, len, &n, &why);
	if (!raw)
		return fo_fail(AB_ERRC_INVALID_REQUEST, path, "%s: '%s' is not valid base64 (%s)",
			       upload ? "upload" : "write", upload ? "data" : "content", why);
	int64_t offset = upload ? fo_jint(q, "offset", -1) : -1;
	int r = offset > 0 ? append_chunk(path, raw, n, offset)
			   : put_file(upload ? "upload" : "write", path, raw, n,
				      fo_jbool(q, "overwrite", upload), offset == 0);
	free(raw);
	return r;
}

/* ---- inside: edit ---- */

/* Replace the content of the file at real (resolved, regular) with data:
 * a new file renamed over it, keeping its mode; in place when it has other
 * links (a rename would split them) or the directory is not writable. */
static int replace_content(const char *real, const struct stat *st, const char *data, size_t len)
{
	if (st->st_nlink == 1) {
		cleanup_free char *tmp = NULL;
		const char *slash = strrchr(real, '/');
		if (asprintf(&tmp, "%.*s/.agentbox-edit-XXXXXX", (int)(slash - real), real) < 0)
			return -ENOMEM;
		int fd = mkostemp(tmp, O_CLOEXEC);
		if (fd >= 0) {
			int r = fchmod(fd, st->st_mode & 07777) < 0 ? -errno : 0;
			if (r == 0)
				r = fo_write_all(fd, data, len);
			if (close(fd) < 0 && r == 0)
				r = -errno;
			if (r == 0 && rename(tmp, real) < 0)
				r = -errno;
			if (r < 0)
				unlink(tmp);
			return r;
		}
	}
	int fd = open(real, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	int r = fo_write_all(fd, data, len);
	if (close(fd) < 0 && r == 0)
		r = -errno;
	return r;
}

int fo_edit(json_object *q)
{
	const char *path = fo_jstr(q, "path", NULL);
	size_t olen, nlen;
	const char *old = fo_jstr(q, "old_string", &olen);
	const char *new = fo_jstr(q, "new_string", &nlen);
	bool all = fo_jbool(q, "replace_all", false);
	cleanup_free char *real = realpath(path, NULL);
	if (!real)
		return fo_fail_errno(errno, path, "cannot edit");
	char *data;
	size_t len;
	int r = fo_read_all(real, FILEOP_EDIT_MAX, &data, &len);
	if (r == -EFBIG)
		return fo_fail(AB_ERRC_TOO_LARGE, path, "%s is over the %u bytes edit works on",
			       path, FILEOP_EDIT_MAX);
	if (r < 0)
		return fo_fail_errno(-r, path, "cannot edit");
	uint64_t count = 0;
	for (const char *p = data; (p = memmem(p, len - (size_t)(p - data), old, olen)); p += olen)
		count++;
	if (count == 0 || (count > 1 && !all)) {
		free(data);
		if (count == 0)
			return fo_fail(AB_ERRC_NOT_FOUND, path, "old_string is not in %s", path);
		return fo_fail(AB_ERRC_NOT_UNIQUE, path,
			       "old_string occurs %llu times in %s; give more context to make it "
			       "unique, or pass replace_all",
			       (unsigned long long)count, path);
	}
	struct sbuf out = {0};
	bool ok = true;
	const char *p = data;
	for (const char *m; (m = memmem(p, len - (size_t)(p - data), old, olen)); p = m + olen)
		ok = ok && sb_add(&out, p, (size_t)(m - p)) && sb_add(&out, new, nlen);
	ok = ok && sb_add(&out, p, len - (size_t)(p - data));
	free(data);
	if (!ok) {
		free(out.p);
		return fo_fail(AB_ERRC_IO_ERROR, path, "out of memory editing %s", path);
	}
	struct stat st;
	r = stat(real, &st) < 0 ? -errno : replace_content(real, &st, out.p ? out.p : "", out.len);
	free(out.p);
	if (r < 0)
		return fo_fail_errno(-r, path, "cannot write");
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "occurrences", json_object_new_int64((int64_t)count));
	return fo_result(o);
}

/* A download's chunk: up to length bytes from offset. */
static int download_chunk(const char *path, int64_t offset, int64_t length)
{
	struct stat st;
	int fd = fo_open_regular(path, O_RDONLY, &st);
	if (fd < 0)
		return fo_fail_errno(-fd, path, "cannot read");
	if (offset > st.st_size) {
		close(fd);
		return fo_fail(AB_ERRC_INVALID_REQUEST, path,
			       "download: offset %lld is past the end of %s, which has %lld bytes",
			       (long long)offset, path, (long long)st.st_size);
	}
	size_t want = (size_t)(length < st.st_size - offset ? length : st.st_size - offset), n = 0;
	cleanup_free char *buf = malloc(want + 1);
	if (!buf) {
		close(fd);
		return fo_fail(AB_ERRC_IO_ERROR, path, "out of memory");
	}
	while (n < want) {
		ssize_t k = pread(fd, buf + n, want - n, (off_t)(offset + (int64_t)n));
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			close(fd);
			return fo_fail_errno(e, path, "cannot read");
		}
		if (k == 0)
			break; /* the file shrank while being read */
		n += (size_t)k;
	}
	/* whether anything follows: the size now, which may have changed */
	int64_t size = fstat(fd, &st) == 0 ? (int64_t)st.st_size : offset + (int64_t)n;
	close(fd);
	char *b = base64_encode(buf, n);
	if (!b)
		return fo_fail(AB_ERRC_IO_ERROR, path, "out of memory");
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "data", json_object_new_string(b));
	json_object_object_add(o, "size", json_object_new_int64(size));
	json_object_object_add(o, "offset", json_object_new_int64(offset));
	json_object_object_add(o, "eof", json_object_new_boolean(offset + (int64_t)n >= size));
	free(b);
	return fo_result(o);
}

int fo_download(json_object *q)
{
	const char *path = fo_jstr(q, "path", NULL);
	int64_t offset = fo_jint(q, "offset", -1);
	if (offset >= 0)
		return download_chunk(path, offset, fo_jint(q, "length", FILEOP_CHUNK_MAX));
	char *data;
	size_t len;
	int r = fo_read_all(path, FILEOP_DATA_MAX, &data, &len);
	if (r == -EFBIG)
		return fo_fail(AB_ERRC_TOO_LARGE, path,
			       "%s is over the %u bytes a download carries", path, FILEOP_DATA_MAX);
	if (r < 0)
		return fo_fail_errno(-r, path, "cannot read");
	char *b = base64_encode(data, len);
	free(data);
	if (!b)
		return fo_fail(AB_ERRC_IO_ERROR, path, "out of memory");
	json_object *o = json_object_new_object();
	json_object_object_add(o, "path", json_object_new_string(path));
	json_object_object_add(o, "data", json_object_new_string(b));
	json_object_object_add(o, "size", json_object_new_int64((int64_t)len));
	free(b);
	return fo_result(o);
}
