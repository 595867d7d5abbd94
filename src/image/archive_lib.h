/* libarchive, the reader of a layer's tar (untar.c), loaded with dlopen
 * the first time a layer is unpacked (archive_lib.c): linked, it and the
 * compression libraries it brings would be loaded by every `agentbox run`.
 * Only its reading is used, and only the tar formats and the gzip filter;
 * what lands on disk is written by untar.c, never by archive_write_disk.
 * The header is the -dev package's; the library is libarchive13's. */
#ifndef AB_ARCHIVE_LIB_H
#define AB_ARCHIVE_LIB_H

#include <archive.h>
#include <archive_entry.h>
#include <stdbool.h>
#include <stddef.h>

#define ARCHIVE_LIB_SONAME "libarchive.so.13"

#define ARCHIVE_LIB_FUNCS(X)                                                                       \
	X(archive_read_new)                                                                        \
	X(archive_read_free)                                                                       \
	X(archive_read_support_format_tar)                                                         \
	X(archive_read_append_filter)                                                              \
	X(archive_read_open)                                                                       \
	X(archive_read_next_header)                                                                \
	X(archive_read_data)                                                                       \
	X(archive_error_string)                                                                    \
	X(archive_set_error)                                                                       \
	X(archive_entry_pathname)                                                                  \
	X(archive_entry_hardlink)                                                                  \
	X(archive_entry_symlink)                                                                   \
	X(archive_entry_filetype)                                                                  \
	X(archive_entry_perm)                                                                      \
	X(archive_entry_size)                                                                      \
	X(archive_entry_rdevmajor)                                                                 \
	X(archive_entry_rdevminor)                                                                 \
	X(archive_entry_sparse_count)

struct archive_lib {
#define ARCHIVE_LIB_FIELD(f) __typeof__(f) *f;
	ARCHIVE_LIB_FUNCS(ARCHIVE_LIB_FIELD)
#undef ARCHIVE_LIB_FIELD
};

/* The table, loaded once per process; NULL with why filled (naming the
 * package to install) when it cannot be. */
const struct archive_lib *archive_lib_load(char *why, size_t len);

#endif
