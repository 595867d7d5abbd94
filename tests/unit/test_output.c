/* The capture buffer (head + tail within a cap), UTF-8 repair. */
#include <criterion/criterion.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/output.h"

static char *contents(struct ab_capture *c, size_t *len)
{
	struct ab_output o;
	cr_assert_eq(capture_take(c, &o), 0);
	cr_assert_not_null(o.data);
	*len = o.len;
	return o.data;
}

Test(capture, small_output_is_kept_whole)
{
	struct ab_capture c;
	capture_init(&c, 16);
	capture_append(&c, "hello ", 6);
	capture_append(&c, "world", 5);
	size_t n;
	char *s = contents(&c, &n);
	cr_assert_str_eq(s, "hello world");
	cr_assert_eq(n, 11);
	cr_assert_not(capture_truncated(&c));
	cr_assert_eq(c.total, 11);
	free(s);
	capture_free(&c);
}

Test(capture, exactly_the_cap_is_not_truncated)
{
	struct ab_capture c;
	capture_init(&c, 8);
	capture_append(&c, "abcdefgh", 8);
	size_t n;
	char *s = contents(&c, &n);
	cr_assert_str_eq(s, "abcdefgh");
	cr_assert_not(capture_truncated(&c));
	free(s);
	capture_free(&c);
}

Test(capture, long_output_keeps_head_and_tail_with_exact_count)
{
	struct ab_capture c;
	capture_init(&c, 8);
	/* many small writes wrap the ring several times */
	const char *text = "0123456789abcdefghijklmnopqrstuvwxyz";
	for (const char *p = text; *p; p++)
		capture_append(&c, p, 1);
	size_t n;
	char *s = contents(&c, &n);
	cr_assert_str_eq(s, "0123\n[... 28 bytes truncated ...]\nwxyz");
	cr_assert(capture_truncated(&c));
	cr_assert_eq(c.total, 36);
	free(s);
	capture_free(&c);
}

Test(capture, a_ring_wrapped_mid_way_comes_out_oldest_first)
{
	struct ab_capture c;
	capture_init(&c, 8);
	capture_append(&c, "0123456789a", 11);
	size_t n;
	char *s = contents(&c, &n);
	cr_assert_str_eq(s, "0123\n[... 3 bytes truncated ...]\n789a");
	cr_assert_eq(n, strlen(s));
	free(s);
	capture_free(&c);
	/* a ring not yet full: its bytes in order, nothing dropped */
	capture_init(&c, 8);
	capture_append(&c, "012345", 6);
	s = contents(&c, &n);
	cr_assert_str_eq(s, "012345");
	free(s);
	capture_free(&c);
}

Test(capture, one_huge_write_keeps_its_own_tail)
{
	struct ab_capture c;
	capture_init(&c, 10);
	capture_append(&c, "AB", 2);
	capture_append(&c, "0123456789abcdefghij", 20);
	size_t n;
	char *s = contents(&c, &n);
	cr_assert_str_eq(s, "AB012\n[... 12 bytes truncated ...]\nfghij");
	free(s);
	capture_free(&c);
}

Test(capture, a_captured_silent_stream_is_empty_text_and_an_uncaptured_one_absent)
{
	struct ab_capture on, off = {0};
	capture_init(&on, 1 << 20);
	struct ab_output o;
	cr_assert_eq(capture_take(&on, &o), 0);
	cr_assert_not_null(o.data);
	cr_assert_str_eq(o.data, "");
	free(o.data);
	capture_append(&off, "x", 1);
	cr_assert_eq(capture_take(&off, &o), 0);
	cr_assert_null(o.data);
}

Test(capture, memory_grows_with_the_output_not_with_the_cap)
{
	struct ab_capture c;
	capture_init(&c, 1 << 20);
	capture_append(&c, "hello\n", 6);
	/* a command that prints a line must not cost a buffer of the cap */
	cr_assert_leq(c.cap, 4096);
	size_t n;
	char *s = contents(&c, &n);
	cr_assert_str_eq(s, "hello\n");
	cr_assert_leq(malloc_usable_size(s), 4096);
	free(s);
	capture_free(&c);
}

Test(capture, growing_buffer_keeps_head_and_tail_of_mixed_writes)
{
	/* writes of odd sizes cross every growth step, fill the head (512 KiB)
	 * and wrap the ring; the result must equal what a plain copy keeps */
	const size_t max = 1 << 20, total = 3 * max + 12345;
	char *all = malloc(total);
	for (size_t i = 0; i < total; i++)
		all[i] = (char)('a' + (i * 7 + i / 4099) % 26);
	struct ab_capture c;
	capture_init(&c, max);
	for (size_t off = 0, k = 1; off < total; k = k * 3 % 65521) {
		size_t len = k < total - off ? k : total - off;
		capture_append(&c, all + off, len);
		off += len;
	}
	cr_assert_eq(c.cap, max);
	size_t n;
	char *s = contents(&c, &n);
	char marker[64];
	snprintf(marker, sizeof(marker), "\n[... %zu bytes truncated ...]\n", total - max);
	size_t m = strlen(marker);
	cr_assert_eq(n, max + m);
	cr_assert_eq(memcmp(s, all, max / 2), 0);
	cr_assert_eq(memcmp(s + max / 2, marker, m), 0);
	cr_assert_eq(memcmp(s + max / 2 + m, all + total - max / 2, max / 2), 0);
	free(s);
	free(all);
	capture_free(&c);
}

Test(utf8, valid_text_is_unchanged_and_bad_bytes_replaced)
{
	size_t n;
	char *s = utf8_lossy("h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80", 15, &n);
	cr_assert_str_eq(s, "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9F\x98\x80");
	free(s);
	/* a stray continuation byte, a cut sequence, an overlong '/', a surrogate */
	const char bad[] = "a\x80"
			   "b\xE2\x82"
			   "c\xC0\xAF"
			   "d\xED\xA0\x80";
	s = utf8_lossy(bad, sizeof(bad) - 1, &n);
	cr_assert_str_eq(s, "a\xEF\xBF\xBD"
			    "b\xEF\xBF\xBD\xEF\xBF\xBD"
			    "c\xEF\xBF\xBD\xEF\xBF\xBD"
			    "d\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
	free(s);
	/* NUL bytes are data, kept (JSON escapes them) */
	s = utf8_lossy("a\0b", 3, &n);
	cr_assert_eq(n, 3);
	cr_assert_eq(memcmp(s, "a\0b", 3), 0);
	free(s);
}
