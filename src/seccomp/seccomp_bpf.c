/* Seccomp profiles as BPF (seccomp_internal.h): libseccomp's program
 * exported into memory, the build-time programs copied instead of a
 * compile, and the filter installed in the command's process. */
#include "seccomp/seccomp_bpf.h"

#include "seccomp/seccomp_internal.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/error.h"
#include "util/util.h"

int secprof_export(struct loader *l)
{
	cleanup_fd int fd = memfd_create("agentbox-seccomp", MFD_CLOEXEC);
	if (fd < 0)
		return ab_error_set(l->err, errno, "compiling the seccomp profile %s", l->file);
	int r = seccomp_export_bpf(l->ctx, fd);
	if (r < 0)
		return ab_error_set(l->err, -r, "compiling the seccomp profile %s", l->file);
	struct stat st;
	if (fstat(fd, &st) >= 0 && st.st_size > BPF_MAXINSNS * (off_t)sizeof(struct sock_filter))
		return ab_error_plain(
			l->err, E2BIG,
			"seccomp profile %s: compiles to more than %d BPF instructions, "
			"the kernel's limit",
			l->file, BPF_MAXINSNS);
	if (fstat(fd, &st) < 0 || st.st_size <= 0 ||
	    st.st_size % (off_t)sizeof(struct sock_filter) != 0)
		return ab_error_plain(l->err, EIO, "compiling the seccomp profile %s: bad program",
				      l->file);
	struct sock_filter *f = malloc((size_t)st.st_size);
	if (!f)
		return ab_error_set(l->err, ENOMEM, "compiling the seccomp profile");
	if (pread(fd, f, (size_t)st.st_size, 0) != st.st_size) {
		free(f);
		return ab_error_set(l->err, errno ? errno : EIO, "compiling the seccomp profile");
	}
	l->p->prog.filter = f;
	l->p->prog.len = (unsigned short)(st.st_size / (off_t)sizeof(struct sock_filter));
	for (unsigned i = 0; i < l->p->prog.len; i++)
		if (BPF_CLASS(f[i].code) == BPF_RET &&
		    (f[i].k & SECCOMP_RET_ACTION_FULL) == SECCOMP_RET_USER_NOTIF)
			l->p->notify = true;
	return 0;
}

/* FNV-1a: tells a shipped profile's bytes from an edited copy (not a
 * defence: whoever can choose the file can choose --seccomp none too) */
uint64_t secprof_hash(const char *buf, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)buf[i]) * 0x100000001b3ULL;
	return h;
}

/* The program compiled at build time from exactly these bytes for this
 * kind of load, in l->p (which points at it, read-only data of the binary
 * shared by every process, not a copy in each launcher's and init's
 * heap); false when there is none. */
bool secprof_take_precompiled(struct loader *l, const char *buf, size_t n)
{
	uint64_t h = secprof_hash(buf, n);
	for (size_t i = 0; i < ab_seccomp_n_compiled; i++) {
		const struct ab_seccomp_compiled *c = &ab_seccomp_compiled[i];
		if (c->hash != h || c->size != n || c->notify_api != l->use_notify ||
		    strcmp(c->arch, l->native) != 0)
			continue;
		/* never written, nor freed (ab_seccomp_free) */
		*l->p = (struct ab_seccomp_profile){
			.prog = {.len = c->len, .filter = (struct sock_filter *)c->filter},
			.notify = c->notify,
			.default_errno = c->default_errno,
			.errnos = (struct ab_seccomp_errno *)c->errnos,
			.n_errnos = c->n_errnos,
			.precompiled = true};
		if (c->unknown && (l->unknown = strdup(c->unknown)))
			l->unknown_len = strlen(l->unknown);
		return true;
	}
	return false;
}

bool ab_seccomp_is_precompiled(const struct ab_seccomp_profile *p)
{
	return p && p->precompiled;
}

const struct sock_fprog *ab_seccomp_program(const struct ab_seccomp_profile *p)
{
	return &p->prog;
}

void ab_seccomp_free(struct ab_seccomp_profile *p)
{
	if (!p)
		return;
	if (!p->precompiled) {
		free(p->prog.filter);
		free(p->errnos);
	}
	free(p);
}

int ab_seccomp_install(const struct ab_seccomp_profile *p, int *listener, struct ab_error *err)
{
	*listener = -1;
	unsigned flags = p->notify ? SECCOMP_FILTER_FLAG_NEW_LISTENER : 0;
	long r = syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &p->prog);
	if (r < 0)
		return ab_error_set(err, errno, "cannot install the seccomp filter");
	if (p->notify)
		*listener = (int)r; /* the kernel makes it close-on-exec */
	return 0;
}
