/* The sandbox profile loader (src/cli/profile.c): a JSON file of options that
 * users and agent frameworks write and pass with --profile. Whatever the
 * bytes, it applies them to the config or refuses them with a message
 * naming the profile, never crashes, and ab_config_free releases all it
 * kept. The source has a '/' so relative paths are resolved against its
 * directory, as for a file. */
#include <string.h>

#include "agentbox/agentbox.h"
#include "fuzz.h"
#include "cli/options.h"
#include "cli/profile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char source[] = "/etc/agentbox/fuzz.json";
	/* exactly size bytes, so a read past them shows */
	char *buf = malloc(size ? size : 1);
	FUZZ_CHECK(buf);
	memcpy(buf, data, size);
	struct ab_config cfg;
	ab_config_init(&cfg);
	struct ab_error err = {0};
	int r = ab_profile_load_buffer(&cfg, buf, size, source, &err);
	if (r < 0) {
		FUZZ_CHECK(err.msg[0] && memchr(err.msg, '\0', sizeof(err.msg)));
		FUZZ_CHECK(strstr(err.msg, source));
	} else {
		FUZZ_CHECK(r == 0);
		/* relative sources were made absolute against the profile's place */
		for (size_t i = 0; i < cfg.n_mounts; i++)
			FUZZ_CHECK(!cfg.mounts[i].src || cfg.mounts[i].src[0] == '/');
	}
	ab_config_free(&cfg);
	free(buf);
	return 0;
}
