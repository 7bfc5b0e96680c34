/* check_volume_wire.c -- mkv-volume's send-path tuning (volume/wire.c):
 * what it changes under the libmicrohttpd it was measured against, and
 * that under any other version it changes nothing.  Each test runs in a
 * process of its own (check's fork mode), so each starts untuned. */
#include "../volume/wire.h"

#include <check.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>

#define SOCK 5
#define FILE_FD 6
#define MHD_CHUNK (128 * 1024)

START_TEST(test_tuned)
{
	off_t off = 0;
	int on = 1;
	wire_init(1024, WIRE_MHD_VERSION);
	wire_reset(SOCK);
	wire_file_body(SOCK, FILE_FD, 4u << 20);
	/* the header waits for the body, and its lone push is skipped */
	ck_assert_int_eq(wire_send_flags(SOCK, 0), MSG_MORE);
	ck_assert_int_eq(wire_setsockopt(SOCK, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)),
			 WIRE_SKIP);
	/* 128 KiB sendfiles widen to 1 MiB */
	ck_assert_uint_eq(wire_sendfile_count(SOCK, FILE_FD, &off, MHD_CHUNK), 1u << 20);
	/* ... never to the body's last byte */
	off = (4 << 20) - 1000;
	ck_assert_uint_eq(wire_sendfile_count(SOCK, FILE_FD, &off, MHD_CHUNK), MHD_CHUNK);
	/* the push after the body uncorks too */
	ck_assert_int_eq(wire_setsockopt(SOCK, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)),
			 WIRE_UNCORK_TOO);
}
END_TEST

START_TEST(test_other_version_untouched)
{
	off_t off = 0;
	int on = 1;
	wire_init(1024, "0.9.77");
	wire_reset(SOCK);
	wire_file_body(SOCK, FILE_FD, 4u << 20);
	ck_assert_int_eq(wire_send_flags(SOCK, 0), 0);
	ck_assert_int_eq(wire_setsockopt(SOCK, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)),
			 WIRE_PASS);
	ck_assert_uint_eq(wire_sendfile_count(SOCK, FILE_FD, &off, MHD_CHUNK), MHD_CHUNK);
	ck_assert_int_eq(wire_setsockopt(SOCK, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on)),
			 WIRE_PASS);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("volume_wire");
	TCase *tc = tcase_create("wire");
	SRunner *sr;
	int failed;
	tcase_add_test(tc, test_tuned);
	tcase_add_test(tc, test_other_version_untouched);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);   /* fresh statics per test */
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
