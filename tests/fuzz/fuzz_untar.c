/* A layer's blob as a hostile image serves it, unpacked by untar_layer
 * (src/image/untar.c: libarchive reads, agentbox's own no-follow writer
 * writes) into a fresh directory, as `--image` does. Whatever the bytes,
 * nothing lands outside that directory: the directory around it holds
 * only it and a sentinel directory, the sentinel file there keeps its one
 * link and its content (no hard link or write reached it); no set-id bit,
 * no device node but overlay's 0/0 whiteout, no file descriptor left open;
 * a failure has a message; a blob that does not hash to its digest is
 * always refused as such; what was unpacked can be removed. Byte 0: bit 0
 * the layer is gzip (else a plain tar), bit 1 its digest is wrong; then
 * the blob. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fuzz.h"
#include "image/sha256.h"
#include "image/untar.h"

static char base[64];
static int base_fd = -1;

static void remove_base(void)
{
	untar_remove(base_fd, "root", UNTAR_MAX_DEPTH + 4);
	untar_remove(base_fd, "beside", 2);
	rmdir(base);
}

/* base/ with beside/target in it: where an escape through ".." or a link
 * to it lands */
static void setup(void)
{
	snprintf(base, sizeof(base), "/tmp/ab-fuzz-untar.XXXXXX");
	FUZZ_CHECK(mkdtemp(base));
	base_fd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(base_fd >= 0);
	FUZZ_CHECK(mkdirat(base_fd, "beside", 0700) == 0);
	int fd = openat(base_fd, "beside/target", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	FUZZ_CHECK(fd >= 0 && write(fd, "x", 1) == 1);
	close(fd);
	atexit(remove_base);
}

/* The names in dir's sub, sorted, each followed by a space */
static void names(int dir, const char *sub, char *out, size_t len)
{
	struct dirent **list;
	int n = scandirat(dir, sub, &list, NULL, alphasort);
	FUZZ_CHECK(n >= 0);
	size_t used = 0;
	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(list[i]->d_name, ".") && strcmp(list[i]->d_name, ".."))
			used += (size_t)snprintf(out + used, used < len ? len - used : 0, "%s ",
						 list[i]->d_name);
		free(list[i]);
	}
	free(list);
}

/* Every node beneath dir, links not followed: no set-id bit, no device
 * but 0/0 character devices; how many there are. */
static size_t check_tree(int dir, int depth)
{
	FUZZ_CHECK(depth <= UNTAR_MAX_DEPTH + 1);
	int fd = openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	FUZZ_CHECK(fd >= 0);
	DIR *d = fdopendir(fd);
	FUZZ_CHECK(d);
	size_t count = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		struct stat st;
		FUZZ_CHECK(fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0);
		FUZZ_CHECK(!(st.st_mode & (S_ISUID | S_ISGID)));
		FUZZ_CHECK(!S_ISBLK(st.st_mode) && !S_ISSOCK(st.st_mode));
		FUZZ_CHECK(!S_ISCHR(st.st_mode) || st.st_rdev == makedev(0, 0));
		count++;
		if (S_ISDIR(st.st_mode)) {
			/* a directory the tar left without x for its owner */
			FUZZ_CHECK(fchmodat(fd, de->d_name, 0700, 0) == 0);
			int sub = openat(fd, de->d_name,
					 O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			FUZZ_CHECK(sub >= 0);
			count += check_tree(sub, depth + 1);
			close(sub);
		}
	}
	closedir(d);
	return count;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	FUZZ_CHECK(d);
	int n = 0;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0 || size > (1 << 20))
		return 0;
	if (base_fd < 0)
		setup();
	int fds = open_fds();
	struct oci_layer l = {.comp = data[0] & 1 ? OCI_GZIP : OCI_TAR};
	struct ab_error herr = {0};
	FUZZ_CHECK(sha256_hex_of(data + 1, size - 1, l.hex, &herr) == 0);
	bool wrong = data[0] & 2;
	if (wrong)
		l.hex[0] = l.hex[0] == '0' ? '1' : '0';
	int blob = memfd_create("layer", MFD_CLOEXEC);
	FUZZ_CHECK(blob >= 0 && write(blob, data + 1, size - 1) == (ssize_t)(size - 1));
	FUZZ_CHECK(lseek(blob, 0, SEEK_SET) == 0);
	FUZZ_CHECK(mkdirat(base_fd, "root", 0700) == 0);
	int root = openat(base_fd, "root", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	FUZZ_CHECK(root >= 0);

	struct untar_stats st = {0};
	struct ab_error err = {0};
	int r = untar_layer(blob, &l, "layer 1", root, &st, &err);
	close(blob);
	close(root);

	FUZZ_CHECK(r == 0 || (r < 0 && -r == err.code && err.msg[0]));
	if (wrong && !strstr(err.msg, "cannot load"))
		FUZZ_CHECK(r < 0 && strstr(err.msg, "does not match its digest"));
	FUZZ_CHECK(st.bytes <= UNTAR_MAX_BYTES && st.entries <= UNTAR_MAX_ENTRIES);
	/* nothing beside the layer's directory */
	char list[256];
	names(base_fd, ".", list, sizeof(list));
	FUZZ_CHECK(strcmp(list, "beside root ") == 0);
	names(base_fd, "beside", list, sizeof(list));
	FUZZ_CHECK(strcmp(list, "target ") == 0);
	struct stat t;
	char c = 0;
	int fd = openat(base_fd, "beside/target", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	FUZZ_CHECK(fd >= 0 && fstat(fd, &t) == 0 && read(fd, &c, 1) == 1);
	close(fd);
	FUZZ_CHECK(S_ISREG(t.st_mode) && t.st_nlink == 1 && t.st_size == 1 && c == 'x');

	int tree = openat(base_fd, "root", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	FUZZ_CHECK(tree >= 0);
	check_tree(tree, 0);
	close(tree);
	FUZZ_CHECK(open_fds() == fds);
	FUZZ_CHECK(untar_remove(base_fd, "root", UNTAR_MAX_DEPTH + 4) == 0);
	return 0;
}
