/* The options of agentbox run and serve (options.c): each option's kind
 * and the one function that applies a value to a configuration, used by
 * the command line and by profiles (profile.c) alike. Values are parsed
 * by parse.c (parse.h); the host is checked by config.c (config.h). */
#ifndef AB_OPTIONS_H
#define AB_OPTIONS_H

#include <stdbool.h>

#include "agentbox/agentbox.h"
#include "util/error.h"

/* What a long option of run/serve (named without the dashes) takes. */
enum ab_option_kind {
	AB_OPTION_UNKNOWN,
	AB_OPTION_FLAG,	 /* no value */
	AB_OPTION_VALUE, /* one value; given again, the last one wins */
	AB_OPTION_LIST,	 /* repeatable: each value adds to a list */
};
enum ab_option_kind ab_option_kind(const char *name);

/* Apply one option exactly as the command line does: name without the
 * dashes, value NULL for a flag. Errors read as on the command line
 * ("--memory: '12Q' is not a size ..."). --help and --profile are refused. */
int ab_option_apply(struct ab_config *cfg, const char *name, const char *value,
		    struct ab_error *err);

/* The command line's first pass (--profile is applied before every other
 * option, wherever it stands, so that the command line overrides it):
 * *profile is --profile's value, or NULL when there is none or --help was
 * asked for (*help), which needs no profile (nor defaults file). Only --profile given twice is an
 * error here: the second pass reports what is wrong with the rest. */
/* The long options of agentbox run (serve false) or of a session (serve,
 * mcp, runtime, create), as the parser takes them, for shell completion:
 * names (without "--") and whether each takes a value; how many. */
size_t ab_option_list(bool serve, const char **names, bool *values, size_t max);

int ab_options_find_profile(int argc, char **argv, const char **profile, bool *help,
			    struct ab_error *err);

/* The second pass: every option but --profile, applied over what the
 * profile set, and the command (none for serve). */
int ab_options_parse(struct ab_config *cfg, int argc, char **argv, bool serve, bool *help,
		     struct ab_error *err);

#endif
