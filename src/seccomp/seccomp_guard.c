/* The setid guard as a BPF program (seccomp_guard.h), compiled with
 * libseccomp: at build time into the library (seccomp_emit.c), at run time
 * where that copy was incomplete (idmap.c). */
#include "seccomp/seccomp_guard.h"

#include <errno.h>
#include <seccomp.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/error.h"
#include "util/util.h"

/* Syscalls that set a file's mode, and which argument holds it. */
static const struct {
	const char *name;
	unsigned arg;
} mode_setters[] = {
	{"chmod", 1}, {"fchmod", 1}, {"fchmodat", 2}, {"fchmodat2", 2}, {"creat", 1},
	{"open", 2},  {"openat", 3}, {"mknod", 1},    {"mknodat", 2},
};
/* Syscalls that take a mode no filter can read (in a struct, or a ring).
 * Answered with a notification no listener waits for, which fails them
 * with ENOSYS (callers fall back to the calls above); a profile's own
 * notification for them, installed later, is the one taken on a tie
 * (seccomp_run_filters), so a profile that denies them still reports it. */
static const char *const opaque_mode_setters[] = {"openat2", "io_uring_setup"};

static int add_compat_arches(scmp_filter_ctx ctx)
{
	uint32_t native = seccomp_arch_native();
	uint32_t compat[2] = {0, 0};
	if (native == SCMP_ARCH_X86_64) {
		compat[0] = SCMP_ARCH_X86;
		compat[1] = SCMP_ARCH_X32;
	} else if (native == SCMP_ARCH_AARCH64) {
		compat[0] = SCMP_ARCH_ARM;
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(compat); i++) {
		int r = compat[i] ? seccomp_arch_add(ctx, compat[i]) : 0;
		if (r < 0 && r != -EEXIST)
			return r;
	}
	return 0;
}

static int guard_rules(scmp_filter_ctx ctx, bool *complete)
{
	*complete = true;
	int r = add_compat_arches(ctx);
	if (r < 0)
		return r;
	for (size_t i = 0; i < AB_ARRAY_SIZE(mode_setters); i++) {
		int nr = seccomp_syscall_resolve_name(mode_setters[i].name);
		if (nr == __NR_SCMP_ERROR) {
			*complete = false;
			continue; /* libseccomp older than the syscall */
		}
		for (unsigned bit = S_ISGID; bit <= S_ISUID; bit <<= 1) {
			struct scmp_arg_cmp c = {mode_setters[i].arg, SCMP_CMP_MASKED_EQ, bit, bit};
			r = seccomp_rule_add_array(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1, &c);
			if (r < 0 && nr >= 0)
				return r;
		}
	}
	for (size_t i = 0; i < AB_ARRAY_SIZE(opaque_mode_setters); i++) {
		int nr = seccomp_syscall_resolve_name(opaque_mode_setters[i]);
		if (nr == __NR_SCMP_ERROR) {
			*complete = false;
			continue;
		}
		r = seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, nr, 0);
		if (r < 0 && nr >= 0)
			return r;
	}
	return 0;
}

int seccomp_setid_guard_compile(struct sock_fprog **out, bool *complete, struct ab_error *err)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx)
		return ab_error_set(err, ENOMEM, "building the setid guard");
	/* a syscall of an architecture this filter does not know of */
	int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_ERRNO(ENOSYS));
	if (r == 0)
		r = guard_rules(ctx, complete);
	cleanup_fd int fd = -1;
	if (r == 0 && (fd = memfd_create("agentbox-setid-guard", MFD_CLOEXEC)) < 0)
		r = -errno;
	if (r == 0)
		r = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	struct stat st;
	if (r == 0 && fstat(fd, &st) < 0)
		r = -errno;
	if (r < 0)
		return ab_error_set(err, -r, "building the setid guard");
	struct sock_fprog *p = calloc(1, sizeof(*p));
	struct sock_filter *f = malloc((size_t)st.st_size);
	if (!p || !f || pread(fd, f, (size_t)st.st_size, 0) != st.st_size) {
		free(p);
		free(f);
		return ab_error_set(err, errno ? errno : EIO, "building the setid guard");
	}
	p->filter = f;
	p->len = (unsigned short)(st.st_size / (off_t)sizeof(*f));
	*out = p;
	return 0;
}
