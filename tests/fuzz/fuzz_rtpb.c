/* The protobuf decoder of agentbox runtime's gRPC ProcessService
 * and FileWatcherService (src/grpc/rt_pb.c): any bytes, as any of the six requests (the first
 * byte picks which), are refused with a reason or decoded into strings
 * that lie within the message and hold no NUL, argv and env
 * NULL-terminated with their counts in bounds, each env entry NAME=VALUE;
 * a stdin input points inside the message. The encoders fit the room
 * pb_size_bytes says and refuse less. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "grpc/rt_pb.h"

static void check_req(const struct pb_req *q, const uint8_t *data, size_t size)
{
	FUZZ_CHECK(q->argc <= PB_MAX_ARGS && q->n_env <= PB_MAX_ENV);
	FUZZ_CHECK(!q->argc || q->argv[q->argc] == NULL);
	FUZZ_CHECK(!q->n_env || q->env[q->n_env] == NULL);
	for (size_t i = 0; i < q->argc; i++)
		FUZZ_CHECK(strlen(q->argv[i]) < size);
	for (size_t i = 0; i < q->n_env; i++) {
		const char *eq = strchr(q->env[i], '=');
		FUZZ_CHECK(eq && eq != q->env[i] && strlen(q->env[i]) < size);
	}
	FUZZ_CHECK(!q->cwd || strlen(q->cwd) < size);
	if (q->input)
		FUZZ_CHECK(q->input >= data && q->input + q->input_len <= data + size);
	FUZZ_CHECK(!(q->input && q->eof));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	enum pb_method m = (enum pb_method)(data[0] % PB_METHODS);
	/* a copy of exactly the message: a read past it is ASan's to see */
	uint8_t *msg = malloc(size - 1 ? size - 1 : 1);
	FUZZ_CHECK(msg);
	memcpy(msg, data + 1, size - 1);
	struct pb_req q;
	const char *why = NULL;
	int r = pb_decode(m, msg, size - 1, &q, &why);
	if (r < 0) {
		FUZZ_CHECK((r == -EINVAL || r == -E2BIG || r == -ENOMEM) && why && *why);
		FUZZ_CHECK(!q.argv && !q.env && !q.cwd && !q.path);
	} else {
		check_req(&q, msg, size - 1);
		pb_req_free(&q);
	}
	/* the encoders: the input as output, and as both Execute streams */
	size_t room = pb_size_bytes(size) * 2 + 11;
	uint8_t *out = malloc(room);
	FUZZ_CHECK(out);
	size_t n = pb_start_output(out, pb_size_bytes(size), data[0] & 1 ? 1 : 2, data, size);
	FUZZ_CHECK(n != PB_NO_ROOM && n <= pb_size_bytes(size));
	FUZZ_CHECK(pb_start_output(out, size, 1, data, size) == PB_NO_ROOM);
	n = pb_execute_response(out, room, (int32_t)size - 128, data, size, data, size / 2);
	FUZZ_CHECK(n != PB_NO_ROOM && n <= room);
	FUZZ_CHECK(pb_start_exit(out, 16, -1) != PB_NO_ROOM);
	/* a FileEvent of the input as a path (NUL-ended by the copy) */
	char *s = malloc(size + 1);
	FUZZ_CHECK(s);
	memcpy(s, data, size);
	s[size] = 0;
	free(out);
	room = pb_size_bytes(size) * 3 + 8;
	out = malloc(room);
	FUZZ_CHECK(out);
	FUZZ_CHECK(pb_file_event(out, room, PB_FE_RENAME, s, s, s) != PB_NO_ROOM);
	free(s);
	free(out);
	free(msg);
	return 0;
}
