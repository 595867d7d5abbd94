/* Landlock: a second, independent layer under the mounts. Commands may
 * write only beneath the view's writable places and a few device nodes,
 * and read only what the view holds. Used wherever the kernel offers it. */
#ifndef AB_LANDLOCK_H
#define AB_LANDLOCK_H

#include <stdbool.h>

#include "agentbox/agentbox.h"
#include "view/mount.h"

/* Sandbox init, after the view is built: a ruleset for every command.
 * *fd is -1 (and *abi 0) when this kernel has no Landlock. restack: the
 * overlay /workspace may be restacked later (checkpoints, src/ckpt/): a
 * rule on its root would not reach the overlays mounted over it, so its
 * write rights go on the view's root, and /proc is made read-only
 * (view_proc_read_only; docs/checkpoints.md says what that
 * lets through: what the mounts' flags and owners let through). */
int landlock_prepare(const struct view_plan *plan, bool restack, int *fd, int *abi,
		     struct ab_error *err);

/* Command, after no_new_privs, before seccomp. */
int landlock_enforce(int fd, struct ab_error *err);

/* A session shim, once: a ruleset handling only the making of block
 * devices (which no unprivileged process can do) with no rules, that
 * each session command enforces before its exec, so that each is in a
 * Landlock domain of its own below the sandbox's. Landlock then refuses
 * a command any ptrace-class access (ptrace, /proc/PID/mem,
 * process_vm_*) to another command or to an idle warm shell, whatever
 * the seccomp profile; within a command (its own children) it allows it.
 * Where the kernel has it (ABI 6, Linux 6.12) the layer also scopes
 * signals (LANDLOCK_SCOPE_SIGNAL): a command's kill reaches only its own
 * processes, not the init, the shims, the warm shells or other commands
 * (nor what an earlier command left in the background).
 * The fd (close-on-exec, >= 10), or -errno. */
int landlock_command_layer(void);

/* Whether the command layer scopes signals on a kernel of Landlock ABI
 * abi (and the launcher's test knob, landlock_read_knobs, allows it). */
bool landlock_signal_scope(int abi);

/* The launcher's test knob, read before the sandbox is cloned (the init
 * has no environment): AGENTBOX_TEST_NO_SIGNAL_SCOPE=1, a command layer
 * without the signal scope, as before Linux 6.12. */
void landlock_read_knobs(void);

#endif
