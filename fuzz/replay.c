/* replay.c -- included by tests/check_fuzz.c and tests/check_volume_fuzz.c
 * after they define `targets[]` (name + target function): runs every file
 * of fuzz/corpus/<name>/ and fuzz/regress/<name>/ (under $MKV_ROOT)
 * through the target.  A broken property aborts; the SIGABRT handler
 * names the input first, so the failure says which file to look at. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char replay_current[4096];

static void replay_on_abort(int sig)
{
	static const char m[] = "fuzz replay: failing input: ";
	(void)sig;
	if (write(2, m, sizeof(m) - 1) < 0 ||
	    write(2, replay_current, strlen(replay_current)) < 0 || write(2, "\n", 1) < 0)
		_exit(134);
	signal(SIGABRT, SIG_DFL);
	raise(SIGABRT);
}

/* Replays every file of dir; returns how many.  A directory that is not
 * there replays nothing; one that cannot be read fails the test. */
static int replay_dir(const char *rel, void (*fn)(const uint8_t *, size_t))
{
	char *dir = h_root(rel);
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;
	ck_assert_msg(d || errno == ENOENT, "cannot read %s: %s", dir, strerror(errno));
	signal(SIGABRT, replay_on_abort);
	while (d && (e = readdir(d))) {
		char *path = xasprintf("%s/%s", dir, e->d_name);
		struct stat st;
		FILE *f;
		uint8_t *data;
		if (e->d_name[0] == '.' || stat(path, &st) || !S_ISREG(st.st_mode)) {
			free(path);
			continue;
		}
		data = xmalloc((size_t)st.st_size + 1);
		f = fopen(path, "rb");
		ck_assert_msg(f && fread(data, 1, (size_t)st.st_size, f) == (size_t)st.st_size,
			      "cannot read %s", path);
		fclose(f);
		snprintf(replay_current, sizeof(replay_current), "%s", path);
		fn(data, (size_t)st.st_size);
		free(data);
		free(path);
		n++;
	}
	if (d)
		closedir(d);
	free(dir);
	return n;
}

START_TEST(test_corpus)
{
	char *rel = xasprintf("fuzz/corpus/%s", targets[_i].name);
	int n = replay_dir(rel, targets[_i].fn);
	/* An empty or missing corpus would pass silently: it must not. */
	ck_assert_msg(n > 0, "no inputs in %s (is MKV_ROOT the repository?)", rel);
	free(rel);
}
END_TEST

START_TEST(test_regress)
{
	char *rel = xasprintf("fuzz/regress/%s", targets[_i].name);
	replay_dir(rel, targets[_i].fn);   /* none yet, for most targets */
	free(rel);
}
END_TEST
