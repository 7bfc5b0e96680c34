/* check_volume_fuzz.c -- replay the fuzz corpora of mkv-volume's request
 * parsing (Range, path cleaning) and their past crashers through the same
 * target functions libFuzzer runs (see check_fuzz.c, fuzz/fuzz.mk). */
#include <check.h>
#include <stdlib.h>

#include "harness.h"
#include "../fuzz/targets_volume.c"

struct target {
	const char *name;
	void (*fn)(const uint8_t *, size_t);
};

static const struct target targets[] = {
	{"range", fuzz_range},
	{"path", fuzz_path},
};

#include "../fuzz/replay.c"

static Suite *volume_fuzz_suite(void)
{
	Suite *s = suite_create("fuzz replay (volume)");
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
	SRunner *sr = srunner_create(volume_fuzz_suite());
	int failed;
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
