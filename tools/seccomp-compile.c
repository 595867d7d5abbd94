/* seccomp-compile OUT.c PROFILE.json...: compile the shipped seccomp
 * profiles at build time into the table the library looks up before it
 * compiles a profile itself (seccomp_profile.h, ab_seccomp_compiled). */
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"
#include "seccomp/policy_builtin.h"
#include "seccomp/seccomp_bpf.h"
#include "seccomp/seccomp_profile.h"

/* this tool is linked without a table: it is what makes one */
const struct ab_seccomp_compiled ab_seccomp_compiled[1];
const size_t ab_seccomp_n_compiled = 0;
const struct sock_filter ab_setid_guard_compiled[1];
const unsigned short ab_setid_guard_len = 0;
const struct ab_policy_file ab_policy_builtin_files[1];

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: seccomp-compile OUT.c PROFILE.json...\n");
		return 2;
	}
	FILE *out = fopen(argv[1], "w");
	if (!out) {
		perror(argv[1]);
		return 1;
	}
	struct ab_error err = {0};
	int r = ab_seccomp_emit_c(out, argv + 2, (size_t)(argc - 2), &err);
	if (fclose(out) != 0 && r == 0)
		r = -1;
	if (r < 0) {
		fprintf(stderr, "seccomp-compile: %s\n", err.msg[0] ? err.msg : "cannot write");
		remove(argv[1]);
		return 1;
	}
	return 0;
}
