/* The seccomp profile loader (src/seccomp/seccomp_profile.c): a profile file in
 * the OCI / Docker JSON format, which users and agent frameworks write
 * and pass with --seccomp FILE. The bytes go through a memfd, loaded by
 * its /proc/self/fd path, like any file. Load (and compile) only: no
 * filter is installed. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "seccomp/seccomp_profile.h"

static void load(const char *path)
{
	struct ab_seccomp_profile *p = NULL;
	char *notices = NULL;
	struct ab_error err = {0};
	int r = ab_seccomp_load(path, &p, &notices, &err);
	if (r < 0)
		FUZZ_CHECK(!p && !notices && err.msg[0] && memchr(err.msg, '\0', sizeof(err.msg)));
	else
		FUZZ_CHECK(r == 0 && p);
	free(notices);
	ab_seccomp_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-profile", MFD_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	size_t off = 0;
	while (off < size) {
		ssize_t n = write(fd, data + off, size - off);
		FUZZ_CHECK(n > 0);
		off += (size_t)n;
	}
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	load(path);
	close(fd);
	return 0;
}
