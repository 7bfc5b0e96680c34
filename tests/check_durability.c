/* check_durability.c -- what a power cut would keep.  kill -9 keeps the
 * page cache, so a crash test proves nothing about the disk; instead each
 * server runs under `strace -f` and the order of its system calls is
 * checked against the promise (README, docs/protocol.md §4):
 *   mkv-volume: "201 means the bytes are on disk": the body written to a
 *     temporary file, fsync of that file, only then a name (linkat, or
 *     rename over an old file), the directories it created and the
 *     target's directory fsynced, and only then the answer on the socket.
 *   master PUT: the DELETED record written before any byte goes to a
 *     volume; every volume's 201 read before the live record is written;
 *     the index log synced after it and before the 201.
 *   master DELETE: the DELETED mark written and the log synced before any
 *     volume is sent its DELETE; every volume's 204 read before the record
 *     is deleted, and that before the 204.
 * strace must be installed (tools/deps.sh does): without it the suite
 * fails, it does not skip.  Under the sanitizer the traced servers run
 * without leak checks (LeakSanitizer cannot run under ptrace). */
#include <check.h>
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../common/placement.h"
#include "harness.h"

#define TRACED "trace=openat,write,pwrite64,writev,pwritev,pwritev2,fsync,fdatasync," \
	"sync_file_range,linkat,rename,renameat,renameat2,mkdir,mkdirat,close,unlinkat," \
	"sendto,sendmsg,sendfile,recvfrom,recvmsg"

/* ---- running a server under strace ---- */

struct traced {
	pid_t pid;         /* strace's, a process group leader */
	char *trace;       /* its output file */
};

static bool have_strace(void)
{
	const char *path = getenv("PATH");
	char *dirs = xstrdup(path && *path ? path : "/usr/bin:/bin"), *save = NULL;
	bool found = false;
	for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		char *p = xasprintf("%s/strace", d);
		found = access(p, X_OK) == 0;
		free(p);
	}
	free(dirs);
	return found;
}

/* strace -f ... argv, its output in trace, the server's in log.  As
 * h_spawn: a process group of its own, killed with the test. */
static void traced_start(struct traced *t, char *const argv[], const char *trace,
			 const char *log)
{
	const char *pre[] = {"strace", "-f", "-tt", "-yy", "-s", "4096", "-o", trace, "-e",
			     TRACED, NULL};
	char *args[64];
	int n = 0;
	ck_assert_msg(have_strace(), "strace is not installed (tools/deps.sh installs it): "
		      "this suite cannot check the write order without it");
	for (int i = 0; pre[i]; i++)
		args[n++] = (char *)pre[i];
	for (int i = 0; argv[i] && n < 63; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	t->trace = xstrdup(trace);
	t->pid = fork();
	ck_assert_int_ge(t->pid, 0);
	if (t->pid == 0) {
		const char *asan = getenv("MKV_CHILD_ASAN_OPTIONS");
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setpgid(0, 0);
		if (asan) {   /* LeakSanitizer does not work under ptrace */
			char *o = xasprintf("%s:detect_leaks=0", asan);
			setenv("ASAN_OPTIONS", o, 1);
		}
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			close(fd);
		}
		execvp(args[0], args);
		fprintf(stderr, "exec strace: %s\n", strerror(errno));
		_exit(127);
	}
}

/* The traced server: strace's child. */
static pid_t tracee_of(pid_t parent)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	pid_t found = 0;
	while (d && !found && (e = readdir(d))) {
		char *p = xasprintf("/proc/%s/stat", e->d_name), *s = h_read_file(p), *r;
		int ppid = 0;
		if ((r = strrchr(s, ')')) && sscanf(r + 1, " %*c %d", &ppid) == 1 && ppid == parent)
			found = (pid_t)atoi(e->d_name);
		free(p), free(s);
	}
	if (d)
		closedir(d);
	return found;
}

/* SIGTERM to the server; strace ends with it, its trace complete.
 * Asserts that the server exited 0. */
static void traced_stop(struct traced *t)
{
	pid_t child = tracee_of(t->pid);
	uint64_t end = now_ms() + 30000;
	int st = 0;
	ck_assert_msg(child > 0, "strace (pid %d) has no child", (int)t->pid);
	kill(child, SIGTERM);
	while (waitpid(t->pid, &st, WNOHANG) == 0) {
		if (now_ms() > end) {
			kill(-t->pid, SIGKILL);
			waitpid(t->pid, &st, 0);
			ck_abort_msg("the traced server did not stop in 30 s");
		}
		usleep(10000);
	}
	t->pid = 0;
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the traced server exited with "
		      "status %d", st);
}

/* ---- reading strace's output ---- */

/* One system call.  strace -f splits a call that another thread's calls
 * interrupt into "<unfinished ...>" and "<... name resumed>": they are
 * joined, start being the line it began on, end the line it returned on.
 * Line order is the order of events: a tracee stopped at a call's return
 * goes on only once strace has written that line. */
struct ev {
	int pid, start, end;
	char name[24];
	char *text;        /* "name(args) = ret" */
	long ret;
};

struct trace {
	struct ev *ev;
	int n;
	char *path;
};

static void ev_finish(struct ev *e)
{
	char *eq = strstr(e->text, ") = ");
	size_t n = strcspn(e->text, "(");
	snprintf(e->name, sizeof(e->name), "%.*s", (int)n, e->text);
	e->ret = -1;
	for (char *q = eq; q; q = strstr(q + 1, ") = "))   /* the last " = " */
		eq = q;
	if (eq)
		e->ret = strtol(eq + 4, NULL, 10);
}

static void trace_read(struct trace *t, const char *path)
{
	FILE *f = fopen(path, "r");
	struct { int pid, start; char *text; } pend[256];
	int npend = 0, cap = 0, line = 0;
	char *l = NULL;
	size_t lcap = 0;
	ck_assert_msg(f, "%s: %s", path, strerror(errno));
	memset(t, 0, sizeof(*t));
	t->path = xstrdup(path);
	while (getline(&l, &lcap, f) > 0) {
		char *s = l, *u;
		int pid = (int)strtol(s, &s, 10);
		struct ev e = {.pid = pid, .start = ++line, .end = line};
		l[strcspn(l, "\n")] = '\0';
		while (*s == ' ')
			s++;
		if (*s >= '0' && *s <= '9')        /* -tt's time of day */
			s += strcspn(s, " ");
		while (*s == ' ')
			s++;
		if (!strncmp(s, "+++", 3) || !strncmp(s, "---", 3))
			continue;
		if ((u = strstr(s, " <unfinished ...>"))) {
			ck_assert_int_lt(npend, 256);
			pend[npend].pid = pid;
			pend[npend].start = line;
			pend[npend++].text = xstrndup(s, (size_t)(u - s));
			continue;
		}
		if (!strncmp(s, "<... ", 5)) {
			char *r = strstr(s, " resumed>");
			int i = 0;
			while (i < npend && pend[i].pid != pid)
				i++;
			if (!r || i == npend)
				continue;          /* began before the trace did */
			e.start = pend[i].start;
			e.text = xasprintf("%s%s", pend[i].text, r + strlen(" resumed>"));
			free(pend[i].text);
			pend[i] = pend[--npend];
		} else {
			e.text = xstrdup(s);
		}
		ev_finish(&e);
		if (t->n == cap)
			t->ev = xrealloc(t->ev, (size_t)(cap = cap ? 2 * cap : 1024) * sizeof(*t->ev));
		t->ev[t->n++] = e;
	}
	while (npend > 0)
		free(pend[--npend].text);
	free(l);
	fclose(f);
}

static void trace_free(struct trace *t)
{
	for (int i = 0; i < t->n; i++)
		free(t->ev[i].text);
	free(t->ev);
	free(t->path);
}

/* The fd in s ("12</path>..."), its annotation (what -yy prints between
 * < and >) copied to ann.  -1 when s holds no fd. */
static int fd_at(const char *s, char *ann, size_t n)
{
	char *end;
	long fd = strtol(s, &end, 10);
	const char *a, *z;
	ann[0] = '\0';
	if (end == s || *end != '<')
		return end == s ? -1 : (int)fd;
	a = end + 1;
	z = !strncmp(a, "TCP:[", 5) ? strstr(a, "]>") + 1 : strchr(a, '>');
	if (z && z > a)
		snprintf(ann, n, "%.*s", (int)(z - a), a);
	return (int)fd;
}

/* The call's first argument as an fd. */
static int ev_fd(const struct ev *e, char *ann, size_t n)
{
	return fd_at(e->text + strlen(e->name) + 1, ann, n);
}

/* The fd the call returned. */
static int ev_ret_fd(const struct ev *e, char *ann, size_t n)
{
	char *eq = NULL;
	for (char *q = strstr(e->text, ") = "); q; q = strstr(q + 1, ") = "))
		eq = q;
	return eq ? fd_at(eq + 4, ann, n) : -1;
}

/* Is e one of the calls names ("a,b,c") lists? */
static bool is(const struct ev *e, const char *names)
{
	size_t n = strlen(e->name);
	for (const char *p = names; n && (p = strstr(p, e->name)); p += n)
		if ((p == names || p[-1] == ',') && (p[n] == ',' || !p[n]))
			return true;
	return false;
}

#define SENDS "sendto,sendmsg,writev,write,sendfile"
#define RECVS "recvfrom,recvmsg"
#define WRITES "write,pwrite64,writev,pwritev,pwritev2"
#define SYNCS "fsync,fdatasync"

/* Is e one of calls on a TCP socket whose peer is 127.0.0.1:port,
 * holding needle (NULL: any)? */
static bool on_socket(const struct ev *e, const char *calls, int port, const char *needle)
{
	char ann[256], peer[32];
	if (!is(e, calls) || ev_fd(e, ann, sizeof(ann)) < 0 || strncmp(ann, "TCP:[", 5))
		return false;
	snprintf(peer, sizeof(peer), "->127.0.0.1:%d]", port);
	return strstr(ann, peer) && (!needle || strstr(e->text, needle));
}

static bool send_to(const struct ev *e, int port, const char *needle)
{
	return on_socket(e, SENDS, port, needle);
}

/* The index of the first event e at or after from for which cond holds,
 * or -1 (a GNU statement expression: cond names e). */
#define FIND(t, from, cond)                                                        \
	({                                                                         \
		int found_ = -1;                                                   \
		for (int i_ = (from); i_ < (t)->n && found_ < 0; i_++) {           \
			const struct ev *e = &(t)->ev[i_];                         \
			if (cond)                                                  \
				found_ = i_;                                       \
		}                                                                  \
		found_;                                                            \
	})

/* ---- requests on connections whose local port is known ---- */

/* Send req (head) and body on a new connection to port; the answer's
 * status; *cport gets the connection's local port (the server's peer). */
static long request(int port, const char *head, const void *body, size_t len, int *cport)
{
	struct sockaddr_in a;
	socklen_t al = sizeof(a);
	int fd = h_connect(port);
	long st;
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	*cport = ntohs(a.sin_port);
	ck_assert(h_send(fd, head, strlen(head)));
	if (len)
		ck_assert(h_send(fd, body, len));
	st = h_recv_resp(fd, NULL, 60000, false);
	close(fd);
	return st;
}

static char *body_of(int seed, size_t n)
{
	char *b = xmalloc(n);
	unsigned x = (unsigned)seed * 2654435761u + 1;
	for (size_t i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		b[i] = (char)('a' + (x >> 16) % 26);
	}
	return b;
}

/* ---- mkv-volume ---- */

/* The PUT of dir/base answered on the connection from cport with
 * status_line: body bytes to a temporary file, fsync, name, directories
 * fsynced, answer.  Returns the answer's index. */
static int check_volume_put(const struct trace *t, const char *root, const char *dir,
			    const char *base, int cport, const char *status_line, size_t len)
{
	char full[512], ann[512], proc[64], quoted[300];
	int ans, open = -1, tmp = -1, close_i, last_write = -1, sync, named, dsync;
	size_t written = 0;

	snprintf(full, sizeof(full), "%s/%s", root, dir);
	ans = FIND(t, 0, send_to(e, cport, status_line));
	ck_assert_msg(ans >= 0, "%s: no \"%s\" sent to port %d", t->path, status_line, cport);
	/* the temporary file: the last one opened in dir before the answer */
	for (int i = 0; i < ans; i++) {
		const struct ev *e = &t->ev[i];
		if (is(e, "openat") && e->ret >= 0 &&
		    (strstr(e->text, "O_TMPFILE") || strstr(e->text, ".mkv-tmp")) &&
		    ev_ret_fd(e, ann, sizeof(ann)) >= 0 && !strncmp(ann, full, strlen(full)) &&
		    ann[strlen(full)] == '/')
			open = i;
	}
	ck_assert_msg(open >= 0, "%s: PUT %s/%s: no temporary file opened in %s", t->path, dir,
		      base, full);
	tmp = ev_ret_fd(&t->ev[open], ann, sizeof(ann));
	/* a close that began before the open returned is of an earlier file
	 * the number was freed from (another thread's socket, say) */
	close_i = FIND(t, open + 1, is(e, "close") && ev_fd(e, ann, sizeof(ann)) == tmp &&
		       e->start > t->ev[open].end);
	if (close_i < 0)
		close_i = t->n;
	for (int i = open + 1; i < close_i; i++)
		if (is(&t->ev[i], WRITES) && ev_fd(&t->ev[i], ann, sizeof(ann)) == tmp &&
		    t->ev[i].ret > 0) {
			written += (size_t)t->ev[i].ret;
			last_write = i;
		}
	ck_assert_msg(written == len, "%s: %zu bytes written to the temporary file (fd %d), "
		      "not the body's %zu", t->path, written, tmp, len);
	sync = FIND(t, last_write + 1,
		    is(e, SYNCS) && ev_fd(e, ann, sizeof(ann)) == tmp && e->start > t->ev[last_write].end);
	ck_assert_msg(sync >= 0 && sync < close_i, "%s: the temporary file (fd %d) is never "
		      "fsynced after its last write (line %d)", t->path, tmp, t->ev[last_write].end);
	/* Nothing names the file before its fsync returned. */
	snprintf(proc, sizeof(proc), "\"/proc/self/fd/%d\"", tmp);
	for (int i = open + 1; i < close_i; i++)
		if (is(&t->ev[i], "linkat") && strstr(t->ev[i].text, proc))
			ck_assert_msg(t->ev[i].start > t->ev[sync].end, "%s: line %d names the "
				      "file before its fsync returned (line %d)", t->path,
				      t->ev[i].start, t->ev[sync].end);
	/* its name: linked in, or renamed over the old file */
	snprintf(quoted, sizeof(quoted), ", \"%s\"", base);
	named = FIND(t, open + 1,
		     ((is(e, "linkat") && strstr(e->text, proc)) ||
		      is(e, "renameat,renameat2,rename")) && e->ret == 0 &&
		     strstr(e->text, quoted));
	ck_assert_msg(named >= 0 && named < ans, "%s: %s/%s never named before the answer",
		      t->path, dir, base);
	ck_assert_msg(t->ev[named].start > t->ev[sync].end, "%s: %s named (line %d) before the "
		      "fsync returned (line %d)", t->path, base, t->ev[named].start,
		      t->ev[sync].end);
	dsync = FIND(t, named + 1, is(e, SYNCS) && ev_fd(e, ann, sizeof(ann)) >= 0 &&
		     !strcmp(ann, full) && e->ret == 0);
	ck_assert_msg(dsync >= 0 && t->ev[dsync].start > t->ev[named].end,
		      "%s: directory %s not fsynced after the name", t->path, full);
	ck_assert_msg(t->ev[dsync].end < t->ev[ans].start, "%s: the answer (line %d) went "
		      "before the directory's fsync returned (line %d)", t->path,
		      t->ev[ans].start, t->ev[dsync].end);
	/* every directory made on the way: its parent fsynced before the answer */
	for (int i = 0; i < ans; i++) {
		const struct ev *e = &t->ev[i];
		char made[600], *q, *slash;
		int psync;
		if (!is(e, "mkdirat") || e->ret != 0 || ev_fd(e, ann, sizeof(ann)) == -1 ||
		    !(q = strchr(e->text, '"')))
			continue;
		snprintf(made, sizeof(made), "%s/%.*s", ann, (int)strcspn(q + 1, "\""), q + 1);
		if (strncmp(made, root, strlen(root)))
			continue;
		slash = strrchr(made, '/');
		*slash = '\0';
		psync = FIND(t, i + 1, is(e, SYNCS) && ev_fd(e, ann, sizeof(ann)) >= 0 &&
			     !strcmp(ann, made) && e->ret == 0);
		ck_assert_msg(psync >= 0 && t->ev[psync].start > e->end &&
			      t->ev[psync].end < t->ev[ans].start, "%s: a directory made in %s "
			      "(line %d), which is not fsynced before the answer", t->path, made,
			      e->end);
	}
	fprintf(stderr, "volume %s: written by line %d, fsync %d, %s %d, fsync(dir) %d, "
		"answer %d\n", status_line + 9, t->ev[last_write].end, t->ev[sync].end,
		t->ev[named].name, t->ev[named].end, t->ev[dsync].end, t->ev[ans].start);
	return ans;
}

START_TEST(test_volume_put)
{
	enum { LEN = 300 * 1024 };   /* more than one write (128 KiB buffer) */
	char *tmp = h_tmpdir(), *root, *trace, *log, *bin = h_bin("mkv-volume"), port[16];
	char *head, *rroot, *b1 = body_of(1, LEN), *b2 = body_of(2, LEN);
	struct traced tv;
	struct trace t;
	int p = h_free_port(), c1, c2, a1, a2;

	root = xasprintf("%s/data", tmp);
	trace = xasprintf("%s/volume.trace", tmp);
	log = xasprintf("%s/volume.log", tmp);
	mkdir(root, 0755);
	rroot = realpath(root, NULL);   /* as -yy prints it */
	snprintf(port, sizeof(port), "%d", p);
	{
		char *argv[] = {bin, "-port", port, root, NULL};
		traced_start(&tv, argv, trace, log);
	}
	ck_assert_msg(h_wait_port(p, 30000), "traced mkv-volume did not start (see %s)", log);
	head = xasprintf("PUT /ab/cd/blob HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n"
			 "Connection: close\r\n\r\n", LEN);
	ck_assert_int_eq(request(p, head, b1, LEN, &c1), 201);   /* new: linked in */
	ck_assert_int_eq(request(p, head, b2, LEN, &c2), 204);   /* over it: renamed */
	traced_stop(&tv);
	trace_read(&t, trace);
	a1 = check_volume_put(&t, rroot, "ab/cd", "blob", c1, "HTTP/1.1 201", LEN);
	a2 = check_volume_put(&t, rroot, "ab/cd", "blob", c2, "HTTP/1.1 204", LEN);
	ck_assert_int_lt(a1, a2);
	/* the overwrite went by rename */
	ck_assert_msg(FIND(&t, a1, is(e, "renameat,renameat2,rename") &&
			   strstr(e->text, ", \"blob\"")) >= 0,
		      "%s: the second PUT did not rename over the first", t.path);
	{
		char *f = xasprintf("%s/ab/cd/blob", root), *got = h_read_file(f);
		ck_assert_msg(strlen(got) == LEN && !memcmp(got, b2, LEN), "the blob is not the "
			      "second PUT's");
		free(got), free(f);
	}
	trace_free(&t);
	h_rmrf(tmp);
	free(tmp), free(root), free(rroot), free(trace), free(log), free(bin), free(head);
	free(b1), free(b2);
}
END_TEST

/* ---- the master ---- */

/* Is e a write to the index's LevelDB log (db/NNNNNN.log, not the S3
 * sidecar's db/mkv-meta/NNNNNN.log) holding a and b (NULL: any) and not
 * not (NULL: no such condition)? */
static bool log_write(const struct ev *e, const char *db, const char *a, const char *b,
		      const char *not)
{
	char ann[512];
	size_t n = strlen(db), l;
	if (!is(e, WRITES) || ev_fd(e, ann, sizeof(ann)) < 0 || strncmp(ann, db, n) ||
	    ann[n] != '/' || strchr(ann + n + 1, '/') || (l = strlen(ann)) < 4 ||
	    strcmp(ann + l - 4, ".log"))
		return false;
	return strstr(e->text, a) && (!b || strstr(e->text, b)) && (!not || !strstr(e->text, not));
}

/* The first fsync/fdatasync, after write w returned, of the fd w wrote. */
static int sync_after(const struct trace *t, int w)
{
	char ann[512], wann[512];
	int fd = ev_fd(&t->ev[w], wann, sizeof(wann));
	return FIND(t, w + 1, is(e, SYNCS) && e->start > t->ev[w].end && e->ret == 0 &&
		    ev_fd(e, ann, sizeof(ann)) == fd && !strcmp(ann, wann));
}

/* The first send at or after from to any of the volumes of a request
 * line "METHOD /svNN<path> ", or -1. */
static int to_volumes(const struct trace *t, int from, const struct vol *vols, int nvol,
		      const char *method, const char *path)
{
	char *tail = xasprintf("%s HTTP/1.1", path);
	int first = -1;
	for (int v = 0; v < nvol; v++) {
		int i = FIND(t, from, send_to(e, vols[v].port, tail) &&
			     strstr(e->text, method) && strstr(e->text, method) < strstr(e->text, tail));
		if (i >= 0 && (first < 0 || i < first))
			first = i;
	}
	free(tail);
	return first;
}

START_TEST(test_master)
{
	enum { SMALL = 5000, BIG = 300 * 1024 };   /* sent whole; streamed */
	struct vol vols[2];
	char *tmp = h_tmpdir(), *db, *rdb, *trace, *log, *bin = h_bin("mkv"), *volarg, port[16];
	char *keys[2], *bodies[2], *head, path[PATH_MAX_LEN];
	size_t lens[2] = {SMALL, BIG};
	int p = h_free_port(), cput[2], cdel, ans[2], del_ans, mark, w, s, v;
	struct traced tm;
	struct trace t;

	for (int i = 0; i < 2; i++)
		h_vol_start(&vols[i], VOL_MKV);
	db = xasprintf("%s/db", tmp);
	trace = xasprintf("%s/master.trace", tmp);
	log = xasprintf("%s/master.log", tmp);
	volarg = h_volumes_arg(vols, 2);
	snprintf(port, sizeof(port), "%d", p);
	{
		char *argv[] = {bin, "-volumes", volarg, "-db", db, "-port", port, "-replicas", "2",
				"server", NULL};
		traced_start(&tm, argv, trace, log);
	}
	ck_assert_msg(h_wait_port(p, 30000), "traced master did not start (see %s)", log);
	for (int i = 0; i < 2; i++) {
		keys[i] = xasprintf("/durable-%d-%d", (int)getpid(), i);
		bodies[i] = body_of(10 + i, lens[i]);
		head = xasprintf("PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n"
				 "Connection: close\r\n\r\n", keys[i], lens[i]);
		ck_assert_int_eq(request(p, head, bodies[i], lens[i], &cput[i]), 201);
		free(head);
	}
	head = xasprintf("DELETE %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", keys[0]);
	ck_assert_int_eq(request(p, head, NULL, 0, &cdel), 204);
	free(head);
	traced_stop(&tm);
	rdb = realpath(db, NULL);
	trace_read(&t, trace);

	for (int i = 0; i < 2; i++) {
		ans[i] = FIND(&t, 0, send_to(e, cput[i], "HTTP/1.1 201"));
		ck_assert_msg(ans[i] >= 0, "%s: no 201 to port %d", t.path, cput[i]);
		placement_path(keys[i], strlen(keys[i]), path);
		/* the DELETED record, then the bytes */
		w = FIND(&t, 0, log_write(e, rdb, keys[i], "DELETED", NULL));
		v = to_volumes(&t, 0, vols, 2, "PUT /", path);
		ck_assert_msg(w >= 0, "%s: %s: no DELETED record written", t.path, keys[i]);
		ck_assert_msg(v >= 0, "%s: %s: nothing sent to a volume", t.path, keys[i]);
		ck_assert_msg(t.ev[w].end < t.ev[v].start, "%s: %s: bytes sent to a volume (line "
			      "%d) before the DELETED record was written (line %d)", t.path, keys[i],
			      t.ev[v].start, t.ev[w].end);
		fprintf(stderr, "master PUT (%zu bytes): DELETED record by line %d, first byte to a "
			"volume %d, ", lens[i], t.ev[w].end, t.ev[v].start);
		/* every volume's 201 read, then the live record, synced, then the 201 */
		w = FIND(&t, 0, log_write(e, rdb, keys[i], "HASH", "DELETED"));
		ck_assert_msg(w >= 0 && w < ans[i], "%s: %s: the live record is not written before "
			      "the 201", t.path, keys[i]);
		for (int j = 0; j < 2; j++) {
			int got = FIND(&t, v, on_socket(e, RECVS, vols[j].port, "HTTP/1.1 201"));
			ck_assert_msg(got >= 0 && t.ev[got].end < t.ev[w].start, "%s: %s: the live "
				      "record (line %d) was written before volume %s's 201 was read",
				      t.path, keys[i], t.ev[w].start, vols[j].name);
			fprintf(stderr, "%s's 201 read %d, ", vols[j].name, t.ev[got].end);
		}
		s = sync_after(&t, w);
		ck_assert_msg(s >= 0 && t.ev[s].end < t.ev[ans[i]].start, "%s: %s: the 201 (line %d) "
			      "went before the index log was synced after the live record (line %d)",
			      t.path, keys[i], t.ev[ans[i]].start, t.ev[w].end);
		fprintf(stderr, "live record %d, %s %d, 201 %d\n", t.ev[w].end, t.ev[s].name,
			t.ev[s].end, t.ev[ans[i]].start);
	}

	/* DELETE: the mark synced, then the volumes' DELETEs, the record, the 204 */
	placement_path(keys[0], strlen(keys[0]), path);
	del_ans = FIND(&t, 0, send_to(e, cdel, "HTTP/1.1 204"));
	ck_assert_msg(del_ans >= 0, "%s: no 204 to port %d", t.path, cdel);
	mark = FIND(&t, ans[1], log_write(e, rdb, keys[0], "DELETEDHASH", NULL));
	ck_assert_msg(mark >= 0 && mark < del_ans, "%s: DELETE: no DELETED mark written", t.path);
	s = sync_after(&t, mark);
	v = to_volumes(&t, ans[1], vols, 2, "DELETE /", path);
	ck_assert_msg(v >= 0 && v < del_ans, "%s: DELETE: no DELETE sent to a volume before the "
		      "204", t.path);
	ck_assert_msg(s >= 0 && t.ev[s].end < t.ev[v].start, "%s: DELETE: a volume was sent its "
		      "DELETE (line %d) before the DELETED mark (line %d) was synced", t.path,
		      t.ev[v].start, t.ev[mark].end);
	w = FIND(&t, mark + 1, log_write(e, rdb, keys[0], NULL, "HASH"));
	ck_assert_msg(w >= 0 && t.ev[w].end < t.ev[del_ans].start, "%s: DELETE: the 204 (line %d) "
		      "went before the record was deleted", t.path, t.ev[del_ans].start);
	for (int j = 0; j < 2; j++) {   /* every replica gone before the record */
		int got = FIND(&t, v, on_socket(e, RECVS, vols[j].port, "HTTP/1.1 204"));
		ck_assert_msg(got >= 0 && t.ev[got].end < t.ev[w].start, "%s: DELETE: the record "
			      "was deleted (line %d) before volume %s's 204 was read", t.path,
			      t.ev[w].start, vols[j].name);
	}
	fprintf(stderr, "master DELETE: mark by line %d, %s %d, first DELETE to a volume %d, "
		"record deleted %d, 204 %d\n", t.ev[mark].end, t.ev[s].name, t.ev[s].end,
		t.ev[v].start, t.ev[w].end, t.ev[del_ans].start);

	trace_free(&t);
	for (int i = 0; i < 2; i++) {
		free(keys[i]), free(bodies[i]);
		h_vol_stop(&vols[i]);
	}
	h_rmrf(tmp);
	free(tmp), free(db), free(rdb), free(trace), free(log), free(bin), free(volarg);
}
END_TEST

/* ---- a volume's DELETE ---- */

/* "204 means the blob is gone for good": the name is unlinked, then its
 * directory fsynced, and only then the answer (a power cut before the
 * directory's fsync could bring the blob back). */
START_TEST(test_volume_delete)
{
	char *tmp = h_tmpdir(), *root, *trace, *log, *bin = h_bin("mkv-volume"), port[16];
	char *rroot, full[600];
	const char *put = "PUT /ab/cd/blob HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n"
			  "Connection: close\r\n\r\n";
	const char *del = "DELETE /ab/cd/blob HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	struct traced tv;
	struct trace t;
	int p = h_free_port(), c1, c2, u, ans, dsync;
	char ann[600];

	root = xasprintf("%s/data", tmp);
	trace = xasprintf("%s/volume.trace", tmp);
	log = xasprintf("%s/volume.log", tmp);
	mkdir(root, 0755);
	rroot = realpath(root, NULL);
	snprintf(port, sizeof(port), "%d", p);
	{
		char *argv[] = {bin, "-port", port, root, NULL};
		traced_start(&tv, argv, trace, log);
	}
	ck_assert_msg(h_wait_port(p, 30000), "traced mkv-volume did not start (see %s)", log);
	ck_assert_int_eq(request(p, put, "blob", 4, &c1), 201);
	ck_assert_int_eq(request(p, del, NULL, 0, &c2), 204);
	traced_stop(&tv);
	trace_read(&t, trace);
	snprintf(full, sizeof(full), "%s/ab/cd", rroot);
	ans = FIND(&t, 0, send_to(e, c2, "HTTP/1.1 204"));
	ck_assert_msg(ans >= 0, "%s: no 204 sent to port %d", t.path, c2);
	u = FIND(&t, 0, is(e, "unlinkat") && e->ret == 0 && strstr(e->text, "\"ab/cd/blob\""));
	ck_assert_msg(u >= 0 && u < ans, "%s: ab/cd/blob not unlinked before the 204", t.path);
	dsync = FIND(&t, u + 1, is(e, SYNCS) && ev_fd(e, ann, sizeof(ann)) >= 0 &&
		     !strcmp(ann, full) && e->ret == 0);
	ck_assert_msg(dsync >= 0 && t.ev[dsync].start > t.ev[u].end &&
		      t.ev[dsync].end < t.ev[ans].start, "%s: DELETE: directory %s not fsynced "
		      "between the unlink (line %d) and the 204 (line %d)", t.path, full, t.ev[u].end,
		      t.ev[ans].start);
	fprintf(stderr, "volume DELETE: unlinked by line %d, fsync(dir) %d, answer %d\n",
		t.ev[u].end, t.ev[dsync].end, t.ev[ans].start);
	trace_free(&t);
	h_rmrf(tmp);
	free(tmp), free(root), free(rroot), free(trace), free(log), free(bin);
}
END_TEST

/* ---- the master's REPLACE: the sidecar's marker ---- */

/* A REPLACE writes its marker (the sidecar's "r" entry, which lets the
 * next start settle a REPLACE a crash cut short) and syncs the sidecar's
 * log before the first byte of the new value goes to a volume. */
START_TEST(test_master_replace)
{
	struct vol vols[2];
	char *tmp = h_tmpdir(), *db, *sdb, *trace, *log, *bin = h_bin("mkv"), *volarg, port[16];
	char *key, *head, *rdb, path[PATH_MAX_LEN], *mkey;
	int p = h_free_port(), cput, crep, ans, mark, s, v;
	struct traced tm;
	struct trace t;

	for (int i = 0; i < 2; i++)
		h_vol_start(&vols[i], VOL_MKV);
	db = xasprintf("%s/db", tmp);
	trace = xasprintf("%s/master.trace", tmp);
	log = xasprintf("%s/master.log", tmp);
	volarg = h_volumes_arg(vols, 2);
	snprintf(port, sizeof(port), "%d", p);
	{
		char *argv[] = {bin, "-volumes", volarg, "-db", db, "-port", port, "-replicas", "2",
				"server", NULL};
		traced_start(&tm, argv, trace, log);
	}
	ck_assert_msg(h_wait_port(p, 30000), "traced master did not start (see %s)", log);
	key = xasprintf("/replaced-%d", (int)getpid());
	head = xasprintf("PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\n",
			 key);
	ck_assert_int_eq(request(p, head, "old", 3, &cput), 201);
	free(head);
	head = xasprintf("REPLACE %s HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
			 "Connection: close\r\n\r\n", key);
	ck_assert_int_eq(request(p, head, "newer", 5, &crep), 201);
	free(head);
	traced_stop(&tm);
	rdb = realpath(db, NULL);
	sdb = xasprintf("%s/mkv-meta", rdb);
	trace_read(&t, trace);
	placement_path(key, strlen(key), path);
	ans = FIND(&t, 0, send_to(e, cput, "HTTP/1.1 201"));   /* the PUT's answer */
	ck_assert_msg(ans >= 0, "%s: no 201 to port %d", t.path, cput);
	mkey = xasprintf("r%s", key);
	mark = FIND(&t, ans, log_write(e, sdb, mkey, NULL, NULL));
	v = to_volumes(&t, ans, vols, 2, "PUT /", path);
	ck_assert_msg(v >= 0, "%s: the REPLACE sent nothing to a volume", t.path);
	ck_assert_msg(mark >= 0 && t.ev[mark].end < t.ev[v].start, "%s: REPLACE: bytes sent to a "
		      "volume (line %d) before its marker was written to %s", t.path,
		      t.ev[v].start, sdb);
	s = sync_after(&t, mark);
	ck_assert_msg(s >= 0 && t.ev[s].end < t.ev[v].start, "%s: REPLACE: bytes sent to a volume "
		      "(line %d) before the sidecar was synced after its marker (line %d)", t.path,
		      t.ev[v].start, t.ev[mark].end);
	fprintf(stderr, "master REPLACE: marker by line %d, %s %d, first byte to a volume %d\n",
		t.ev[mark].end, t.ev[s].name, t.ev[s].end, t.ev[v].start);
	trace_free(&t);
	for (int i = 0; i < 2; i++)
		h_vol_stop(&vols[i]);
	h_rmrf(tmp);
	free(tmp), free(db), free(sdb), free(rdb), free(trace), free(log), free(bin), free(volarg);
	free(key), free(mkey);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("durability");
	SRunner *sr;
	TCase *tc;
	int failed;

	curl_global_init(CURL_GLOBAL_ALL);
	signal(SIGPIPE, SIG_IGN);
	tc = tcase_create("volume");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_volume_put);
	suite_add_tcase(s, tc);
	tc = tcase_create("master");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_master);
	suite_add_tcase(s, tc);
	tc = tcase_create("master replace");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_master_replace);
	suite_add_tcase(s, tc);
	tc = tcase_create("volume delete");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_volume_delete);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
