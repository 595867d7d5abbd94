/* agentbox check: whether this host can run agentbox and what will be
 * limited. Facts are gathered from the kernel and from a trial run of
 * /bin/true in a real sandbox; the assessment is a pure function of the
 * facts, so tests can feed it any host. */
#ifndef AB_CHECK_H
#define AB_CHECK_H

#include <stdbool.h>
#include <stddef.h>

struct check_limit {
	char how[16]; /* "cgroup", "rlimit", "unavailable" */
	char why[200];
};

struct check_facts {
	char kernel[128]; /* the release, uname -r */
	bool root;
	int userns_clone;	 /* kernel.unprivileged_userns_clone; -1: the kernel has none */
	int max_user_namespaces; /* user.max_user_namespaces; -1: unknown */
	int apparmor_restrict;	 /* kernel.apparmor_restrict_unprivileged_userns; -1: none */
	bool in_container;
	bool seccomp;	     /* seccomp filters */
	bool seccomp_notify; /* and user notification (denials reported) */
	int landlock_abi;    /* 0: none */
	/* the trial: agentbox run -- /bin/true with memory, cpu and pids limits */
	bool trial_ok;
	char trial_error[1024]; /* an ab_error's message fits */
	char host_cgroup[8];	/* the host's hierarchy: "v2", "v1" (or hybrid), "none" */
	char cgroup_version[8]; /* what the trial sandbox got: "v2", "v1", "none" */
	struct check_limit memory, cpu, pids;
	char cgroup_path[512];	 /* the trial sandbox's cgroup, "" for none */
	char cgroup_parent[512]; /* the trial's --cgroup-parent, "" for none */
	char rootfs[4096];	 /* the trial's --rootfs, "" for the host's system */
	char image[4096];	 /* the trial's --image, "" for none */
	char defaults[600];	 /* the defaults files the trial applied, "" for none */
	/* as root: can the current directory (the default workspace) be idmapped */
	enum { CHECK_IDMAP_UNKNOWN, CHECK_IDMAP_OK, CHECK_IDMAP_REFUSED, CHECK_IDMAP_NO_CAP } idmap;
	char idmap_detail[600]; /* the directory and its filesystem, or why not */
	/* what the isolation probe found missing (isolation.h) */
	unsigned isolation_missing;
	char isolation_why[600];
};

enum check_level { CHECK_OK, CHECK_WARN, CHECK_FAIL };

struct check_item {
	const char *name;
	enum check_level level;
	char detail[400];
	char fix[400]; /* "" when there is nothing to do */
};

#define CHECK_MAX_ITEMS 10

/* The facts of this host (runs the trial sandbox). */
void check_gather(struct check_facts *f);
/* The same with the trial's cgroup made below cgroup_parent (NULL: where
 * agentbox makes it by default), as --cgroup-parent: a delegation checked. */
void check_gather_in(struct check_facts *f, const char *cgroup_parent);
/* The same with the trial run on the root tree rootfs (--rootfs) or the
 * image (--image; both NULL: on the host's system): `/bin/sh -c :` there
 * instead of /bin/true. */
void check_gather_on(struct check_facts *f, const char *cgroup_parent, const char *rootfs,
		     const char *image);

/* What the facts mean, item by item; returns how many items. */
size_t check_assess(const struct check_facts *f, struct check_item *items);

/* Print the assessment (text, or one JSON object); returns the exit
 * status: 0 when agentbox can run here, 1 when not. */
int check_print(const struct check_facts *f, bool json);

#endif
