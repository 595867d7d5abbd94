/* libmicrohttpd for agentbox runtime, loaded with dlopen when the server
 * starts (rt_libs.c): linked, it and the TLS libraries it needs would be
 * loaded by every `agentbox run` (src/cgroup/systemd_scope.c does the same
 * for libsystemd). Files that include this header call MHD_* through the
 * table. */
#ifndef AB_RT_MHD_H
#define AB_RT_MHD_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

#define RT_MHD_SONAME "libmicrohttpd.so.12"

#define RT_MHD_FUNCS(X)                                                                            \
	X(MHD_add_response_header)                                                                 \
	X(MHD_create_post_processor)                                                               \
	X(MHD_create_response_from_buffer)                                                         \
	X(MHD_create_response_from_callback)                                                       \
	X(MHD_destroy_post_processor)                                                              \
	X(MHD_destroy_response)                                                                    \
	X(MHD_get_connection_info)                                                                 \
	X(MHD_get_daemon_info)                                                                     \
	X(MHD_get_timeout)                                                                         \
	X(MHD_lookup_connection_value)                                                             \
	X(MHD_post_process)                                                                        \
	X(MHD_queue_response)                                                                      \
	X(MHD_quiesce_daemon)                                                                      \
	X(MHD_resume_connection)                                                                   \
	X(MHD_run)                                                                                 \
	X(MHD_start_daemon)                                                                        \
	X(MHD_stop_daemon)                                                                         \
	X(MHD_suspend_connection)

struct rt_mhd {
#define RT_MHD_FIELD(f) __typeof__(f) *f;
	RT_MHD_FUNCS(RT_MHD_FIELD)
#undef RT_MHD_FIELD
};
extern struct rt_mhd rt_mhd;

/* Load the library once; false with why filled when it cannot be. */
bool rt_mhd_load(char *why, size_t len);

#ifndef RT_MHD_LOADER
#define MHD_add_response_header		  (*rt_mhd.MHD_add_response_header)
#define MHD_create_post_processor	  (*rt_mhd.MHD_create_post_processor)
#define MHD_create_response_from_buffer	  (*rt_mhd.MHD_create_response_from_buffer)
#define MHD_create_response_from_callback (*rt_mhd.MHD_create_response_from_callback)
#define MHD_destroy_post_processor	  (*rt_mhd.MHD_destroy_post_processor)
#define MHD_destroy_response		  (*rt_mhd.MHD_destroy_response)
#define MHD_get_connection_info		  (*rt_mhd.MHD_get_connection_info)
#define MHD_get_daemon_info		  (*rt_mhd.MHD_get_daemon_info)
#define MHD_get_timeout			  (*rt_mhd.MHD_get_timeout)
#define MHD_lookup_connection_value	  (*rt_mhd.MHD_lookup_connection_value)
#define MHD_post_process		  (*rt_mhd.MHD_post_process)
#define MHD_queue_response		  (*rt_mhd.MHD_queue_response)
#define MHD_quiesce_daemon		  (*rt_mhd.MHD_quiesce_daemon)
#define MHD_resume_connection		  (*rt_mhd.MHD_resume_connection)
#define MHD_run				  (*rt_mhd.MHD_run)
#define MHD_start_daemon		  (*rt_mhd.MHD_start_daemon)
#define MHD_stop_daemon			  (*rt_mhd.MHD_stop_daemon)
#define MHD_suspend_connection		  (*rt_mhd.MHD_suspend_connection)
#endif

#endif
