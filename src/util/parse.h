/* Values of options and profile keys (parse.c): ids, rlimit names and
 * paths in the view; sizes and durations are in the public header. Pure
 * functions, no I/O. */
#ifndef AB_PARSE_H
#define AB_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ab_error;

/* A uid or gid in decimal; (uid_t)-1 is refused. */
int ab_parse_id(const char *s, uid_t *out);

/* Normalise an absolute path inside the view: collapse '/' runs and '.',
 * drop a trailing '/'. Returns -EINVAL if not absolute and -ELOOP if it
 * contains '..' (refused rather than resolved). */
int ab_path_normalize(const char *in, char **out);

/* True if path equals dir or lies beneath it (both normalised). */
bool ab_path_is_under(const char *path, const char *dir);

/* rlimit names as --rlimit spells them ("nofile"): resource, or -1. */
int ab_rlimit_by_name(const char *name);
const char *ab_rlimit_name(int resource);

/* One word of a few, as an option takes it. */
struct ab_choice {
	const char *name;
	int value;
};

/* value as the name of one of the n choices: its value (0 or more). Else
 * "OPT: 'VALUE' is not one of A, B" in err (a name of a value named
 * before, an alias, is not listed), -EINVAL. */
int ab_parse_choice(const char *opt, const char *value, const struct ab_choice *c, size_t n,
		    struct ab_error *err);

#endif
