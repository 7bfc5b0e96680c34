/* check_flags.c -- the table-driven command line (common/flags.c): Go's
 * flag syntax, bounds, and exit 2 with a reason on anything else.  Each
 * test runs in a process of its own (fork mode): errors exit. */
#include "../common/flags.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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
	{"switch", FLAG_BOOL, &on, 0, 0, NULL, NULL},     /* an alias: not in -h */
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
	/* numbers strtoull would take: a sign, blanks, past 2^64 - 1 */
	{"-size", "+1", NULL},   {"-size", " 1", NULL}, {"-size", "18446744073709551616", NULL},
	{"-size", "", NULL},     {"-size", "1 ", NULL},
	/* durations Go's time.ParseDuration refuses, and more than a year */
	{"-t", "nan", NULL},     {"-t", "inf", NULL}, {"-t", "1e3ms", NULL}, {"-t", " 1s", NULL},
	{"-t", "1s ", NULL},     {"-t", "-1s", NULL}, {"-t", "1d", NULL},    {"-t", ".s", NULL},
	{"-t", "s", NULL},       {"-t", "1s2", NULL}, {"-t", "0x10s", NULL}, {"-t", "8761h", NULL},
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

/* Durations as Go's time.ParseDuration reads them (a bare number is
 * seconds), in milliseconds. */
static const struct {
	const char *arg;
	uint64_t ms;
} durations[] = {
	{"1s", 1000},      {"500ms", 500},     {"2m", 120000},     {"1h", 3600000},
	{"1h30m", 5400000}, {"1m30.5s", 90500}, {"1.5s", 1500},    {".5s", 500},
	{"2000us", 2},     {"3000000ns", 3},   {"1500\xc2\xb5s", 1}, {"+1s", 1000},    {"100us", 1},
	{"0.001s", 1},     {"3", 3000},        {"8760h", 31536000000},
};

START_TEST(test_duration)
{
	const char *argv[] = {"t", "-t", durations[_i].arg, NULL};
	char *pos[3];
	ck_assert_int_eq(parse(3, argv, pos), 0);
	ck_assert_uint_eq(ms, durations[_i].ms);
}
END_TEST

/* "--" ends the flags, as in Go: what follows is positional, dashes and all. */
START_TEST(test_dashdash)
{
	const char *argv[] = {"t", "-on", "--", "-n", "--", NULL};
	char *pos[3];
	ck_assert_int_eq(parse(5, argv, pos), 2);
	ck_assert(on);
	ck_assert_int_eq(n, 7);
	ck_assert_str_eq(pos[0], "-n");
	ck_assert_str_eq(pos[1], "--");
}
END_TEST

/* -h, -help, --help: the head, then one line per flag that has a help
 * text (an alias has none) and -version's, to stdout, and exit 0 -- whatever comes
 * after it.  What a -h that printed nothing, or exited otherwise, fails. */
static const char *const helps[] = {"-h", "-help", "--help", "--h"};

START_TEST(test_help)
{
	static const char want[] =
		"usage: t\n"
		"  -on                 a switch\n"
		"  -md5sum             a switch that is on\n"
		"  -n N                a number\n"
		"  -t D                a duration\n"
		"  -rate MB/s          a rate\n"
		"  -size BYTES         a size\n"
		"  -name S             a string\n"
		"  -version            print the version and the commit built from, and exit\n";
	char path[] = "/tmp/check_flags.XXXXXX", got[1024];
	int fd = mkstemp(path), st;
	ssize_t n;
	pid_t pid;
	ck_assert_int_ge(fd, 0);
	unlink(path);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		const char *argv[] = {"t", "-on", helps[_i], "-nosuch", NULL};
		char *pos[3];
		dup2(fd, 1);
		parse(4, argv, pos);
		_exit(99);             /* parse returned: -h did not exit */
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: status %d", helps[_i], st);
	n = pread(fd, got, sizeof(got) - 1, 0);
	ck_assert_int_ge(n, 0);
	got[n] = '\0';
	ck_assert_str_eq(got, want);
	close(fd);
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
	tcase_add_loop_test(tc, test_duration, 0, (int)(sizeof(durations) / sizeof(durations[0])));
	tcase_add_test(tc, test_dashdash);
	tcase_add_loop_test(tc, test_help, 0, (int)(sizeof(helps) / sizeof(helps[0])));
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_set_fork_status(sr, CK_FORK);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
