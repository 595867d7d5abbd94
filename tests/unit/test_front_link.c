/* What the network front sends the session's process (front_link_check):
 * hostile lines refused, each with a reason; good ones taken apart. */
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#include "front/front_link.h"

static int check(const char *line)
{
	struct front_link_msg m;
	struct ab_error e = {0};
	int rc = front_link_check(line, strlen(line), &m, &e);
	if (rc == 0)
		front_link_msg_clear(&m);
	else
		cr_assert(e.msg[0], "no reason for %s", line);
	return rc;
}

Test(front_link, hostile_lines_are_refused)
{
	const char *bad[] = {
		"",
		"[]",
		"{\"op\":\"exec\",\"tag\":1,\"req\":{}} trailing",
		"{\"op\":\"nope\"}",
		"{\"op\":\"exec\",\"tag\":0,\"req\":{}}",
		"{\"op\":\"exec\",\"tag\":-4,\"req\":{}}",
		"{\"op\":\"exec\",\"tag\":9007199254740993,\"req\":{}}",
		"{\"op\":\"exec\",\"tag\":\"1\",\"req\":{}}",
		"{\"op\":\"exec\",\"tag\":1,\"req\":[]}",
		"{\"op\":\"exec\",\"tag\":1,\"req\":{},\"host\":\"/etc/shadow\"}",
		"{\"op\":\"stdin\",\"seq\":1,\"tag\":1,\"data\":\"!!\",\"eof\":false}",
		"{\"op\":\"stdin\",\"seq\":1,\"tag\":1,\"data\":\"aGk=\",\"eof\":1}",
		"{\"op\":\"signal\",\"seq\":1,\"tag\":1,\"signo\":19}",
		"{\"op\":\"resize\",\"seq\":1,\"tag\":1,\"rows\":0,\"cols\":80}",
		"{\"op\":\"resize\",\"seq\":1,\"tag\":1,\"rows\":70000,\"cols\":80}",
		"{\"op\":\"pause\",\"on\":\"yes\"}",
		"{\"op\":\"discard\"}",
		"{\"op\":\"cancel\",\"tag\":1.5}",
		"[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]"
		"]]"
		"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_lt(check(bad[i]), 0, "taken: %s", bad[i]);
	cr_expect_eq(check("{\"op\":\"exec\",\"tag\":1,\"req\":{}}\0x"), 0); /* strlen stops */
	char nul[] = "{\"op\":\"cancel\",\"tag\":1}";
	struct front_link_msg m;
	struct ab_error e = {0};
	nul[5] = '\0';
	cr_expect_lt(front_link_check(nul, sizeof(nul) - 1, &m, &e), 0);
}

Test(front_link, good_lines_are_taken_apart)
{
	struct front_link_msg m;
	struct ab_error e = {0};
	const char *s = "{\"op\":\"stdin\",\"seq\":7,\"tag\":3,\"data\":\"aGk=\",\"eof\":true}";
	cr_assert_eq(front_link_check(s, strlen(s), &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.op, LINK_STDIN);
	cr_expect_eq(m.seq, 7);
	cr_expect_eq(m.tag, 3);
	cr_expect_eq(m.data_len, 2);
	cr_expect(m.eof);
	front_link_msg_clear(&m);
	s = "{\"op\":\"signal\",\"seq\":1,\"tag\":2,\"signo\":9}";
	cr_assert_eq(front_link_check(s, strlen(s), &m, &e), 0, "%s", e.msg);
	cr_expect_eq(m.signo, SIGKILL);
	front_link_msg_clear(&m);
	cr_expect_eq(check("{\"op\":\"file\",\"tag\":5,\"req\":{\"op\":\"resolve_path\"}}"), 0);
	cr_expect_eq(check("{\"op\":\"resize\",\"seq\":2,\"tag\":2,\"rows\":24,\"cols\":80}"), 0);
	cr_expect_eq(check("{\"op\":\"end\"}"), 0);
	cr_expect_lt(check("{\"op\":\"end\",\"tag\":1}"), 0);
}
