/* synthvol.c -- synthetic volumes with no disk behind them, for the scale
 * measurements (docs/scale.md): `mkv rebuild` and `mkv rebalance` of
 * millions of keys without millions of files.
 *
 *   synthvol -n N -volumes 127.0.0.1:P1,127.0.0.1:P2,.. [-replicas 3]
 *            [-subvolumes 10]
 *
 * One process plays every volume named, each on its own port: it holds
 * the keys scale_key(i) = "/scale/%010u", 0 <= i < N (tools/mkindex.c's),
 * each on the volumes key2volume puts it, and answers as a stock nginx
 * volume would (SPEC §5): JSON directory listings of /, /svNN/, /svNN/xx/
 * and /svNN/xx/yy/ (queries ignored, as nginx does), each blob a "file" of
 * 1,024 bytes with the "md5" mkv-volume adds, md5(key) -- so a rebuild
 * from it writes the index mkindex writes, record for record.  The
 * health check's marker (.../.mkv) is there; a PUT is swallowed (201); a
 * blob itself is never served (404).  Prints "ready" once every port
 * listens.  Runs until killed. */
#include "../common/md5.h"
#include "../common/placement.h"
#include "../common/util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MTIME "Wed, 02 Dec 2026 09:00:00 GMT"

static int nvol, subvols = 10, replicas = 3;
static char *vols[64];
static uint32_t nb;          /* buckets: volume, subvolume, xx, yy */
static uint32_t *off, *ids;  /* the keys of bucket b: ids[off[b]..off[b+1]) */

static int key_of(uint32_t i, char *out)
{
	return snprintf(out, 32, "/scale/%010u", i);
}

/* The buckets of key i, one per replica, into b; how many. */
static int buckets(uint32_t i, uint32_t *b)
{
	static char locs[64][LOC_MAX];
	char key[32];
	unsigned char h[16];
	int klen = key_of(i, key), n;
	struct md5 *m = md5_new();
	md5_update(m, key, (size_t)klen);
	md5_final(m, h);
	md5_free(m);
	n = placement_volumes(key, (size_t)klen, vols, nvol, replicas, subvols, locs);
	for (int j = 0; j < n; j++) {
		int v = 0, sv = 0;
		for (v = 0; v < nvol; v++) {
			size_t l = strlen(vols[v]);
			if (!strncmp(locs[j], vols[v], l) && (locs[j][l] == '\0' || locs[j][l] == '/'))
				break;
		}
		if (subvols > 1)
			sv = (int)strtol(strrchr(locs[j], '/') + 3, NULL, 16);
		b[j] = (((uint32_t)v * (uint32_t)subvols + (uint32_t)sv) << 16) | (uint32_t)h[0] << 8 | h[1];
	}
	return n;
}

static void build(uint32_t n)
{
	uint32_t *bk = xmalloc((size_t)n * (size_t)replicas * sizeof(*bk)), b[64];
	nb = (uint32_t)nvol * (uint32_t)subvols << 16;
	off = xcalloc((size_t)nb + 1, sizeof(*off));
	for (uint32_t i = 0; i < n; i++) {
		int k = buckets(i, b);
		for (int j = 0; j < replicas; j++) {
			bk[(size_t)i * (size_t)replicas + (size_t)j] = j < k ? b[j] : UINT32_MAX;
			if (j < k)
				off[b[j] + 1]++;
		}
	}
	for (uint32_t x = 0; x < nb; x++)
		off[x + 1] += off[x];
	ids = xmalloc((size_t)off[nb] * sizeof(*ids) + 1);
	{
		uint32_t *fill = xmalloc((size_t)nb * sizeof(*fill));
		memcpy(fill, off, (size_t)nb * sizeof(*fill));
		for (size_t x = 0; x < (size_t)n * (size_t)replicas; x++)
			if (bk[x] != UINT32_MAX)
				ids[fill[bk[x]]++] = (uint32_t)(x / (size_t)replicas);
		free(fill);
	}
	free(bk);
}

static void entry(struct buf *o, bool *first, const char *name, bool dir)
{
	buf_printf(o, "%s\r\n{ \"name\":\"%s\", \"type\":\"%s\", \"mtime\":\"" MTIME "\"", *first ? "" : ",",
		   name, dir ? "directory" : "file");
	*first = false;
}

static bool used(uint32_t b0, uint32_t span)
{
	return off[b0 + span] > off[b0];
}

/* The listing of path on volume v into o: false when there is none. */
static bool listing(int v, const char *path, struct buf *o)
{
	bool first = true;
	int sv = 0, xx = -1, yy = -1, got;
	char name[40];
	const char *p = path;
	if (subvols > 1) {
		if (!strcmp(p, "/")) {
			buf_puts(o, "[");
			for (int s = 0; s < subvols; s++) {
				snprintf(name, sizeof(name), "sv%02X", s);
				entry(o, &first, name, true);
				buf_puts(o, " }");
			}
			buf_puts(o, "\r\n]");
			return true;
		}
		if (sscanf(p, "/sv%2x%n", (unsigned *)&sv, &got) != 1 || got != 5 || sv >= subvols)
			return false;
		p += 5;
	}
	if (strcmp(p, "/") && !(sscanf(p, "/%2x/%n", (unsigned *)&xx, &got) == 1 && got == 4 &&
				 (!p[4] || (sscanf(p + 4, "%2x/%n", (unsigned *)&yy, &got) == 1 &&
					    got == 3 && !p[7]))))
		return false;
	uint32_t base = ((uint32_t)v * (uint32_t)subvols + (uint32_t)sv) << 16;
	buf_puts(o, "[");
	if (xx < 0) {
		for (int x = 0; x < 256; x++)
			if (used(base | (uint32_t)x << 8, 256)) {
				snprintf(name, sizeof(name), "%02x", x);
				entry(o, &first, name, true);
				buf_puts(o, " }");
			}
	} else if (yy < 0) {
		for (int y = 0; y < 256; y++)
			if (used(base | (uint32_t)xx << 8 | (uint32_t)y, 1)) {
				snprintf(name, sizeof(name), "%02x", y);
				entry(o, &first, name, true);
				buf_puts(o, " }");
			}
	} else {
		uint32_t b = base | (uint32_t)xx << 8 | (uint32_t)yy;
		for (uint32_t k = off[b]; k < off[b + 1]; k++) {
			char key[32], path2[PATH_MAX_LEN], hash[33];
			int klen = key_of(ids[k], key);
			placement_path(key, (size_t)klen, path2);
			md5_hex(key, (size_t)klen, hash);
			entry(o, &first, path2 + 7, false);
			buf_printf(o, ", \"size\":1024, \"md5\":\"%s\" }", hash);
		}
	}
	buf_puts(o, "\r\n]");
	return true;
}

static bool send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

struct conn {
	int fd, vol;
};

/* One connection: requests one after the other (pipelined or not). */
static void *serve(void *arg)
{
	struct conn *c = arg;
	struct buf in = {0}, body = {0}, out = {0};
	size_t used_in = 0;
	for (;;) {
		char *end, method[16], target[1024];
		long long clen = 0;
		size_t head;
		while (!(end = in.data ? memmem(in.data + used_in, in.len - used_in, "\r\n\r\n", 4)
				       : NULL)) {
			char tmp[65536];
			ssize_t r = read(c->fd, tmp, sizeof(tmp));
			if (r <= 0)
				goto out;
			buf_append(&in, tmp, (size_t)r);
		}
		head = (size_t)(end + 4 - in.data) - used_in;
		if (sscanf(in.data + used_in, "%15s %1023s", method, target) != 2)
			goto out;
		{
			char *cl = strcasestr(in.data + used_in, "\r\ncontent-length:");
			if (cl && cl < end)
				clen = atoll(cl + 17);
		}
		while (in.len - used_in < head + (size_t)clen) {   /* a PUT's body */
			char tmp[65536];
			ssize_t r = read(c->fd, tmp, sizeof(tmp));
			if (r <= 0)
				goto out;
			buf_append(&in, tmp, (size_t)r);
		}
		used_in += head + (size_t)clen;
		target[strcspn(target, "?")] = '\0';
		body.len = out.len = 0;
		bool isget = !strcmp(method, "GET"), ishead = !strcmp(method, "HEAD");
		size_t tl = strlen(target);
		int st = 404;
		const char *ctype = "text/plain";
		if ((isget || ishead) && tl >= 5 && !strcmp(target + tl - 5, "/.mkv")) {
			st = 200;
			buf_puts(&body, "mkv volume marker\n");
		} else if (!strcmp(method, "PUT")) {
			st = 201;
		} else if ((isget || ishead) && target[tl - 1] == '/' &&
			   listing(c->vol, target, &body)) {
			st = 200;
			ctype = "application/json";
		}
		buf_printf(&out, "HTTP/1.1 %d %s\r\nServer: synthvol\r\nContent-Type: %s\r\n"
				 "Content-Length: %zu\r\n\r\n",
			   st, st == 200 ? "OK" : st == 201 ? "Created" : "Not Found", ctype, body.len);
		if (!ishead && body.len)
			buf_append(&out, body.data, body.len);
		if (!send_all(c->fd, out.data, out.len))
			goto out;
		if (used_in == in.len)
			in.len = used_in = 0;
	}
out:
	close(c->fd);
	buf_free(&in);
	buf_free(&body);
	buf_free(&out);
	free(c);
	return NULL;
}

struct port {
	int fd, vol;
};

static void *accepter(void *arg)
{
	struct port *p = arg;
	for (;;) {
		int fd = accept(p->fd, NULL, NULL);
		pthread_t t;
		struct conn *c;
		if (fd < 0)
			continue;
		c = xcalloc(1, sizeof(*c));
		c->fd = fd;
		c->vol = p->vol;
		if (pthread_create(&t, NULL, serve, c))
			die("synthvol: pthread_create failed");
		pthread_detach(t);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	unsigned long long n = 0;
	pthread_t t;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "-n"))
			n = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "-replicas"))
			replicas = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-subvolumes"))
			subvols = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "-volumes"))
			for (char *s = strtok(xstrdup(argv[i + 1]), ","); s && nvol < 64;
			     s = strtok(NULL, ","))
				vols[nvol++] = s;
		else
			break;
	}
	if (!n || n > UINT32_MAX || !nvol || replicas < 1 || replicas > nvol || subvols < 1 ||
	    subvols > 256) {
		fprintf(stderr, "usage: synthvol -n N -volumes 127.0.0.1:P1,.. [-replicas 3] "
				"[-subvolumes 10]\n");
		return 2;
	}
	build((uint32_t)n);
	for (int v = 0; v < nvol; v++) {
		const char *colon = strrchr(vols[v], ':');
		struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
		struct port *p = xcalloc(1, sizeof(*p));
		int one = 1;
		if (!colon)
			die("synthvol: %s: no port", vols[v]);
		a.sin_port = htons((uint16_t)atoi(colon + 1));
		p->vol = v;
		p->fd = socket(AF_INET, SOCK_STREAM, 0);
		setsockopt(p->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(p->fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(p->fd, 512) < 0)
			die("synthvol: cannot listen on %s: %m", vols[v]);
		if (pthread_create(&t, NULL, accepter, p))
			die("synthvol: pthread_create failed");
	}
	printf("ready\n");
	fflush(stdout);
	pause();
	return 0;
}
