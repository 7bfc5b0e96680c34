/* check_mkvread.c -- tools/mkvread.py, the training jobs' reader, against
 * a real cluster (tests/mkvread_test.py says what it checks): 3 volumes
 * with a volume secret, a master with -linkttl 2s, -maxlinkttl 1h and
 * -replicas 2, and a second master on the same volumes with -keys
 * (MKV_KEYS_MASTER, the keys of KEYS); once on mkv-volumes, once on nginx
 * volumes.  The script SIGKILLs the first volume in its last test. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/util.h"
#include "harness.h"

/* tests/mkvread_test.py has the same */
#define KEYS                                                               \
	"writer  6d6b7672656164776b657930303031 read,list,write,delete /ks/\n" \
	"trainer 6d6b7672656164746b657930303032 read,list /ks/\n"              \
	"lister  6d6b767265616c6c6b657930303033 list /ks/\n"

START_TEST(test_reader)
{
	enum vol_kind kind = _i ? VOL_NGINX : VOL_MKV;
	char *dir = h_tmpdir(), *sec = xasprintf("%s/secret", dir), *log = xasprintf("%s/py.log", dir);
	char *work = xasprintf("%s/work", dir), *script = h_root("tests/mkvread_test.py");
	char *keys = xasprintf("%s/keys", dir);
	char pids[3][16];
	const char *flags[] = {"-volumesecret", sec, "-linkttl", "2s", "-maxlinkttl", "1h",
			       "-replicas", "2", NULL};
	struct vol v[3] = {0};
	const char *kflags[] = {"-volumesecret", sec, "-keys", keys, "-replicas", "2", NULL};
	struct master m = {0}, km = {0};
	FILE *f = fopen(sec, "w");
	pid_t pid;
	int st;

	ck_assert_ptr_nonnull(f);
	fputs("mkvread-test-secret-0123456789\n", f);
	ck_assert_int_eq(fclose(f), 0);
	ck_assert_ptr_nonnull(f = fopen(keys, "w"));
	fputs(KEYS, f);
	ck_assert_int_eq(fclose(f), 0);
	chmod(keys, 0600);
	for (int i = 0; i < 3; i++) {
		h_vol_start_secret(&v[i], kind, sec);
		snprintf(pids[i], sizeof(pids[i]), "%d", (int)v[i].pid);
	}
	h_master_start(&m, v, 3, flags);
	h_master_start(&km, v, 3, kflags);
	setenv("MKV_KEYS_MASTER", km.base, 1);
	{
		char *argv[] = {"/usr/bin/python3", script, m.base, work, pids[0], pids[1], pids[2],
				NULL};
		pid = h_spawn(argv, log);
	}
	waitpid(pid, &st, 0);
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		char *out = h_read_file(log);
		size_t n = strlen(out);
		ck_abort_msg("mkvread_test.py failed (%s volumes):\n%s", _i ? "nginx" : "mkv",
			     out + (n > 3000 ? n - 3000 : 0));
	}
	/* the first volume, killed by the script: reaped here */
	ck_assert_int_eq(waitpid(v[0].pid, &st, 0), v[0].pid);
	ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
	v[0].pid = 0;
	h_master_stop(&m);
	h_master_stop(&km);
	for (int i = 0; i < 3; i++)
		h_vol_stop(&v[i]);
	h_rmrf(dir);
	free(dir), free(sec), free(log), free(work), free(script), free(keys);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mkvread");
	TCase *tc = tcase_create("reader");
	SRunner *sr;
	int failed;
	tcase_add_loop_test(tc, test_reader, 0, 2);
	tcase_set_timeout(tc, 300);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
