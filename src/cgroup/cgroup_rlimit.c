/* The rlimits that stand in for cgroup limits where the sandbox has no
 * cgroup (cgroup.h): RLIMIT_AS per process for --memory (weaker, and said
 * so), RLIMIT_NPROC in the sandbox's own user namespace for --pids. */
#include <errno.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include "cgroup/cgroup_int.h"
#include "util/error.h"

void ab_cg_set_how(struct ab_limit_status *s, enum ab_limit_how how, const char *why)
{
	s->how = how;
	snprintf(s->why, sizeof(s->why), "%s", why ? why : "");
}

/* RLIMIT_NPROC is counted per user namespace (ucounts) since Linux 5.14:
 * set in the sandbox's own, it counts the sandbox's processes only; before,
 * every process of the host uid. */
static bool nproc_per_userns(void)
{
	struct utsname u;
	unsigned major = 0, minor = 0;
	if (uname(&u) < 0 || sscanf(u.release, "%u.%u", &major, &minor) != 2)
		return false;
	return major > 5 || (major == 5 && minor >= 14);
}

/* No cgroup: an rlimit where one means the same thing, else say why. */
void ab_cg_fall_back(struct ab_cgroup *cg, const struct ab_limits *lim, const char *why)
{
	char w[200];
	if (lim->memory && cg->st.memory.how != AB_LIMIT_CGROUP) {
		cg->rlimit_as = lim->memory;
		snprintf(w, sizeof(w), "RLIMIT_AS per process: %s", why);
		ab_cg_set_how(&cg->st.memory, AB_LIMIT_RLIMIT, w);
	}
	if (lim->cpu_millis && cg->st.cpu.how != AB_LIMIT_CGROUP)
		/* RLIMIT_CPU caps total seconds, not a share of a core */
		ab_cg_set_how(&cg->st.cpu, AB_LIMIT_UNAVAILABLE, why);
	if (lim->pids && cg->st.pids.how != AB_LIMIT_CGROUP) {
		if (lim->own_userns && nproc_per_userns()) {
			cg->rlimit_nproc = lim->pids;
			snprintf(w, sizeof(w), "RLIMIT_NPROC in the sandbox's user namespace: %s",
				 why);
			ab_cg_set_how(&cg->st.pids, AB_LIMIT_RLIMIT, w);
		} else {
			snprintf(w, sizeof(w), "%s; RLIMIT_NPROC %s", why,
				 lim->own_userns ? "counts every process of the host uid before "
						   "Linux 5.14"
						 : "needs the sandbox's own user namespace");
			ab_cg_set_how(&cg->st.pids, AB_LIMIT_UNAVAILABLE, w);
		}
	}
}

void ab_cgroup_set_rlimit_as(struct ab_cgroup *cg, unsigned long long v)
{
	if (cg)
		cg->rlimit_as = v;
}

void ab_cgroup_set_rlimit_nproc(struct ab_cgroup *cg, unsigned long v)
{
	if (cg)
		cg->rlimit_nproc = v;
}

unsigned long ab_cgroup_rlimit_nproc(const struct ab_cgroup *cg)
{
	return cg ? cg->rlimit_nproc : 0;
}

int ab_cgroup_apply_nproc(const struct ab_cgroup *cg, struct ab_error *err)
{
	struct rlimit cur;
	if (!cg || !cg->rlimit_nproc || getrlimit(RLIMIT_NPROC, &cur) < 0)
		return 0;
	/* an --rlimit nproc below it stays */
	if (cur.rlim_cur != RLIM_INFINITY && cur.rlim_cur <= cg->rlimit_nproc)
		return 0;
	struct rlimit rl = {cg->rlimit_nproc, cg->rlimit_nproc};
	if (setrlimit(RLIMIT_NPROC, &rl) < 0)
		return ab_error_set(err, errno, "--pids: cannot set RLIMIT_NPROC");
	return 0;
}

int ab_cgroup_apply_rlimits(const struct ab_cgroup *cg, struct ab_error *err)
{
	if (!cg || !cg->rlimit_as)
		return 0;
	struct rlimit rl = {cg->rlimit_as, cg->rlimit_as};
	if (setrlimit(RLIMIT_AS, &rl) < 0)
		return ab_error_set(err, errno, "--memory: cannot set RLIMIT_AS");
	return 0;
}

unsigned long long ab_cgroup_rlimit_as(const struct ab_cgroup *cg)
{
	return cg ? cg->rlimit_as : 0;
}
