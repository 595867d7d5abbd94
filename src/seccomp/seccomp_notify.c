/* Seccomp user notification, the supervisor's side (seccomp_profile.h):
 * each notified syscall is counted as a denial and answered with the
 * errno the profile gave it. */
#include "seccomp/seccomp_notify.h"

#include "seccomp/seccomp_internal.h"

#include <errno.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/util.h"

static int errno_for(const struct ab_seccomp_profile *p, const char *name)
{
	for (size_t i = 0; i < p->n_errnos; i++)
		if (strcmp(p->errnos[i].name, name) == 0)
			return p->errnos[i].err;
	return p->default_errno;
}

static void count_denial(struct ab_denials *d, int nr, const char *name)
{
	for (size_t i = 0; i < d->n; i++) {
		if (strcmp(d->e[i].name, name) == 0) {
			d->e[i].count++;
			return;
		}
	}
	if (d->n == AB_DENIALS_MAX) {
		d->other++;
		return;
	}
	d->e[d->n].nr = nr;
	snprintf(d->e[d->n].name, sizeof(d->e[d->n].name), "%s", name);
	d->e[d->n++].count = 1;
}

int ab_seccomp_answer(const struct ab_seccomp_profile *p, int listener, struct ab_denials *d,
		      ab_denial_route route, void *arg)
{
	/* the kernel's structures may be larger than our headers' */
	static struct seccomp_notif_sizes sizes;
	if (!sizes.seccomp_notif && syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
		return -errno;
	size_t req_size = sizes.seccomp_notif > sizeof(struct seccomp_notif)
				  ? sizes.seccomp_notif
				  : sizeof(struct seccomp_notif);
	size_t resp_size = sizes.seccomp_notif_resp > sizeof(struct seccomp_notif_resp)
				   ? sizes.seccomp_notif_resp
				   : sizeof(struct seccomp_notif_resp);
	cleanup_free struct seccomp_notif *req = calloc(1, req_size);
	cleanup_free struct seccomp_notif_resp *resp = calloc(1, resp_size);
	if (!req || !resp)
		return -ENOMEM;
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) < 0)
		/* ENOENT: the caller died before we looked; EINTR: try again later */
		return errno == ENOENT || errno == EINTR ? 0 : -errno;
	char *resolved = seccomp_syscall_resolve_num_arch(req->data.arch, req->data.nr);
	char name[32];
	if (resolved)
		snprintf(name, sizeof(name), "%s", resolved);
	else
		snprintf(name, sizeof(name), "syscall_%d", req->data.nr);
	free(resolved);
	if (d)
		count_denial(d, req->data.nr, name);
	struct ab_denials *to = route ? route((pid_t)req->pid, arg) : NULL;
	if (to)
		count_denial(to, req->data.nr, name);
	resp->id = req->id;
	resp->error = -errno_for(p, name);
	if (ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0 && errno != ENOENT)
		return -errno;
	return 1;
}
