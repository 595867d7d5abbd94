/* Small helpers shared by every source file: cleanup attributes, ownership
 * moves and errno-preserving closes. */
#ifndef AB_UTIL_H
#define AB_UTIL_H

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#define cleanup_free __attribute__((cleanup(ab_cleanup_freep)))
#define cleanup_fd   __attribute__((cleanup(ab_cleanup_fdp)))
#define cleanup_strv __attribute__((cleanup(ab_cleanup_strvp)))

static inline void ab_cleanup_freep(void *p)
{
	free(*(void **)p);
}

static inline void ab_close_keep_errno(int fd)
{
	int saved = errno;
	if (fd >= 0)
		close(fd);
	errno = saved;
}

static inline void ab_cleanup_fdp(int *fd)
{
	ab_close_keep_errno(*fd);
	*fd = -1;
}

static inline void ab_cleanup_strvp(char ***p)
{
	if (*p) {
		for (char **s = *p; *s; s++)
			free(*s);
		free(*p);
	}
}

/* Take ownership out of a cleanup variable. */
static inline void *ab_steal_pointer(void *pp)
{
	void **p = pp;
	void *v = *p;
	*p = NULL;
	return v;
}

static inline int ab_steal_fd(int *fd)
{
	int v = *fd;
	*fd = -1;
	return v;
}

/* The integer a small file holds (a sysctl in /proc/sys), or -1 when it
 * cannot be read. */
static inline int ab_read_int(const char *path)
{
	char buf[32] = {0};
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
		return -1;
	return atoi(buf);
}

#define AB_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* A copy of s at the end of the NULL-ended list *v of *n strings; -ENOMEM
 * (the list still NULL-ended, and whole). */
static inline int ab_strv_push(char ***v, size_t *n, const char *s)
{
	char **nv = realloc(*v, (*n + 2) * sizeof(char *));
	if (!nv)
		return -ENOMEM;
	*v = nv;
	if (!(nv[*n] = strdup(s)))
		return -ENOMEM;
	nv[++*n] = NULL;
	return 0;
}

/* The n bytes at p as a string of their own, NUL-ended; NULL without
 * memory. Not strndup(3): that one may look for a NUL past n (sanitizers'
 * strict string checks do), where a buffer read from a peer has none. */
static inline char *ab_memdup_str(const void *p, size_t n)
{
	char *s = malloc(n + 1);
	if (s) {
		memcpy(s, p, n);
		s[n] = 0;
	}
	return s;
}

/* mkdir -p of an absolute path, each new directory with mode: 0 or -errno
 * (util/paths.c). */
int ab_mkdir_p(const char *path, mode_t mode);

/* Where agentbox keeps its state NAME (layers, images): /var/lib/agentbox/NAME
 * for root, else $XDG_STATE_HOME/agentbox/NAME or
 * ~/.local/state/agentbox/NAME; -ENOENT when there is no home. Not made. */
int ab_state_dir(const char *name, char *buf, size_t n);

/* uid's home directory in the account database, as getpwuid(3) finds it,
 * into buf; false when it has none (util/paths.c). */
bool ab_account_home(uid_t uid, char *buf, size_t n);

#endif
