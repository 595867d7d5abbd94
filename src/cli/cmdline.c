/* The command lines of agentbox run and serve: the defaults files first
 * (defaults.c), then --profile (profile.c yields its keys as options), then
 * every other option over them (options.c). The one place that calls them
 * all, so none calls another back. */
#include <stdbool.h>

#include "agentbox/agentbox.h"
#include "cli/defaults.h"
#include "cli/options.h"
#include "cli/profile.h"

static int parse_command_line(struct ab_config *cfg, int argc, char **argv, bool serve, bool *help,
			      struct ab_error *err)
{
	const char *profile = NULL;
	bool help_asked = false;
	*help = false;
	int r = ab_options_find_profile(argc, argv, &profile, &help_asked, err);
	if (r == 0 && !help_asked)
		r = ab_defaults_load(cfg, err);
	if (r == 0 && profile)
		r = ab_profile_load(cfg, profile, err);
	if (r < 0)
		return r;
	return ab_options_parse(cfg, argc, argv, serve, help, err);
}

int ab_config_parse_run(struct ab_config *cfg, int argc, char **argv, bool *help,
			struct ab_error *err)
{
	return parse_command_line(cfg, argc, argv, false, help, err);
}

int ab_config_parse_serve(struct ab_config *cfg, int argc, char **argv, bool *help,
			  struct ab_error *err)
{
	return parse_command_line(cfg, argc, argv, true, help, err);
}
