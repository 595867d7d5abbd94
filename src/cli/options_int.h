/* The value helpers of the run/serve options (options_value.c), shared
 * by options.c only. */
#ifndef AB_OPTIONS_INT_H
#define AB_OPTIONS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"

#define DEFAULT_HOSTNAME "agentbox"
#define DEFAULT_HOME	 "/home/agent"

#define MAX_MAX_OUTPUT (256ULL << 20)

int parse_rlimit(struct ab_config *cfg, const char *arg, struct ab_error *err);
int parse_duration_option(const char *opt, const char *value, unsigned long long *out,
			  struct ab_error *err);
int parse_size_option(const char *opt, const char *value, unsigned long long min,
		      unsigned long long max, unsigned long long *out, struct ab_error *err);
int set_string(char **field, const char *value);
int parse_view_path(const char *opt, const char *value, char **out, struct ab_error *err);
/* parse_view_path into *field, in place of what it held */
int set_view_path(const char *opt, const char *value, char **field, struct ab_error *err);
int add_mount(struct ab_config *cfg, enum ab_mount_kind kind, const char *opt, const char *value,
	      struct ab_error *err);
bool in_strv(char *const *v, size_t n, const char *s);
int parse_protect_path(struct ab_config *cfg, const char *opt, const char *value, bool add,
		       struct ab_error *err);
int parse_protect_created(struct ab_config *cfg, const char *value, struct ab_error *err);
bool valid_hostname(const char *s);
bool valid_env_name(const char *s, size_t n);

#endif
