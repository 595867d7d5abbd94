/* Build time: the shipped seccomp profiles compiled into C data
 * (tools/seccomp-compile), the table seccomp_bpf.c copies a program from
 * instead of compiling the profile at run time. */
#include "seccomp/seccomp_bpf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/error.h"
#include "seccomp/seccomp_guard.h"
#include "seccomp/seccomp_internal.h"
#include "util/util.h"

static void emit_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++)
		fprintf(out, *s == '"' || *s == '\\' ? "\\%c" : "%c", *s);
	fputc('"', out);
}

/* One profile's program, errnos and notices as C data named by index i;
 * its entry of the table is appended to table. */
static void emit_profile(FILE *out, struct loader *l, const char *buf, size_t n, size_t i,
			 FILE *table)
{
	fprintf(out, "static const struct sock_filter f%zu[] = {\n", i);
	for (unsigned k = 0; k < l->p->prog.len; k++) {
		const struct sock_filter *f = &l->p->prog.filter[k];
		fprintf(out, "\t{%#x, %u, %u, %#x},\n", f->code, f->jt, f->jf, f->k);
	}
	fprintf(out, "};\nstatic const struct ab_seccomp_errno e%zu[] = {\n", i);
	for (size_t k = 0; k < l->p->n_errnos; k++)
		fprintf(out, "\t{\"%s\", %d},\n", l->p->errnos[k].name, l->p->errnos[k].err);
	fprintf(out, "\t{\"\", 0}};\n");
	char unknown[32] = "NULL";
	if (l->unknown) {
		snprintf(unknown, sizeof(unknown), "u%zu", i);
		fprintf(out, "static const char u%zu[] = ", i);
		emit_string(out, l->unknown);
		fprintf(out, ";\n");
	}
	fprintf(table, "\t{%#llxULL, %zu, true, \"%s\", f%zu, %u, %s, %d, e%zu, %zu, %s},\n",
		(unsigned long long)secprof_hash(buf, n), n, l->native, i, l->p->prog.len,
		l->p->notify ? "true" : "false", l->p->default_errno, i, l->p->n_errnos, unknown);
}

/* The setid guard (seccomp_guard.h) as C data, when libseccomp knew every syscall
 * it names; else an empty one, which the library compiles at run time. */
static int emit_setid_guard(FILE *out, struct ab_error *err)
{
	struct sock_fprog *g = NULL;
	bool complete = false;
	int r = seccomp_setid_guard_compile(&g, &complete, err);
	if (r < 0)
		return r;
	fprintf(out, "\nconst struct sock_filter ab_setid_guard_compiled[] = {\n");
	for (unsigned k = 0; complete && k < g->len; k++)
		fprintf(out, "\t{%#x, %u, %u, %#x},\n", g->filter[k].code, g->filter[k].jt,
			g->filter[k].jf, g->filter[k].k);
	fprintf(out, "\t{0, 0, 0, 0}};\nconst unsigned short ab_setid_guard_len = %u;\n",
		complete ? g->len : 0);
	free(g->filter);
	free(g);
	return 0;
}

int ab_seccomp_emit_c(FILE *out, char *const *paths, size_t n_paths, struct ab_error *err)
{
	cleanup_free char *table_text = NULL;
	size_t table_len = 0;
	FILE *table = open_memstream(&table_text, &table_len);
	if (!table)
		return ab_error_set(err, errno, "compiling the profiles");
	fprintf(out, "/* Made by tools/seccomp-compile at build time: do not edit. */\n"
		     "#include \"seccomp/seccomp_bpf.h\"\n\n");
	size_t n_out = 0;
	int r = 0;
	for (size_t i = 0; i < n_paths && r == 0; i++) {
		struct loader l = {.file = paths[i], .err = err};
		secprof_loader_init(&l);
		/* the program for kernels with user notification; a kernel
		 * without it compiles at run time */
		l.use_notify = true;
		l.optimize = true;
		if (!(l.p = calloc(1, sizeof(*l.p)))) {
			r = ab_error_set(err, ENOMEM, "compiling %s", paths[i]);
			break;
		}
		cleanup_free char *buf = NULL;
		size_t n = 0;
		r = secprof_read(&l, &buf, &n);
		if (r == 0)
			r = secprof_compile(&l, buf, n);
		if (r == 0 && l.kernel_dependent) /* depends on the kernel it runs on */
			fprintf(out, "/* %s: uses minKernel, compiled at run time */\n", paths[i]);
		else if (r == 0)
			emit_profile(out, &l, buf, n, n_out++, table);
		free(l.unknown);
		ab_seccomp_free(l.p);
	}
	if (fclose(table) != 0 && r == 0)
		r = ab_error_set(err, errno, "compiling the profiles");
	if (r == 0)
		r = emit_setid_guard(out, err);
	if (r < 0)
		return r;
	fprintf(out,
		"\nconst struct ab_seccomp_compiled ab_seccomp_compiled[] = {\n%s\t{0}};\n"
		"const size_t ab_seccomp_n_compiled = %zu;\n",
		table_text ? table_text : "", n_out);
	return ferror(out) ? ab_error_set(err, EIO, "writing the compiled profiles") : 0;
}
