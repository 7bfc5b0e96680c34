/* check_sigprop.c -- the signature check's property test (issue 41):
 * requests of random shape signed by botocore (tests/sig_cases.py: every
 * SigV4 payload mode, presigned links, SigV2's header and query), each
 * of which must verify, and one edit of each -- a byte of the path, a
 * query parameter, a signed header, the body, a chunk, the date, the
 * scope, the method, an unsigned x-amz-* header -- which must not.  A
 * request verifies when sig_check says SIG_OK for the test key and then
 * its body does what the payload mode says: a hex x-amz-content-sha256
 * is the body's SHA-256, and each aws-chunked chunk's signature chains
 * (sig_chunk), as s3/s3put.c checks them.
 *
 * Seeded: SIG_SEED (default 41) and SIG_CASES (default 1500 requests,
 * some 16,000 cases); a failure names the seed, the case and the edit. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>

#include "../common/keys.h"
#include "../common/sigv4.h"
#include "harness.h"

struct hdrs {
	json_t *h;   /* [[name, value], ...] */
};

static const char *hdr(void *cls, const char *name)
{
	struct hdrs *x = cls;
	size_t i;
	json_t *p;
	json_array_foreach(x->h, i, p)
		if (!strcasecmp(json_string_value(json_array_get(p, 0)), name))
			return json_string_value(json_array_get(p, 1));
	return NULL;
}

static void each(void *cls, void (*fn)(void *, const char *, const char *), void *arg)
{
	struct hdrs *x = cls;
	size_t i;
	json_t *p;
	json_array_foreach(x->h, i, p)
		fn(arg, json_string_value(json_array_get(p, 0)), json_string_value(json_array_get(p, 1)));
}

static unsigned char *unhex(const char *s, size_t *n)
{
	size_t l = strlen(s);
	unsigned char *b = xmalloc(l / 2 + 1);
	for (size_t i = 0; i + 1 < l; i += 2)
		b[i / 2] = (unsigned char)(hex_value(s[i]) << 4 | hex_value(s[i + 1]));
	*n = l / 2;
	return b;
}

static void sha(const unsigned char *p, size_t n, unsigned char out[32])
{
	struct sha256 *x = sha256_new();
	sha256_update(x, p, n);
	sha256_final(x, out);
}

/* Does the case verify, head and body?  *why: where it stopped. */
static bool verifies(const struct keyring *ring, json_t *c, const char **why)
{
	struct hdrs h = {json_object_get(c, "h")};
	json_t *q = json_object_get(c, "q"), *body = json_object_get(c, "body");
	json_t *chunks = json_object_get(c, "chunks"), *ch;
	struct sig_req r = {json_string_value(json_object_get(c, "m")),
			    json_string_value(json_object_get(c, "p")),
			    json_is_string(q) ? json_string_value(q) : NULL, hdr, each, &h,
			    json_integer_value(json_object_get(c, "now"))};
	struct sig_result s;
	size_t i;
	sig_check(ring, &r, &s);
	*why = s.why ? s.why : "the body";
	if (s.st != SIG_OK || !s.is_signed)
		return false;
	if (s.payload == PAYLOAD_SHA256) {
		unsigned char d[32];
		char hx[65];
		size_t n = 0;
		unsigned char *b = unhex(json_is_string(body) ? json_string_value(body) : "", &n);
		sha(b, n, d);
		free(b);
		to_hex(d, 32, hx);
		if (strcmp(hx, s.sha256))
			return false;
	}
	if (s.payload == PAYLOAD_CHUNKS) {
		if (!json_is_array(chunks))
			return false;
		json_array_foreach(chunks, i, ch) {
			unsigned char d[32];
			size_t n;
			unsigned char *b = unhex(json_string_value(json_array_get(ch, 0)), &n);
			const char *sig = json_string_value(json_array_get(ch, 1));
			sha(b, n, d);
			free(b);
			if (!sig_chunk(&s, d, sig, strlen(sig))) {
				*why = "a chunk";
				return false;
			}
		}
	}
	return true;
}

START_TEST(property)
{
	const char *seed = getenv("SIG_SEED") ? getenv("SIG_SEED") : "41";
	const char *n = getenv("SIG_CASES") ? getenv("SIG_CASES") : "1500";
	char *d = h_tmpdir(), *out = xasprintf("%s/cases.jsonl", d), *log = xasprintf("%s/log", d);
	char *py = h_root("tests/sig_cases.py"), *why = NULL, line[1 << 16];
	char *argv[] = {"/usr/bin/python3", py, (char *)seed, (char *)n, out, NULL};
	struct keyring *ring = keyring_parse("AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/"
					     "bPxRfiCYEXAMPLEKEY read,list,write /\n", "test", &why);
	int st, cases = 0, ok = 0;
	FILE *f;
	ck_assert_ptr_nonnull(ring);
	waitpid(h_spawn(argv, log), &st, 0);
	if (!WIFEXITED(st) || WEXITSTATUS(st))
		ck_abort_msg("tests/sig_cases.py failed:\n%s", h_read_file(log));
	ck_assert_ptr_nonnull(f = fopen(out, "r"));
	while (fgets(line, sizeof(line), f)) {
		json_error_t je;
		json_t *c = json_loads(line, 0, &je);
		const char *where;
		bool want, got;
		ck_assert_msg(c, "line %d: %s", cases + 1, je.text);
		want = json_is_true(json_object_get(c, "ok"));
		got = verifies(ring, c, &where);
		ck_assert_msg(got == want, "seed %s, case %d (%s): %s, want %s (%s)\n%s", seed,
			      cases + 1, json_string_value(json_object_get(c, "what")),
			      got ? "verifies" : "refused", want ? "verifies" : "refused", where, line);
		cases++;
		ok += want;
		json_decref(c);
	}
	fclose(f);
	ck_assert_msg(cases > 1000, "only %d cases", cases);
	fprintf(stderr, "sigprop: seed %s: %d cases, %d verify, %d refused\n", seed, cases, ok,
		cases - ok);
	keyring_put(ring);
	h_rmrf(d);
	free(d), free(out), free(log), free(py);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sigprop");
	TCase *tc = tcase_create("property");
	SRunner *sr;
	int failed;
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, property);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
