/* Idmapped mounts (Linux 5.12, mount_setattr(MOUNT_ATTR_IDMAP)): how agentbox
 * started by root lets an unprivileged sandbox user work in directories
 * owned by anyone, root included, while files keep their owners on disk.
 *
 * The launcher opens each source the caller named (workspace, protected
 * paths, --skills, --bind, --ro-bind) itself, checks it is what the plan
 * checked, and makes a detached copy of it (open_tree) whose idmapping sends
 * the source's owner to the sandbox user's host uid; the init inherits the
 * copy and attaches it in the view with move_mount. The mapping lives in a
 * small user namespace made for the purpose, one per distinct owner. */
#ifndef AB_IDMAP_H
#define AB_IDMAP_H

#include <stdbool.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"
#include "view/mount.h"

/* The host uid and gid of the sandbox user when root starts agentbox
 * without --host-uid: in systemd's unused range (1879048192-2147352575,
 * docs/UIDS-GIDS.md), above the subordinate ids useradd hands out (at most
 * 600100000) and below 2^31, so no account, container range or daemon
 * shares it (65534 is nobody, whom daemons share). */
#define AB_SANDBOX_HOST_ID 2000000000u

/* Launcher (and the sandbox, pid 0 for itself): write the one-id maps uid -> outer_uid, gid ->
 * outer_gid of the user namespace of pid (setgroups denied first when asked). */
int idmap_write_maps(pid_t pid, uid_t uid, uid_t outer_uid, gid_t gid, gid_t outer_gid,
		     bool deny_setgroups, struct ab_error *err);

/* Launcher, as root: a detached, idmapped copy of every source the caller
 * named, into e->tree_fd, and the setid guard into plan->setid_guard. A
 * protected path is mapped like the workspace it lies in. When the
 * workspace's filesystem refuses idmapping, returns -EOPNOTSUPP with a
 * message naming it; another source that refuses is bound as it is, with a
 * line appended to *notices (a heap string, may be NULL). */
int idmap_plan_trees(struct view_plan *plan, uid_t host_uid, gid_t host_gid, char **notices,
		     struct ab_error *err);

/* Launcher: a sandbox user (uid, gid inside) of agentbox's own has no
 * account on the host, and tools that look it up (whoami, ssh, passwd,
 * Node's os.userInfo) fail: the host's /etc/passwd and /etc/group with a
 * line "agent" more each, where they have no line for that id, into
 * plan->passwd and plan->group (the view binds them over the host's). */
int idmap_plan_id_files(struct view_plan *plan, uid_t uid, gid_t gid, const char *home,
			struct ab_error *err);

/* Whether the filesystem of dir can be idmapped (agentbox check): 0, or
 * -errno with the reason in err. */
int idmap_probe(const char *dir, struct ab_error *err);
/* Why an idmapped mount was refused with EPERM (a missing CAP_SYS_ADMIN,
 * not the filesystem), and what to do instead. */
const char *idmap_eperm_reason(void);
extern const char *const idmap_eperm_fix;

/* Sandbox, in the command's process (or a session's init), after
 * no_new_privs and before the profile's filter: refuse to set the setuid
 * and setgid bits, which on an idmapped mount would make a file set-user-ID
 * to its owner on the host (root, for a root-owned workspace). */
int idmap_guard_install(const struct view_plan *plan, struct ab_error *err);

#endif
