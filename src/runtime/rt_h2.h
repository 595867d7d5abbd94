/* libnghttp2 for agentbox runtime's gRPC server (grpc/), loaded with
 * dlopen when --grpc-port is given (rt_libs.c), as libmicrohttpd is
 * (rt_mhd.h): linked, every `agentbox run` would load it. Files that
 * include this header call nghttp2_* through the table. */
#ifndef AB_RT_H2_H
#define AB_RT_H2_H

#include <nghttp2/nghttp2.h>
#include <stdbool.h>
#include <stddef.h>

#define RT_H2_SONAME "libnghttp2.so.14"

#define RT_H2_FUNCS(X)                                                                             \
	X(nghttp2_session_callbacks_new)                                                           \
	X(nghttp2_session_callbacks_del)                                                           \
	X(nghttp2_session_callbacks_set_send_callback)                                             \
	X(nghttp2_session_callbacks_set_on_frame_recv_callback)                                    \
	X(nghttp2_session_callbacks_set_on_data_chunk_recv_callback)                               \
	X(nghttp2_session_callbacks_set_on_stream_close_callback)                                  \
	X(nghttp2_session_callbacks_set_on_header_callback)                                        \
	X(nghttp2_session_callbacks_set_on_begin_headers_callback)                                 \
	X(nghttp2_session_server_new)                                                              \
	X(nghttp2_session_del)                                                                     \
	X(nghttp2_submit_settings)                                                                 \
	X(nghttp2_session_mem_recv)                                                                \
	X(nghttp2_session_send)                                                                    \
	X(nghttp2_session_want_read)                                                               \
	X(nghttp2_session_want_write)                                                              \
	X(nghttp2_submit_response)                                                                 \
	X(nghttp2_submit_trailer)                                                                  \
	X(nghttp2_submit_rst_stream)                                                               \
	X(nghttp2_session_resume_data)                                                             \
	X(nghttp2_session_get_stream_user_data)                                                    \
	X(nghttp2_session_set_stream_user_data)                                                    \
	X(nghttp2_session_terminate_session)

struct rt_h2 {
#define RT_H2_FIELD(f) __typeof__(f) *f;
	RT_H2_FUNCS(RT_H2_FIELD)
#undef RT_H2_FIELD
};
extern struct rt_h2 rt_h2;

/* Load the library (once); false with why when it cannot be. */
bool rt_h2_load(char *why, size_t len);

#ifndef RT_H2_LOADER
#define RT_H2_CALL(f)		      (rt_h2.f)
#define nghttp2_session_callbacks_new RT_H2_CALL(nghttp2_session_callbacks_new)
#define nghttp2_session_callbacks_del RT_H2_CALL(nghttp2_session_callbacks_del)
#define nghttp2_session_callbacks_set_send_callback                                                \
	RT_H2_CALL(nghttp2_session_callbacks_set_send_callback)
#define nghttp2_session_callbacks_set_on_frame_recv_callback                                       \
	RT_H2_CALL(nghttp2_session_callbacks_set_on_frame_recv_callback)
#define nghttp2_session_callbacks_set_on_data_chunk_recv_callback                                  \
	RT_H2_CALL(nghttp2_session_callbacks_set_on_data_chunk_recv_callback)
#define nghttp2_session_callbacks_set_on_stream_close_callback                                     \
	RT_H2_CALL(nghttp2_session_callbacks_set_on_stream_close_callback)
#define nghttp2_session_callbacks_set_on_header_callback                                           \
	RT_H2_CALL(nghttp2_session_callbacks_set_on_header_callback)
#define nghttp2_session_callbacks_set_on_begin_headers_callback                                    \
	RT_H2_CALL(nghttp2_session_callbacks_set_on_begin_headers_callback)
#define nghttp2_session_server_new	     RT_H2_CALL(nghttp2_session_server_new)
#define nghttp2_session_del		     RT_H2_CALL(nghttp2_session_del)
#define nghttp2_submit_settings		     RT_H2_CALL(nghttp2_submit_settings)
#define nghttp2_session_mem_recv	     RT_H2_CALL(nghttp2_session_mem_recv)
#define nghttp2_session_send		     RT_H2_CALL(nghttp2_session_send)
#define nghttp2_session_want_read	     RT_H2_CALL(nghttp2_session_want_read)
#define nghttp2_session_want_write	     RT_H2_CALL(nghttp2_session_want_write)
#define nghttp2_submit_response		     RT_H2_CALL(nghttp2_submit_response)
#define nghttp2_submit_trailer		     RT_H2_CALL(nghttp2_submit_trailer)
#define nghttp2_submit_rst_stream	     RT_H2_CALL(nghttp2_submit_rst_stream)
#define nghttp2_session_resume_data	     RT_H2_CALL(nghttp2_session_resume_data)
#define nghttp2_session_get_stream_user_data RT_H2_CALL(nghttp2_session_get_stream_user_data)
#define nghttp2_session_set_stream_user_data RT_H2_CALL(nghttp2_session_set_stream_user_data)
#define nghttp2_session_terminate_session    RT_H2_CALL(nghttp2_session_terminate_session)
#endif

#endif
