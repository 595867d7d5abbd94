/* The option parser of agentbox run and agentbox serve (src/cli/options.c).
 * Input: the first byte chooses run (even) or serve (odd); the rest is the
 * argument vector, NUL-separated. Whatever the arguments, the parser must
 * return 0 or an error with a message, never crash, and ab_config_free
 * must release everything it kept. */
#include <string.h>

#include "agentbox/agentbox.h"
#include "fuzz.h"
#include "cli/options.h"
#include "util/parse.h"

#define MAX_ARGS 256

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	bool serve = data[0] & 1;
	char *argv[MAX_ARGS + 2];
	int argc = 0;
	argv[argc++] = strdup(serve ? "serve" : "run");
	/* each argument in a buffer of its own size, so an overread shows */
	for (size_t i = 1; i < size && argc < MAX_ARGS;) {
		const uint8_t *nul = memchr(data + i, '\0', size - i);
		size_t n = nul ? (size_t)(nul - (data + i)) : size - i;
		char *a = malloc(n + 1);
		FUZZ_CHECK(a);
		memcpy(a, data + i, n);
		a[n] = '\0';
		argv[argc++] = a;
		i += n + 1;
	}
	argv[argc] = NULL;
	char *copy[MAX_ARGS + 2]; /* getopt may permute argv: free what we made */
	memcpy(copy, argv, sizeof(copy));

	struct ab_config cfg;
	ab_config_init(&cfg);
	bool help = false;
	struct ab_error err = {0};
	int r = serve ? ab_config_parse_serve(&cfg, argc, argv, &help, &err)
		      : ab_config_parse_run(&cfg, argc, argv, &help, &err);
	if (r < 0) {
		FUZZ_CHECK(err.msg[0] && memchr(err.msg, '\0', sizeof(err.msg)));
	} else if (!help) {
		FUZZ_CHECK(cfg.seccomp && cfg.hostname && cfg.home);
		FUZZ_CHECK(cfg.n_rlimits <= sizeof(cfg.rlimits) / sizeof(cfg.rlimits[0]));
		/* every mount's place in the view is normalised already (a
		 * relative SRC without DST gets it later, from the host) */
		for (size_t i = 0; i < cfg.n_mounts; i++) {
			char *norm = NULL;
			if (!cfg.mounts[i].dst) {
				FUZZ_CHECK(cfg.mounts[i].src && cfg.mounts[i].src[0] != '/');
				continue;
			}
			FUZZ_CHECK(ab_path_normalize(cfg.mounts[i].dst, &norm) == 0 &&
				   strcmp(norm, cfg.mounts[i].dst) == 0);
			FUZZ_CHECK((cfg.mounts[i].kind == AB_MOUNT_TMPFS) == !cfg.mounts[i].src);
			free(norm);
		}
		if (serve)
			FUZZ_CHECK(!cfg.argv);
		else
			FUZZ_CHECK(cfg.argv && cfg.argc > 0 && cfg.argv[0][0] &&
				   !cfg.argv[cfg.argc]);
	}
	ab_config_free(&cfg);
	for (int i = 0; i < argc; i++)
		free(copy[i]);
	return 0;
}
