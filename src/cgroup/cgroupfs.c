/* cgroupfs access for the cgroup code (cgroupfs.h): files read and
 * written, the process's own v2 cgroup, and the fake tree a test may put
 * in the real hierarchy's place. */
#include "cgroup/cgroupfs.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgroup/cgroup.h"
#include "util/util.h"

/* Tests only (ab_cgroup_test_fake_v2): a directory laid out like a cgroup2
 * hierarchy with controllers stands in for the real one. */
static struct {
	const char *root; /* NULL: the real hierarchies */
	const char *own;  /* the caller's cgroup, as /proc/self/cgroup would say */
} fake;

void ab_cgroup_test_fake_v2(const char *root, const char *own)
{
	fake.root = root;
	fake.own = own;
}

int ab_cgfs_write(const char *dir, const char *file, const char *value)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	/* cgroupfs makes the files of a new cgroup itself; a fake tree cannot */
	cleanup_fd int fd =
		open(path, O_WRONLY | O_CLOEXEC | (fake.root ? O_CREAT | O_TRUNC : 0), 0644);
	if (fd < 0)
		return -errno;
	size_t n = strlen(value);
	if (write(fd, value, n) != (ssize_t)n)
		return -errno;
	return 0;
}

int ab_cgfs_read(const char *dir, const char *file, char *buf, size_t len)
{
	char path[1200];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	cleanup_fd int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* This process's own cgroup in the unified hierarchy ("0::/path"). */
bool ab_cgfs_own_v2(char *out, size_t len)
{
	if (fake.root) {
		snprintf(out, len, "%s", fake.own);
		return true;
	}
	char buf[4096];
	if (ab_cgfs_read("/proc/self", "cgroup", buf, sizeof(buf)) < 0)
		return false;
	for (char *l = buf; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (strncmp(l, "0::", 3) == 0) {
			size_t n = strcspn(l + 3, "\n");
			snprintf(out, len, "%.*s", (int)n, l + 3);
			return true;
		}
	}
	return false;
}

bool ab_cgfs_faked(void)
{
	return fake.root != NULL;
}

const char *ab_cgfs_fake_root(void)
{
	return fake.root;
}
