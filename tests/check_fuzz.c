/* check_fuzz.c -- replay the fuzz corpora of the master's and common/'s
 * parsers (fuzz/corpus/<target>/ and the past crashers in
 * fuzz/regress/<target>/) through the same target functions libFuzzer
 * runs, so `make test` keeps every crash fixed without clang.  The
 * volume's targets replay in check_volume_fuzz.c. */
#include <check.h>
#include <stdlib.h>

#include "harness.h"
#include "../fuzz/targets_master.c"

struct target {
	const char *name;
	void (*fn)(const uint8_t *, size_t);
};

static const struct target targets[] = {
	{"key", fuzz_key},
	{"record", fuzz_record},
	{"query", fuzz_query},
	{"sig", fuzz_sig},
	{"vresp", fuzz_vresp},
};

#include "../fuzz/replay.c"

static Suite *fuzz_suite(void)
{
	Suite *s = suite_create("fuzz replay (master, common)");
	TCase *tc = tcase_create("corpus");
	tcase_add_loop_test(tc, test_corpus, 0, (int)(sizeof(targets) / sizeof(targets[0])));
	suite_add_tcase(s, tc);
	tc = tcase_create("regress");
	tcase_add_loop_test(tc, test_regress, 0, (int)(sizeof(targets) / sizeof(targets[0])));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(fuzz_suite());
	int failed;
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
