/* cgroupfs access shared by cgroup.c and cgroup_delegate.c
 * (cgroupfs.c), which a test may point at a fake tree
 * (ab_cgroup_test_fake_v2 in cgroup.h). */
#ifndef AB_CGROUPFS_H
#define AB_CGROUPFS_H

#include <stdbool.h>
#include <stddef.h>

/* dir/file written with value, or read into buf (NUL-terminated); -errno */
int ab_cgfs_write(const char *dir, const char *file, const char *value);
int ab_cgfs_read(const char *dir, const char *file, char *buf, size_t len);
/* This process's own cgroup in the unified hierarchy ("0::/path"). */
bool ab_cgfs_own_v2(char *out, size_t len);
/* A test's fake tree stands in for the hierarchy; its root, or NULL. */
bool ab_cgfs_faked(void);
const char *ab_cgfs_fake_root(void);

#endif
