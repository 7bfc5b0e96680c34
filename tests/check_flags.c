/* check_flags.c -- the table-driven command line (common/flags.c): Go's
 * flag syntax, bounds, and exit 2 with a reason on anything else.  Each
 * test runs in a process of its own (fork mode): errors exit. */
#include "../common/flags.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static bool on, md5 = true;
static int n = 7;
static uint64_t ms = 1000, rate, size;
static const char *name;

static const struct flag table[] = {
	{"on", FLAG_BOOL, &on, 0, 0, NULL, "a switch"},
	{"md5sum", FLAG_BOOL, &md5, 0, 0, NULL, "a switch that is on"},
	{"n", FLAG_INT, &n, 1, 10, "N", "a number"},
	{"t", FLAG_DURATION, &ms, 1, 0, "D", "a duration"},
	{"rate", FLAG_MBPS, &rate, 0, 0, "MB/s", "a rate"},
	{"size", FLAG_U64, &size, 0, UINT64_MAX, "BYTES", "a size"},
	{"name", FLAG_STR, &name, 0, 0, "S", "a string"},
	{NULL, 0, NULL, 0, 0, NULL, NULL},
};

/* A writable argv, as a program gets ("-a=b" is split in place). */
static int parse(int argc, const char **argv, char **pos)
{
	char **a = calloc((size_t)argc + 1, sizeof(*a));
	for (int i = 0; i < argc; i++)
		a[i] = strdup(argv[i]);
	return flags_parse(table, argc, a, "t", "usage: t\n", pos, 3, 2);
}

START_TEST(test_good)
{
	const char *argv[] = {"t", "-on", "--md5sum=false", "-n", "10", "-t=500ms", "-rate",
			      "2.5", "--size", "18446744073709551615", "-name=", "cmd", "-n", "3",
			      "op", "-x", NULL};
	char *pos[3];
	ck_assert_int_eq(parse(16, argv, pos), 3);
	ck_assert(on && !md5);
	ck_assert_int_eq(n, 3);
	ck_assert_uint_eq(ms, 500);
	ck_assert_uint_eq(rate, 2500000);
	ck_assert_uint_eq(size, UINT64_MAX);
	ck_assert_str_eq(name, "");
	ck_assert_str_eq(pos[0], "cmd");
	ck_assert_str_eq(pos[1], "op");
	ck_assert_str_eq(pos[2], "-x");          /* after two positionals, no flags */
}
END_TEST

static const char *const bad[][3] = {
	{"-nosuch", NULL, NULL}, {"-n", "0", NULL}, {"-n", "11", NULL}, {"-n", "1x", NULL},
	{"-n", NULL, NULL},      {"-on=maybe", NULL, NULL}, {"-t", "0", NULL},
	{"-t", "soon", NULL},    {"-rate", "0", NULL}, {"-rate", "-1", NULL},
	{"-size", "-1", NULL},   {"a", "b", "c"},
};

START_TEST(test_bad)
{
	const char *argv[5] = {"t"};
	char *pos[3];
	int argc = 1;
	for (int i = 0; i < 3 && bad[_i][i]; i++)
		argv[argc++] = bad[_i][i];
	if (argc == 4)           /* three positionals where two fit, then a flag */
		argv[argc++] = "-on";
	parse(argc, argv, pos);
	if (argc == 5)
		exit(0);             /* "a b c -on": c and -on are operands, too many */
}
END_TEST

START_TEST(test_help)
{
	const char *argv[] = {"t", "-h", NULL};
	char *pos[3];
	parse(2, argv, pos);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("flags");
	TCase *tc = tcase_create("flags");
	SRunner *sr;
	int failed;
	tcase_add_test(tc, test_good);
	tcase_add_loop_exit_test(tc, test_bad, 2, 0, (int)(sizeof(bad) / sizeof(bad[0])));
	tcase_add_exit_test(tc, test_help, 0);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
