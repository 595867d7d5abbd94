/* Without libFuzzer: feed every file of the directories (or files) named on
 * the command line to the target once, so the seed corpus and every crash
 * input ever found run in the ordinary test suite. A missing directory is
 * skipped; no input at all is a failure. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		return -1;
	}
	/* exactly the file's size, so a sanitizer sees any read past the end */
	size_t n = (size_t)st.st_size;
	uint8_t *buf = malloc(n ? n : 1);
	size_t got = 0;
	while (buf && got < n) {
		ssize_t k = read(fd, buf + got, n - got);
		if (k <= 0)
			break;
		got += (size_t)k;
	}
	close(fd);
	if (!buf || got != n) {
		fprintf(stderr, "%s: cannot read it\n", path);
		free(buf);
		return -1;
	}
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	size_t inputs = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0)
			continue;
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]) < 0)
				return 1;
			inputs++;
			continue;
		}
		struct dirent **names;
		int n = scandir(argv[i], &names, NULL, by_name);
		if (n < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		for (int k = 0; k < n; k++) {
			char path[4096];
			snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
			struct stat fst;
			if (names[k]->d_name[0] != '.' && stat(path, &fst) == 0 &&
			    S_ISREG(fst.st_mode)) {
				if (run_file(path) < 0)
					return 1;
				inputs++;
			}
			free(names[k]);
		}
		free(names);
	}
	printf("%zu inputs ran without a crash\n", inputs);
	return inputs ? 0 : 1;
}
