/* server.c -- see server.h.
 *
 * The front (common/front.h) runs one epoll thread per core.  Reads
 * (open, fstat, sendfile) and the writes of a PUT body happen on those
 * threads: they do not wait for the disk.  What does -- the fsyncs that
 * make a PUT or DELETE durable -- runs on a work queue of the thread pool
 * (common/spawn.h) while the connection sleeps, so a slow disk never
 * stalls the other connections of that thread. */
#include "server.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/front.h"
#include "../common/httpc.h"
#include "../common/page.h"
#include "../common/range.h"
#include "../common/spawn.h"
#include "../common/util.h"
#include "../common/volsign.h"
#include "fs.h"
#include "listing.h"
#include "path.h"
#include "status.h"
#include "wire.h"

#define SYNC_WORKERS 32          /* fsyncs in flight at once */
#define HASH_WORKERS 4           /* HEAD ?md5 files being read at once */
#define PULL_WORKERS 32          /* pulls (PUT with Mkv-Pull) in flight at once */
#define PULL_STALL_S 30          /* a source that sends nothing this long fails the pull */
#define MAX_CONNECTIONS 16384    /* or what the fd limit allows: 2 fds each */
#define CONN_MEMORY (32 * 1024)  /* request line + headers + one body buffer */
#define PATH_BYTES 4096

enum method { M_GET, M_HEAD, M_REFUSED, M_PUT, M_DELETE, M_MD5, M_PULL, M_OTHER };

/* A GET or HEAD (but HEAD ?md5). */
struct read_req {
	enum method m;                 /* first, as in struct req: the route tells them apart */
	struct MHD_Connection *conn;
	const char *url;               /* the front's, for the request's life */
};

/* A PUT, DELETE, HEAD ?md5 or unsupported method. */
struct req {
	enum method m;
	struct front_sleep sl;         /* its connection, asleep while a worker runs */
	int status;                    /* the answer, once known */
	const char *why;               /* its reason, or NULL for the default */
	bool synced;                   /* a worker has finished with it */
	struct vol_put *put;
	int fd;                        /* M_MD5: the file, once hashed */
	struct stat st;
	char md5[33];
	char *pull;                    /* M_PULL: the source's URL (Mkv-Pull) */
	char pull_md5[33];             /* M_PULL: what its bytes must hash to, or "" */
	const char *pull_outcome;      /* M_PULL: the answer's Mkv-Pull */
	char path[PATH_BYTES];
};

struct vol_server {
	struct vol_root root;
	char *dir;
	int port;
	bool tls;
	/* PUT and DELETE wait for their fsyncs in sync.  HEAD ?md5 (mkv
	 * verify) reads whole files: hash has threads of its own, so a
	 * verify never holds up the fsyncs of writes. */
	struct spawn_queue *sync, *hash, *pull;
};

/* -peers: the volumes a pull may read from, "host:port" each. */
static char **peers;
static int npeers;

/* The one server (the front is one per process), for the route's calls. */
static struct vol_server *server;

static enum method refused = M_REFUSED;   /* the state of a request refused at once */

static const char *status_reason(int status)
{
	switch (status) {
	case 301: return "moved to the directory's URL ending in /";
	case 400: return "bad request";
	case 403: return "forbidden";
	case 404: return "not found";
	case 405: return "method not allowed";
	case 409: return "conflict: the path names a directory, or a parent is a file";
	case 412: return "precondition failed: If-Match or If-Unmodified-Since";
	case 414: return "path too long";
	case 415: return "no request body allowed";
	case 416: return "requested range not satisfiable";
	case 501: return "Content-Range in a PUT is not supported";
	case 507: return "insufficient storage";
	default:  return "internal server error";
	}
}

/* A one-line text/plain reason for a 3xx/4xx/5xx, with one more header
 * when name is not NULL (and Allow for a 405).  To a HEAD, no body:
 * Content-Length: 0, as minikeyvalue answers every HEAD error. */
static int send_error_hdr(struct MHD_Connection *c, bool head, int status, const char *why,
			  const char *name, const char *value)
{
	char line[256];
	int n = head ? 0 : snprintf(line, sizeof(line), "%s\n", why ? why : status_reason(status));
	struct front_hdr h[3];
	int nh = 0;
	if (!head)
		h[nh++] = (struct front_hdr){"Content-Type", "text/plain"};
	if (status == 405)
		h[nh++] = (struct front_hdr){"Allow", "GET, HEAD, PUT, DELETE"};
	if (name)
		h[nh++] = (struct front_hdr){name, value};
	return front_send(c, status, h, nh, line, (size_t)n);
}

static int send_error_to(struct MHD_Connection *c, bool head, int status, const char *why)
{
	return send_error_hdr(c, head, status, why, NULL, NULL);
}

static int send_listing(struct vol_server *s, struct MHD_Connection *c, const char *path,
			bool head)
{
	static const struct front_hdr json = {"Content-Type", "application/json"};
	int status;
	int mode = !front_has_arg(c, "recursive") ? 0
		 : front_has_arg(c, "tmp") ? VOL_LIST_DEEP | VOL_LIST_TMP : VOL_LIST_DEEP;
	struct vol_list *l = vol_list_open(&s->root, path, mode, &status);
	if (!l)
		return send_error_to(c, head, status, NULL);
	/* libmicrohttpd 0.9.75 ends a chunked answer to a HEAD with a body of
	 * its own ("0\r\n\r\n"), which the client would take for the start of
	 * the next answer: to a HEAD, no chunks (as nginx: no length either),
	 * and the connection closes. */
	return front_stream_ex(c, 200, &json, 1, -1, 32 * 1024, vol_list_read, vol_list_close, l,
			       head);
}

/* The query string again, from its arguments (undecoded: no_unescape). */
static void arg_append(void *cls, const char *key, const char *value)
{
	struct buf *b = cls;
	buf_printf(b, "%s%s%s%s", b->len ? "&" : "?", key, value ? "=" : "", value ? value : "");
}

/* nginx answers a directory named without its slash with a 301 to the
 * name with it and the same query, on the Host the client used (else the
 * address it reached) and the port we listen on. */
static int send_dir_redirect(struct vol_server *s, struct MHD_Connection *c, const char *url,
			     bool head)
{
	const char *host = front_header(c, "Host");
	char port[16] = "", addr[INET_ADDRSTRLEN] = "";
	struct buf query = {0}, path = {0};
	size_t hlen;
	int ok;
	if (!host || !*host) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		int fd = front_fd(c);
		if (fd >= 0 && getsockname(fd, (struct sockaddr *)&sa, &sl) == 0 &&
		    sa.sin_family == AF_INET)
			inet_ntop(AF_INET, &sa.sin_addr, addr, sizeof(addr));
		host = addr;
	}
	/* The host without its port; an IPv6 literal keeps its brackets. */
	hlen = host[0] == '[' && strchr(host, ']') ? (size_t)(strchr(host, ']') - host) + 1
						 : strcspn(host, ":");
	if (s->port != 80)
		snprintf(port, sizeof(port), ":%d", s->port);
	front_args(c, arg_append, &query);
	buf_printf(&path, "%s://%.*s%s", s->tls ? "https" : "http", (int)hlen, host, port);
	/* The path as it came (still encoded), but for bytes a URL must not
	 * hold raw: those are escaped, as nginx escapes them. */
	for (const unsigned char *u = (const unsigned char *)url; *u; u++) {
		if (*u > ' ' && *u < 0x7f && *u != '"')
			buf_append(&path, u, 1);
		else
			buf_printf(&path, "%%%02X", *u);
	}
	buf_printf(&path, "/%s", query.len ? query.data : "");
	ok = send_error_hdr(c, head, 301, NULL, "Location", path.data);
	buf_free(&query);
	buf_free(&path);
	return ok;
}

static int send_file(struct vol_server *s, struct MHD_Connection *c, const char *url,
		     const char *path, bool head)
{
	struct front_hdr h[5];
	struct stat st;
	char etag[64], date[HTTP_DATE_LEN], cr[96], disk[48];
	const char *ius, *im, *inm, *ims, *range, *ifr;
	uint64_t start = 0, len, size;
	enum range rr;
	int fd, sock = -1, nh = 0, ok, status = vol_fs_open(&s->root, path, &fd, &st);

	if (status == 301)
		return send_dir_redirect(s, c, url, head);
	if (status != 200)
		return send_error_to(c, head, status, NULL);
	size = (uint64_t)st.st_size;
	snprintf(etag, sizeof(etag), "\"%llx-%llx\"", (unsigned long long)st.st_mtime,
		 (unsigned long long)size);
	http_date(st.st_mtime, date);

	/* As nginx's not-modified filter, in its order: a failed
	 * If-Unmodified-Since or If-Match is a 412 (so a resumed download never
	 * mixes two versions of a file); then a 304 when every one given of
	 * If-Modified-Since (the exact time) and If-None-Match holds. */
	ius = front_header(c, "If-Unmodified-Since");
	im = front_header(c, "If-Match");
	if ((ius && httpc_parse_date(ius) < st.st_mtime) || (im && !etag_listed(im, etag, 0))) {
		close(fd);
		return send_error_to(c, head, 412, NULL);
	}
	inm = front_header(c, "If-None-Match");
	ims = front_header(c, "If-Modified-Since");
	if ((inm || ims) && (!ims || httpc_parse_date(ims) == st.st_mtime) &&
	    (!inm || etag_listed(inm, etag, ETAG_WEAK))) {
		close(fd);
		h[nh++] = (struct front_hdr){"Last-Modified", date};
		h[nh++] = (struct front_hdr){"ETag", etag};
		return front_send(c, 304, h, nh, NULL, 0);
	}
	range = front_header(c, "Range");
	ifr = front_header(c, "If-Range");
	/* As nginx: an If-Range ending in a quote is an ETag, compared
	 * exactly; else a date, which must be the file's time. */
	if (range && ifr &&
	    (*ifr && ifr[strlen(ifr) - 1] == '"' ? strcmp(ifr, etag) != 0
						 : httpc_parse_date(ifr) != st.st_mtime))
		range = NULL;
	rr = range_parse(range, size, &start, &len);
	if (rr == RANGE_BAD) {
		close(fd);
		snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
		return send_error_hdr(c, head, 416, NULL, "Content-Range", cr);
	}
	if (rr == RANGE_ALL) {   /* a parse may have set them before giving up */
		start = 0;
		len = size;
	}
	h[nh++] = (struct front_hdr){"Content-Type", "application/octet-stream"};
	if (rr == RANGE_ONE) {
		snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", (unsigned long long)start,
			 (unsigned long long)(start + len - 1), (unsigned long long)size);
		h[nh++] = (struct front_hdr){"Content-Range", cr};
		status = 206;
	} else {
		h[nh++] = (struct front_hdr){"Accept-Ranges", "bytes"};
	}
	h[nh++] = (struct front_hdr){"Last-Modified", date};
	h[nh++] = (struct front_hdr){"ETag", etag};
	if (head && vol_marker_disk(path, fd, disk, sizeof(disk)))
		h[nh++] = (struct front_hdr){"Mkv-Disk", disk};
	if (!head && len > 0 && (sock = front_fd(c)) >= 0)
		wire_file_body(sock, fd, start + len);
	/* sendfile(2) from fd; the answer closes it. */
	ok = front_file(c, status, h, nh, fd, start, len);
	if (ok < 0) {
		if (sock >= 0)
			wire_reset(sock);
		close(fd);
		return send_error_to(c, head, 500, NULL);
	}
	return ok;
}

static int answer_read(struct vol_server *s, struct MHD_Connection *c, const char *url, bool head)
{
	char path[PATH_BYTES];
	const char *why;
	bool dir;
	int status = vol_path_clean(url, path, sizeof(path), &dir, &why);
	if (status)
		return send_error_to(c, head, status, why);
	return dir ? send_listing(s, c, path, head) : send_file(s, c, url, path, head);
}

/* ---- the pull: PUT with Mkv-Pull, the body read from another volume ---- */

void vol_server_peers(const char *list)
{
	char *copy = xstrdup(list ? list : ""), *save = NULL;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		size_t n;
		if (strstr(t, "://"))
			t = strstr(t, "://") + 3;
		n = strcspn(t, "/");          /* a subvolume is its volume's */
		if (!n)
			continue;
		peers = xrealloc(peers, sizeof(*peers) * (size_t)(npeers + 1));
		peers[npeers++] = xstrndup(t, n);
	}
	free(copy);
}

/* Is q (after the '?') exactly a link signature, "md5=H&expires=T"? */
static bool only_signature(const char *q)
{
	size_t h;
	const char *e;
	if (strncmp(q, "md5=", 4))   /* first: q may be shorter than "md5=" */
		return false;
	h = strspn(q + 4, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_");
	e = q + 4 + h;
	return h == VOLSIGN_HASH_LEN && !strncmp(e, "&expires=", 9) && strlen(e + 9) >= 1 &&
	       strlen(e + 9) <= 19 && strspn(e + 9, "0123456789") == strlen(e + 9);
}

/* Is url "http://<a peer's host:port>/<path>", with no query but the
 * master's signature (-volumesecret: passed on as given)? */
static bool pull_allowed(const char *url)
{
	const char *a = url + 7, *slash, *q = strchr(url, '?');
	if (strncmp(url, "http://", 7) || !(slash = strchr(a, '/')) || strchr(url, '#') ||
	    (q && !only_signature(q + 1)))
		return false;
	for (int i = 0; i < npeers; i++)
		if (strlen(peers[i]) == (size_t)(slash - a) && !strncmp(peers[i], a, (size_t)(slash - a)))
			return true;
	return false;
}

struct pull_sink {
	struct vol_put *put;
	int status;                    /* of the answer whose body arrives */
	int werr;                      /* the write's failure status, or 0 */
};

static bool pull_header(void *ctx, int status, const char *line, size_t len)
{
	struct pull_sink *k = ctx;
	(void)line;
	(void)len;
	k->status = status;
	return true;
}

static bool pull_body(void *ctx, const char *p, size_t n)
{
	struct pull_sink *k = ctx;
	if (k->status != 200)
		return true;                   /* an error page: dropped, never stored */
	k->werr = vol_put_write(k->put, p, n);
	return k->werr == 0;
}

/* GET the source into the PUT's temporary file, check the md5, commit:
 * the PUT's status, or 502 with nothing left when the source did not give
 * the whole blob (or the blob the md5 names).  Frees r->put. */
static int pull(struct req *r)
{
	struct pull_sink k = {.put = r->put};
	char err[256] = "", md5[33] = "";
	/* nosign: the URL as the master signed it (this volume's own secret
	 * must not vouch for a source the master never named) */
	struct httpc_call g = {.url = r->pull, .connect_ms = 5000, .stall_s = PULL_STALL_S,
			       .header = pull_header, .body = pull_body, .md5 = md5, .ctx = &k,
			       .nosign = true};
	int st = httpc_call(&g, err), url_len = (int)strcspn(r->pull, "?");
	if (st == 200 && !k.werr && (!r->pull_md5[0] || !strcmp(md5, r->pull_md5))) {
		r->pull_outcome = "done";
		memcpy(r->md5, md5, sizeof(md5));
		return vol_put_commit(r->put);
	}
	vol_put_abort(r->put);
	r->pull_outcome = "failed";
	if (k.werr)
		return k.werr;                 /* this disk's failure, logged */
	/* logged without the link's signature */
	if (st == 200)
		log_msg("pull %.*s -> %s: md5 %s, not %s: nothing stored", url_len, r->pull, r->path,
			md5, r->pull_md5);
	else if (st > 0)
		log_msg("pull %.*s -> %s: the source answered %d: nothing stored", url_len, r->pull,
			r->path, st);
	else
		log_msg("pull %.*s -> %s: %s: nothing stored", url_len, r->pull, r->path, err);
	if (st == 403 || st == 410) {   /* the source refused the link's signature */
		r->why = st == 403 ? "pull: the source refused the link (403)"
				   : "pull: the source link expired (410)";
		return st;
	}
	r->why = st == 404 ? "pull: the source has no such file" : "pull: the source failed";
	return st == 404 ? 404 : 502;
}

static void work(void *ctx, void *item)
{
	struct vol_server *s = ctx;
	struct req *r = item;
	if (r->m == M_MD5) {
		r->status = vol_fs_md5(&s->root, r->path, &r->fd, &r->st, r->md5);
	} else if (r->m == M_PUT) {
		r->status = vol_put_commit(r->put);
		r->put = NULL;
	} else if (r->m == M_PULL) {
		r->status = pull(r);
		r->put = NULL;
	} else {
		r->status = vol_fs_delete(&s->root, r->path);
	}
	r->synced = true;
	front_finish(&r->sl);
}

/* `HEAD /path?md5` (mkv verify): the md5 of the bytes, read just now by a
 * sync worker, as Content-Md5; the other headers as a HEAD's.  nginx
 * ignores the argument and answers a plain HEAD, without Content-Md5. */
static int send_md5(struct req *r)
{
	char date[HTTP_DATE_LEN];
	const struct front_hdr h[] = {
		{"Content-Type", "application/octet-stream"},
		{"Last-Modified", date},
		{"Content-Md5", r->md5},
	};
	int ok;
	http_date(r->st.st_mtime, date);
	ok = front_file(r->sl.conn, 200, h, 3, r->fd, 0, (uint64_t)r->st.st_size);
	if (ok < 0)
		return send_error_to(r->sl.conn, true, 500, NULL);
	r->fd = -1;                    /* the answer closes it */
	return ok;
}

/* A pull's answer: Mkv-Pull says how it went (so a client tells an
 * mkv-volume's answer from a server that knows no pull), and a stored
 * blob's md5 comes back as Content-Md5. */
static int send_pulled(struct req *r)
{
	struct front_hdr h[2] = {{"Mkv-Pull", r->pull_outcome ? r->pull_outcome : "failed"}};
	if (r->status >= 300)
		return send_error_hdr(r->sl.conn, false, r->status, r->why, h[0].name, h[0].value);
	h[1] = (struct front_hdr){"Content-Md5", r->md5};
	return front_send(r->sl.conn, r->status, h, 2, NULL, 0);
}

static bool has_body(struct MHD_Connection *c)
{
	const char *cl = front_header(c, "Content-Length");
	return (cl && strcmp(cl, "0")) || front_header(c, "Transfer-Encoding");
}

/* First call of a PUT, DELETE or other method: decide what can be decided
 * from the headers.  A refusal is sent once the body has been read, so
 * the connection stays open. */
static void begin_write(struct vol_server *s, struct req *r, const char *url)
{
	bool dir = false;
	int status = r->m == M_OTHER ? 405
		   : vol_path_clean(url, r->path, sizeof(r->path), &dir, &r->why);

	if (status)
		r->status = status;
	else if (r->m == M_MD5)
		r->status = dir ? 404 : 0;
	else if (r->m == M_DELETE)
		r->status = has_body(r->sl.conn) ? 415 : dir ? 409 : 0; /* no recursive delete */
	else if (dir) {
		r->status = 409;
		r->why = "a PUT path must not end in /";
	} else if (front_header(r->sl.conn, "Content-Range"))
		r->status = 501;
	else if (r->m == M_PULL && has_body(r->sl.conn))
		r->status = 400, r->why = "a PUT with Mkv-Pull has no body";
	else if (r->m == M_PULL && !pull_allowed(r->pull))
		r->status = 403, r->why = "Mkv-Pull names no volume of -peers";
	else
		r->put = vol_put_begin(&s->root, r->path, &r->status);
	if (r->m == M_PULL && r->status)
		r->pull_outcome = r->status == 403 ? "refused" : "failed";
}

/* ---- the route ---- */

/* A request's link signature (-volumesecret), and whether it asks for
 * the md5 (a bare ?md5; signed, `?md5&md5=H&expires=T`).  The first of
 * each, raw, as nginx's $arg_md5 and $arg_expires. */
struct sig {
	const char *md5, *expires;
	bool hash;
};

static void sig_arg(void *cls, const char *k, const char *v)
{
	struct sig *g = cls;
	if (!strcmp(k, "md5") && (!v || !*v))
		g->hash = true;
	else if (!strcmp(k, "md5") && !g->md5)
		g->md5 = v;
	else if (!strcmp(k, "expires") && !g->expires)
		g->expires = v ? v : "";
}

/* 0 when the request is signed (or no secret is set), else 403 or 410
 * with *why.  A path that does not clean is left to the route's own 400:
 * it touches nothing either way. */
static int signature(struct MHD_Connection *c, const char *method, const char *url,
		     struct sig *g, const char **why)
{
	char uri[PATH_BYTES + 2];
	bool dir;
	size_t n;
	front_args(c, sig_arg, g);
	if (vol_path_clean(url, uri + 1, sizeof(uri) - 2, &dir, why))
		return 0;
	uri[0] = '/';                 /* nginx's $uri: decoded, normalised */
	n = strlen(uri);
	if (dir && n > 1)
		uri[n++] = '/', uri[n] = '\0';
	return volsign_check(uri, method, g->md5, g->expires, why);
}

static void *claim(struct MHD_Connection *c, const char *method, const char *url,
		   const char *query)
{
	bool head = !strcmp(method, "HEAD"), md5;
	struct sig sg = {NULL, NULL, false};
	const char *why;
	struct req *r;
	int st;
	(void)query;
	/* As nginx: 400 and close (where the body ends is in doubt); 501 for
	 * another coding, whose body libmicrohttpd would take to run until
	 * the client closes. */
	static const char *const head_why[FRONT_HEAD_TARGET + 1] = {
		[FRONT_HEAD_CODING] = "Transfer-Encoding other than chunked is not supported",
		[FRONT_HEAD_LENGTHS] = "Content-Length given twice, differently",
		[FRONT_HEAD_BOTH] = "both Transfer-Encoding and Content-Length",
		[FRONT_HEAD_HOST] = "an HTTP/1.1 request needs a Host header",
	};
	enum front_head bad = front_head_error(c);
	if (head_why[bad]) {
		send_error_to(c, head, bad == FRONT_HEAD_CODING ? 501 : 400, head_why[bad]);
		return &refused;
	}
	/* before anything is looked at: signed by the master, or refused */
	if (volsign_on() && (st = signature(c, method, url, &sg, &why))) {
		send_error_to(c, head, st, why);
		return &refused;
	}
	md5 = head && (volsign_on() ? sg.hash : front_has_arg(c, "md5"));
	if (!md5 && (head || !strcmp(method, "GET"))) {
		struct read_req *g = xmalloc(sizeof(*g));
		*g = (struct read_req){head ? M_HEAD : M_GET, c, url};
		return g;
	}
	r = xcalloc(1, sizeof(*r));
	r->sl.conn = c;
	pthread_mutex_init(&r->sl.mu, NULL);
	r->fd = -1;
	r->m = md5 ? M_MD5
	     : !strcmp(method, "PUT") ? M_PUT
	     : !strcmp(method, "DELETE") ? M_DELETE : M_OTHER;
	if (r->m == M_PUT && front_header(c, "Mkv-Pull")) {
		const char *want = front_header(c, "Mkv-Pull-Md5");
		r->m = M_PULL;
		r->pull = xstrdup(front_header(c, "Mkv-Pull"));
		if (want && strlen(want) == 32)
			snprintf(r->pull_md5, sizeof(r->pull_md5), "%s", want);
	}
	begin_write(server, r, url);
	return r;
}

static int handler(void *req, const char *upload, size_t *upload_size)
{
	struct vol_server *s = server;
	struct req *r = req;
	if (r->m == M_REFUSED)
		return FRONT_NO;
	if (r->m == M_GET || r->m == M_HEAD) {
		struct read_req *g = req;
		if (*upload_size) {          /* a GET with a body: ignore it */
			*upload_size = 0;
			return FRONT_YES;
		}
		return answer_read(s, g->conn, g->url, g->m == M_HEAD);
	}
	if (*upload_size) {
		/* libmicrohttpd cannot answer mid-body: after a failed write the
		 * rest of the body is read and dropped, then the error is sent. */
		if (r->put) {
			r->status = vol_put_write(r->put, upload, *upload_size);
			if (r->status) {
				vol_put_abort(r->put);
				r->put = NULL;
			}
		}
		*upload_size = 0;
		return FRONT_YES;
	}
	if (r->m == M_MD5 && r->status == 200)
		return send_md5(r);
	if (r->synced || r->status) {
		if (r->m == M_PULL)
			return send_pulled(r);
		if (r->status >= 300)
			return send_error_to(r->sl.conn, r->m == M_MD5, r->status, r->why);
		return front_send(r->sl.conn, r->status, NULL, 0, NULL, 0);
	}
	/* The whole body is in (a PUT) or there is none (a DELETE, a pull).
	 * Woken by work's front_finish: a queue runs every item it took, and
	 * vol_free waits for them. */
	return front_queue(&r->sl, r->m == M_MD5 ? s->hash : r->m == M_PULL ? s->pull : s->sync,
			   r) == 0 ? FRONT_YES : FRONT_NO;
}

static void done(void *req)
{
	struct req *r = req;
	if (r->m == M_REFUSED)
		return;
	if (r->m == M_GET || r->m == M_HEAD) {
		free(req);
		return;
	}
	vol_put_abort(r->put);      /* a PUT cut off: its temporary file goes */
	if (r->fd >= 0)
		close(r->fd);
	free(r->pull);
	/* front_finish may still be between waking the connection and its unlock. */
	pthread_mutex_lock(&r->sl.mu);
	pthread_mutex_unlock(&r->sl.mu);
	pthread_mutex_destroy(&r->sl.mu);
	free(r);
}

static const struct front_route vol_route = {claim, handler, NULL, done};

/* ---- start and stop ---- */

/* Waits for the work queued (which wakes its sleepers). */
static void queues_end(struct vol_server *s)
{
	struct spawn_queue **q[] = {&s->sync, &s->hash, &s->pull};
	for (int i = 0; i < 3; i++)
		if (*q[i])
			spawn_queue_end(*q[i]);
	s->sync = s->hash = s->pull = NULL;
}

static void vol_free(struct vol_server *s)
{
	queues_end(s);
	close(s->root.fd);
	free(s->dir);
	free(s);
	server = NULL;
}

struct vol_server *vol_server_start(int port, const char *dir, uint64_t idle_ms,
				   const char *metrics, const char *accesslog, const char *tls)
{
	struct vol_server *s;
	struct front_opts o = {0};

	if (server)
		return NULL;                 /* one front per process */
	o.max_conns = front_nofile(MAX_CONNECTIONS, 2);   /* a socket and a file each */
	if (!tls)   /* TLS bodies are not sendfile's: nothing for wire.c to tune */
		wire_init((unsigned long)sysconf(_SC_OPEN_MAX), front_version());

	s = xcalloc(1, sizeof(*s));
	s->dir = xstrdup(dir);
	s->port = port;
	s->tls = tls != NULL;
	if (vol_root_open(&s->root, s->dir) < 0) {
		free(s->dir);
		free(s);
		return NULL;
	}
	s->sync = spawn_queue(SYNC_WORKERS, work, s);
	s->hash = spawn_queue(HASH_WORKERS, work, s);
	s->pull = spawn_queue(PULL_WORKERS, work, s);
	server = s;
	o.port = port;
	o.route = &vol_route;
	o.conn_memory = CONN_MEMORY;
	o.idle_ms = idle_ms;
	o.threads = true;        /* wire.c follows libmicrohttpd's calls in that mode */
	o.opened = wire_reset;   /* a new connection may have a closed one's socket number */
	o.metrics = metrics;
	o.accesslog = accesslog;
	o.tls = tls;
	o.pages = page_pages;
	vol_status_start(s->root.fd, s->dir, port, metrics != NULL);
	if (front_start(&o) < 0) {
		vol_free(s);
		return NULL;
	}
	log_msg("serving %s on port %d", s->dir, port);
	return s;
}

void vol_server_stop(struct vol_server *s)
{
	/* As nginx on SIGTERM: no drain.  The writes being made durable
	 * finish (the queues' end) and are answered; no new one starts. */
	front_drain(0);
	queues_end(s);
	front_stop();
	page_stop();
	vol_free(s);
}
