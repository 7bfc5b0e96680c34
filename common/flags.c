/* flags.c -- see flags.h. */
#include "flags.h"
#include "util.h"
#include "version.h"   /* generated: $(B)/version.h, by tools/version.sh */

const char mkv_version[] = MKV_VERSION, mkv_commit[] = MKV_COMMIT;
const char mkv_server[] = "mkv/" MKV_VERSION;

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f, const struct flag *t, const char *head)
{
	fputs(head, f);
	for (; t->name; t++) {
		char left[40];
		if (!t->help)
			continue;
		snprintf(left, sizeof(left), "-%s%s%s", t->name, t->arg ? " " : "",
			 t->arg ? t->arg : "");
		fprintf(f, "  %-19s %s\n", left, t->help);
	}
	fprintf(f, "  %-19s %s\n", "-version", "print the version and the commit built from, and exit");
}

void flags_fail(const char *prog, const char *head, const char *fmt, ...)
{
	va_list ap;
	const char *nl = strchr(head, '\n');
	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%.*s", nl ? (int)(nl - head + 1) : (int)strlen(head), head);
	exit(2);
}

static bool parse_bool(const char *v, bool *out)
{
	static const char *const yes[] = {"true", "1", "t", "TRUE", "True", "T"};
	static const char *const no[] = {"false", "0", "f", "FALSE", "False", "F"};
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (!strcmp(v, yes[i]))
			return *out = true;
		if (!strcmp(v, no[i]))
			return !(*out = false);
	}
	return false;
}

/* Store v into f's destination; false when v is not a valid value. */
static bool set(const struct flag *f, const char *v)
{
	uint64_t n;
	switch (f->kind) {
	case FLAG_BOOL:
		return parse_bool(v, f->dst);
	case FLAG_STR:
		*(const char **)f->dst = v;
		return true;
	case FLAG_INT:
		if (!parse_u64(v, f->min, f->max, &n))
			return false;
		*(int *)f->dst = (int)n;
		return true;
	case FLAG_U64:
		return parse_u64(v, f->min, f->max, f->dst);
	case FLAG_DURATION:
		return parse_duration_ms(v, &n) && n >= f->min && (*(uint64_t *)f->dst = n, true);
	case FLAG_MBPS: {
		char *end;
		double mb = strtod(v, &end);
		if (end == v || *end || !(mb > 0 && mb < 1e9))
			return false;
		*(uint64_t *)f->dst = (uint64_t)(mb * 1e6);
		return true;
	}
	}
	return false;
}

int flags_parse(const struct flag *t, int argc, char **argv, const char *prog,
		const char *head, char **pos, int npos, int flags_until)
{
	int n = 0;
	bool dashdash = false;
	for (int i = 1; i < argc; i++) {
		char *a = argv[i], *name, *val;
		const struct flag *f;
		if (!dashdash && !strcmp(a, "--") && n < flags_until) {
			dashdash = true;     /* Go's flag: "--" ends the flags */
			continue;
		}
		if (a[0] != '-' || !a[1] || dashdash || n >= flags_until) {
			if (n >= npos)
				flags_fail(prog, head, "unexpected argument %s", a);
			pos[n++] = a;
			continue;
		}
		name = a + 1 + (a[1] == '-');
		val = strchr(name, '=');
		if (val)
			*val++ = '\0';
		if (!strcmp(name, "h") || !strcmp(name, "help")) {
			usage(stdout, t, head);
			exit(0);
		}
		if (!strcmp(name, "version")) {
			printf("%s %s (commit %s)\n", prog, MKV_VERSION, MKV_COMMIT);
			exit(0);
		}
		for (f = t; f->name && strcmp(f->name, name); f++)
			;
		if (!f->name)
			flags_fail(prog, head, "flag provided but not defined: -%s", name);
		if (!val && f->kind == FLAG_BOOL)
			val = "true";        /* a boolean takes no separate value */
		if (!val) {
			if (i + 1 >= argc)
				flags_fail(prog, head, "flag needs an argument: -%s", name);
			val = argv[++i];
		}
		if (!set(f, val))
			flags_fail(prog, head, "invalid value \"%s\" for flag -%s", val, name);
	}
	return n;
}
