/* server.c -- see server.h.
 *
 * libmicrohttpd runs an epoll thread pool.  Reads (open, fstat, sendfile)
 * and the writes of a PUT body happen on those threads: they do not wait
 * for the disk.  What does -- the fsyncs that make a PUT or DELETE durable
 * -- runs on a work queue of the thread pool (common/spawn.h) while the
 * connection is suspended, so a slow disk never stalls the other
 * connections of that thread.
 *
 * Every response is queued on the second call of the access handler or
 * later: queued on the first, libmicrohttpd closes the connection. */
#include "server.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/reaper.h"
#include "../common/spawn.h"
#include "../common/util.h"
#include "fs.h"
#include "listing.h"
#include "path.h"
#include "range.h"
#include "wire.h"

#define SYNC_WORKERS 32          /* fsyncs in flight at once */
#define HASH_WORKERS 4           /* HEAD ?md5 files being read at once */
#define MAX_CONNECTIONS 16384    /* or what the fd limit allows: 2 fds each */
#define CONN_MEMORY (32 * 1024)  /* request line + headers + one body buffer */
#define PATH_BYTES 4096

enum method { M_PUT, M_DELETE, M_MD5, M_OTHER };

/* A PUT, DELETE or unsupported method; GET and HEAD need no state. */
struct req {
	struct MHD_Connection *conn;
	enum method m;
	int status;                    /* the answer, once known */
	const char *why;               /* its reason, or NULL for the default */
	bool synced;                   /* a worker has finished with it */
	struct vol_put *put;
	int fd;                        /* M_MD5: the file, once hashed */
	struct stat st;
	char md5[33];
	char path[PATH_BYTES];
};

struct vol_server {
	struct MHD_Daemon *d;
	struct vol_root root;
	char *dir;
	int port;
	pthread_mutex_t mu;            /* no push once stopping: the queues end */
	bool stopping;
	/* PUT and DELETE wait for their fsyncs in sync.  HEAD ?md5 (mkv
	 * verify) reads whole files: hash has threads of its own, so a
	 * verify never holds up the fsyncs of writes. */
	struct spawn_queue *sync, *hash;
	struct reaper *reaper;         /* cuts off a request head slower than -idletimeout */
};

/* c's reaper entry: a request head is awaited from now, or is in. */
static void conn_waiting(struct MHD_Connection *c, bool waiting)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	reaper_waiting(ci ? ci->socket_context : NULL, waiting);
}

static char get_marker;          /* *con_cls of a GET */
static char head_marker;         /* ... of a HEAD */

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

static enum MHD_Result send_resp(struct MHD_Connection *c, int status, struct MHD_Response *resp)
{
	enum MHD_Result ok = MHD_queue_response(c, (unsigned int)status, resp);
	MHD_destroy_response(resp);
	return ok;
}

/* A one-line text/plain reason for a 3xx/4xx/5xx, with one more header
 * when name is not NULL (and Allow for a 405).  To a HEAD, no body:
 * Content-Length: 0, as minikeyvalue answers every HEAD error. */
static enum MHD_Result send_error_hdr(struct MHD_Connection *c, bool head, int status,
				      const char *why, const char *name, const char *value)
{
	char line[256];
	int n = head ? 0 : snprintf(line, sizeof(line), "%s\n", why ? why : status_reason(status));
	struct MHD_Response *resp =
		MHD_create_response_from_buffer((size_t)n, line, MHD_RESPMEM_MUST_COPY);
	if (!head)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
	if (status == 405)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD, PUT, DELETE");
	if (name)
		MHD_add_response_header(resp, name, value);
	return send_resp(c, status, resp);
}

static enum MHD_Result send_error_to(struct MHD_Connection *c, bool head, int status,
				     const char *why)
{
	return send_error_hdr(c, head, status, why, NULL, NULL);
}

static int conn_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci =
		MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

static const char *header(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

static ssize_t list_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	ssize_t n = vol_list_read(cls, buf, max);
	(void)pos;
	if (n < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return n ? n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void list_free(void *cls)
{
	vol_list_close(cls);
}

static bool has_arg(struct MHD_Connection *c, const char *name)
{
	return MHD_lookup_connection_value_n(c, MHD_GET_ARGUMENT_KIND, name, strlen(name), NULL,
					     NULL) == MHD_YES;
}

static enum MHD_Result send_listing(struct vol_server *s, struct MHD_Connection *c,
				    const char *path, bool head)
{
	int status;
	int mode = !has_arg(c, "recursive") ? 0
		 : has_arg(c, "tmp") ? VOL_LIST_DEEP | VOL_LIST_TMP : VOL_LIST_DEEP;
	struct vol_list *l = vol_list_open(&s->root, path, mode, &status);
	struct MHD_Response *resp;
	if (!l)
		return send_error_to(c, head, status, NULL);
	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, list_read, l,
						 list_free);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	/* libmicrohttpd 0.9.75 ends a chunked answer to a HEAD with a body of
	 * its own ("0\r\n\r\n"), which the client would take for the start of
	 * the next answer: to a HEAD, no chunks (as nginx: no length either),
	 * and the connection closes. */
	if (head)
		MHD_set_response_options(resp, MHD_RF_HTTP_VERSION_1_0_ONLY, MHD_RO_END);
	return send_resp(c, 200, resp);
}

/* The query string again, from its arguments (undecoded: no_unescape). */
static enum MHD_Result arg_append(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	struct buf *b = cls;
	(void)kind;
	buf_printf(b, "%s%s%s%s", b->len ? "&" : "?", key, value ? "=" : "", value ? value : "");
	return MHD_YES;
}

/* nginx answers a directory named without its slash with a 301 to the
 * name with it and the same query, on the Host the client used (else the
 * address it reached) and the port we listen on. */
static enum MHD_Result send_dir_redirect(struct vol_server *s, struct MHD_Connection *c,
					 const char *url, bool head)
{
	const char *host = header(c, MHD_HTTP_HEADER_HOST);
	char port[16] = "", addr[INET_ADDRSTRLEN] = "";
	struct buf query = {0}, path = {0};
	size_t hlen;
	enum MHD_Result ok;
	if (!host || !*host) {
		struct sockaddr_in sa;
		socklen_t sl = sizeof(sa);
		int fd = conn_fd(c);
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
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, arg_append, &query);
	buf_printf(&path, "http://%.*s%s", (int)hlen, host, port);
	/* The path as it came (still encoded), but for bytes a URL must not
	 * hold raw: those are escaped, as nginx escapes them. */
	for (const unsigned char *u = (const unsigned char *)url; *u; u++) {
		if (*u > ' ' && *u < 0x7f && *u != '"')
			buf_append(&path, u, 1);
		else
			buf_printf(&path, "%%%02X", *u);
	}
	buf_printf(&path, "/%s", query.len ? query.data : "");
	ok = send_error_hdr(c, head, 301, NULL, MHD_HTTP_HEADER_LOCATION, path.data);
	buf_free(&query);
	buf_free(&path);
	return ok;
}

static enum MHD_Result send_file(struct vol_server *s, struct MHD_Connection *c,
				 const char *url, const char *path, bool head)
{
	struct MHD_Response *resp;
	struct stat st;
	char etag[64], date[HTTP_DATE_LEN], cr[96];
	const char *ius, *im, *inm, *ims, *range, *ifr;
	uint64_t start = 0, len, size;
	enum vol_range rr;
	int fd, sock, status = vol_fs_open(&s->root, path, &fd, &st);

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
	ius = header(c, MHD_HTTP_HEADER_IF_UNMODIFIED_SINCE);
	im = header(c, MHD_HTTP_HEADER_IF_MATCH);
	if ((ius && vol_http_time(ius) < st.st_mtime) || (im && !vol_etag_listed(im, etag, false))) {
		close(fd);
		return send_error_to(c, head, 412, NULL);
	}
	inm = header(c, MHD_HTTP_HEADER_IF_NONE_MATCH);
	ims = header(c, MHD_HTTP_HEADER_IF_MODIFIED_SINCE);
	if ((inm || ims) && (!ims || vol_http_time(ims) == st.st_mtime) &&
	    (!inm || vol_etag_listed(inm, etag, true))) {
		close(fd);
		resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
		status = 304;
		goto headers;
	}
	range = header(c, MHD_HTTP_HEADER_RANGE);
	ifr = header(c, MHD_HTTP_HEADER_IF_RANGE);
	/* As nginx: an If-Range ending in a quote is an ETag, compared
	 * exactly; else a date, which must be the file's time. */
	if (range && ifr &&
	    (*ifr && ifr[strlen(ifr) - 1] == '"' ? strcmp(ifr, etag) != 0
						 : vol_http_time(ifr) != st.st_mtime))
		range = NULL;
	rr = vol_range_parse(range, size, &start, &len);
	if (rr == VOL_RANGE_BAD) {
		close(fd);
		snprintf(cr, sizeof(cr), "bytes */%llu", (unsigned long long)size);
		return send_error_hdr(c, head, 416, NULL, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
	}
	if (rr == VOL_RANGE_ALL) {   /* a parse may have set them before giving up */
		start = 0;
		len = size;
	}
	/* sendfile(2) from fd; libmicrohttpd closes it with the response. */
	resp = MHD_create_response_from_fd_at_offset64(len, fd, start);
	if (!resp) {
		close(fd);
		return send_error_to(c, head, 500, NULL);
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	if (rr == VOL_RANGE_ONE) {
		snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", (unsigned long long)start,
			 (unsigned long long)(start + len - 1), (unsigned long long)size);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_RANGE, cr);
		status = 206;
	} else {
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
	}
	if (!head && len > 0 && (sock = conn_fd(c)) >= 0)
		wire_file_body(sock, fd, start + len);
headers:
	MHD_add_response_header(resp, MHD_HTTP_HEADER_LAST_MODIFIED, date);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
	return send_resp(c, status, resp);
}

static enum MHD_Result answer_read(struct vol_server *s, struct MHD_Connection *c,
				   const char *url, bool head)
{
	char path[PATH_BYTES];
	const char *why;
	bool dir;
	int status = vol_path_clean(url, path, sizeof(path), &dir, &why);
	if (status)
		return send_error_to(c, head, status, why);
	return dir ? send_listing(s, c, path, head) : send_file(s, c, url, path, head);
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
	} else {
		r->status = vol_fs_delete(&s->root, r->path);
	}
	r->synced = true;
	MHD_resume_connection(r->conn);
}

/* Suspend the connection and hand r to a worker, which resumes it. */
static bool queue_push(struct vol_server *s, struct req *r)
{
	bool ok;
	pthread_mutex_lock(&s->mu);
	if ((ok = !s->stopping)) {
		MHD_suspend_connection(r->conn);
		spawn_queue_push(r->m == M_MD5 ? s->hash : s->sync, r);
	}
	pthread_mutex_unlock(&s->mu);
	return ok;
}

/* `HEAD /path?md5` (mkv verify): the md5 of the bytes, read just now by a
 * sync worker, as Content-Md5; the other headers as a HEAD's.  nginx
 * ignores the argument and answers a plain HEAD, without Content-Md5. */
static enum MHD_Result send_md5(struct req *r)
{
	char date[HTTP_DATE_LEN];
	struct MHD_Response *resp =
		MHD_create_response_from_fd_at_offset64((uint64_t)r->st.st_size, r->fd, 0);
	if (!resp)
		return send_error_to(r->conn, true, 500, NULL);
	r->fd = -1;                    /* the response closes it */
	http_date(r->st.st_mtime, date);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_LAST_MODIFIED, date);
	MHD_add_response_header(resp, "Content-Md5", r->md5);
	return send_resp(r->conn, 200, resp);
}

static bool has_body(struct MHD_Connection *c)
{
	const char *cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
	return (cl && strcmp(cl, "0")) || header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING);
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
		r->status = has_body(r->conn) ? 415 : dir ? 409 : 0; /* no recursive delete */
	else if (dir) {
		r->status = 409;
		r->why = "a PUT path must not end in /";
	} else if (header(r->conn, MHD_HTTP_HEADER_CONTENT_RANGE))
		r->status = 501;
	else
		r->put = vol_put_begin(&s->root, r->path, &r->status);
}

struct lengths {
	const char *first;
	bool differ;
};

static enum MHD_Result length_cmp(void *cls, enum MHD_ValueKind kind, const char *key,
				  const char *value)
{
	struct lengths *l = cls;
	(void)kind;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) || !value)
		return MHD_YES;
	if (!l->first)
		l->first = value;
	else if (strcmp(l->first, value))
		l->differ = true;
	return l->differ ? MHD_NO : MHD_YES;
}

static bool lengths_differ(struct MHD_Connection *c)
{
	struct lengths l = {NULL, false};
	MHD_get_connection_values(c, MHD_HEADER_KIND, length_cmp, &l);
	return l.differ;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
				  const char *method, const char *version,
				  const char *upload, size_t *upload_size, void **con_cls)
{
	struct vol_server *s = cls;
	struct req *r = *con_cls;
	(void)version;

	if (!r) {
		bool md5 = !strcmp(method, "HEAD") && has_arg(c, "md5");
		conn_waiting(c, false);
		const char *te = header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING);
		/* libmicrohttpd takes a body of any other coding to run until the
		 * client closes: as nginx, 501 at once (and, answered before the
		 * body, the connection closes). */
		if (te && strcasecmp(te, "chunked"))
			return send_error_to(c, !strcmp(method, "HEAD"), 501,
					     "Transfer-Encoding other than chunked is not supported");
		/* Two lengths that differ leave where the body ends in doubt
		 * (libmicrohttpd takes the first): 400 and close, as nginx. */
		if (header(c, MHD_HTTP_HEADER_CONTENT_LENGTH) && lengths_differ(c))
			return send_error_to(c, !strcmp(method, "HEAD"), 400,
					     "Content-Length given twice, differently");
		if (!md5 && (!strcmp(method, "GET") || !strcmp(method, "HEAD"))) {
			*con_cls = method[0] == 'G' ? &get_marker : &head_marker;
			return MHD_YES;
		}
		r = xcalloc(1, sizeof(*r));
		r->conn = c;
		r->fd = -1;
		r->m = md5 ? M_MD5
		     : !strcmp(method, "PUT") ? M_PUT
		     : !strcmp(method, "DELETE") ? M_DELETE : M_OTHER;
		*con_cls = r;
		begin_write(s, r, url);
		return MHD_YES;
	}
	if ((void *)r == &get_marker || (void *)r == &head_marker) {
		if (*upload_size) {          /* a GET with a body: ignore it */
			*upload_size = 0;
			return MHD_YES;
		}
		return answer_read(s, c, url, (void *)r == &head_marker);
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
		return MHD_YES;
	}
	if (r->m == M_MD5 && r->status == 200)
		return send_md5(r);
	if (r->synced || r->status) {
		if (r->status >= 300)
			return send_error_to(c, r->m == M_MD5, r->status, r->why);
		return send_resp(c, r->status,
				 MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT));
	}
	/* The whole body is in (a PUT) or there is none (a DELETE). */
	return queue_push(s, r) ? MHD_YES : MHD_NO;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			 enum MHD_RequestTerminationCode toe)
{
	struct req *r = *con_cls;
	(void)cls;
	if (r && (void *)r != &get_marker && (void *)r != &head_marker) {
		vol_put_abort(r->put);      /* a PUT cut off: its temporary file goes */
		if (r->fd >= 0)
			close(r->fd);
		free(r);
	}
	*con_cls = NULL;
	conn_waiting(c, true);
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		conn_close_if_eof(conn_fd(c));
}

/* A new connection may have a closed one's socket number. */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
			  enum MHD_ConnectionNotificationCode code)
{
	struct vol_server *s = cls;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		wire_reset(conn_fd(c));
		*socket_context = reaper_add(s->reaper, conn_fd(c));
	} else {
		reaper_remove(s->reaper, *socket_context);
		*socket_context = NULL;
	}
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char line[512];
	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	line[strcspn(line, "\n")] = '\0';
	log_msg("libmicrohttpd: %s", line);
}

/* The path is taken raw and decoded by vol_path_clean, in one place. */
static size_t no_unescape(void *cls, struct MHD_Connection *c, char *s)
{
	(void)cls, (void)c;
	return strlen(s);
}

/* Cut off a request with absurdly many query arguments (see util.h). */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	int fd;
	(void)cls;
	if (uri_has_too_many_args(uri) && (fd = conn_fd(c)) >= 0)
		shutdown(fd, SHUT_RDWR);
	return NULL;
}

struct vol_server *vol_server_start(int port, const char *dir, uint64_t idle_ms)
{
	struct vol_server *s = xcalloc(1, sizeof(*s));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int threads = ncpu > 1 ? (unsigned int)ncpu : 1, conns = MAX_CONNECTIONS;
	struct rlimit nofile = {1024, 1024};   /* if getrlimit fails */

	/* Beyond its limit libmicrohttpd stops accepting: clients then hang in
	 * the listen backlog.  Take as many descriptors as we may. */
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
		getrlimit(RLIMIT_NOFILE, &nofile);
		if (nofile.rlim_cur < 2 * (rlim_t)conns + 256)
			conns = nofile.rlim_cur > 512 ? (unsigned int)(nofile.rlim_cur - 256) / 2 : 128;
	}
	wire_init((unsigned long)nofile.rlim_cur, MHD_get_version());

	s->dir = xstrdup(dir);
	s->port = port;
	if (vol_root_open(&s->root, s->dir) < 0) {
		free(s->dir);
		free(s);
		return NULL;
	}
	pthread_mutex_init(&s->mu, NULL);
	s->reaper = reaper_start(idle_ms);
	s->sync = spawn_queue(SYNC_WORKERS, work, s);
	s->hash = spawn_queue(HASH_WORKERS, work, s);
	s->d = MHD_start_daemon(
		MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_TURBO | MHD_ALLOW_SUSPEND_RESUME |
			MHD_USE_ERROR_LOG,
		(uint16_t)port, NULL, NULL, on_request, s,
		MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, s,
		MHD_OPTION_THREAD_POOL_SIZE, threads,
		MHD_OPTION_CONNECTION_LIMIT, conns,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)(idle_ms / 1000),
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
		MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
		MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
		MHD_OPTION_UNESCAPE_CALLBACK, no_unescape, s,
		MHD_OPTION_URI_LOG_CALLBACK, on_uri, s,
		MHD_OPTION_END);
	if (!s->d) {
		log_msg("cannot listen on port %d", port);
		vol_server_stop(s);
		return NULL;
	}
	log_msg("serving %s on port %d", s->dir, port);
	return s;
}

void vol_server_stop(struct vol_server *s)
{
	pthread_mutex_lock(&s->mu);
	s->stopping = true;
	pthread_mutex_unlock(&s->mu);
	spawn_queue_end(s->sync);   /* every suspended connection resumed */
	spawn_queue_end(s->hash);
	if (s->d)
		MHD_stop_daemon(s->d);
	reaper_stop(s->reaper);   /* after: the daemon's last closes leave its ring */
	pthread_mutex_destroy(&s->mu);
	close(s->root.fd);
	free(s->dir);
	free(s);
}
