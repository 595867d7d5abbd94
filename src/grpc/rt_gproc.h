/* agentbox runtime's gRPC server (rt_gproc.c, rt_grpc.c): sandboxd's
 * process.v1.ProcessService on --grpc-port, one of the runtime's
 * protocols (ab_runtime, runtime/rt_server.h); with no --grpc-port it
 * opens nothing. */
#ifndef AB_RT_GPROC_H
#define AB_RT_GPROC_H

#include "runtime/rt_server.h"

extern const struct rt_proto rt_grpc_proto;

#endif
