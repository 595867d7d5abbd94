#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int ab_procs_open(struct ab_procs *it)
{
	it->d = opendir("/proc");
	return it->d ? 0 : -errno;
}

bool ab_procs_next(struct ab_procs *it, pid_t *pid, pid_t *ppid)
{
	struct dirent *de;
	while ((de = readdir(it->d))) {
		char *end;
		long p = strtol(de->d_name, &end, 10);
		if (*end || p <= 0)
			continue;
		char path[64], buf[512];
		snprintf(path, sizeof(path), "/proc/%ld/stat", p);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		ssize_t k = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (k <= 0)
			continue;
		buf[k] = '\0';
		/* "pid (comm) state ppid": comm may hold anything but ends at the last ')' */
		char *rp = strrchr(buf, ')');
		int pp;
		if (!rp || sscanf(rp + 1, " %*c %d", &pp) != 1)
			continue;
		*pid = (pid_t)p;
		*ppid = (pid_t)pp;
		return true;
	}
	return false;
}

void ab_procs_close(struct ab_procs *it)
{
	if (it->d)
		closedir(it->d);
	it->d = NULL;
}
