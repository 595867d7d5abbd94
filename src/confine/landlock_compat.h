/* Landlock's constants newer than the oldest kernel headers agentbox builds
 * with (Debian 12's know ABI 1), by their values in the kernel's uapi. */
#ifndef AB_LANDLOCK_COMPAT_H
#define AB_LANDLOCK_COMPAT_H

#include <linux/landlock.h>
#include <stdint.h>

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13) /* ABI 2 */
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14) /* ABI 3 */
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
#endif
#ifndef LANDLOCK_ACCESS_NET_BIND_TCP
#define LANDLOCK_ACCESS_NET_BIND_TCP	(1ULL << 0) /* ABI 4 */
#define LANDLOCK_ACCESS_NET_CONNECT_TCP (1ULL << 1)
#endif
#ifndef LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET
#define LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0) /* ABI 6 */
#define LANDLOCK_SCOPE_SIGNAL		    (1ULL << 1)
#endif

/* struct landlock_ruleset_attr as of ABI 6 (scoped), whatever the headers
 * know: pass sizeof(uint64_t) for ABI 1 to 3, 2 * for ABI 4 and 5 */
struct ab_landlock_ruleset_attr {
	uint64_t handled_access_fs, handled_access_net, scoped;
};

#endif
