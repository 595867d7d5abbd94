/* A session's command shim: the sandbox's init starts shims when the
 * launcher asks and hands it their sockets; the launcher keeps them as a
 * pool and gives each command of `agentbox serve` to an idle one, which
 * becomes the subreaper of everything the command starts, spawns the
 * command (or, for a file operation, does it itself), reports its status
 * and, when told, signals or kills every process the command left behind;
 * then it says SYNC_READY on its socket (or nothing, when its final
 * SHIM_EXITED said so: SHIM_IDLE_AT_FINAL) and waits for the next command.
 *
 * The launcher gives each command on the shim's socket (SYNC_EXEC):
 *   spec    a pipe (up to a page) or a sealed memfd: struct shim_spec, then
 *           argc + envc + 1 NUL-terminated strings (argv, environment,
 *           working directory)
 *   ctl     one end of a SOCK_SEQPACKET pair; the launcher keeps the other
 *   stdin   a sealed memfd with the request's data, or /dev/null
 *   stdout, stderr  write ends of the launcher's pipes (the same with merge)
 *
 * On ctl the shim sends SHIM_PTY_MASTER (with the master, SHIM_PTY only),
 * SHIM_STARTED (with pidfds of itself and of the
 * command), then SHIM_EXITED when the command's main process has exited,
 * or SHIM_FAILED when it could not start it. SHIM_EXITED says "final"
 * when the command left no process behind (the shim, their subreaper, has
 * no child left): nothing more comes, and the launcher need not wait for
 * the end of ctl to give the result (and, with SHIM_IDLE_AT_FINAL, the
 * shim is free: no SYNC_READY follows). SHIM_STARTED comes once the
 * command has run a few milliseconds, not at all for a command that ended
 * before (its pidfd would be of a reaped process). The launcher sends one
 * byte:
 * SHIM_TERM (SIGTERM to every process of the command) or SHIM_KILL (SIGKILL
 * to all of them, reap, exit); end of file means SHIM_KILL.
 *
 * A file operation with no fds comes on the shim's socket itself instead
 * (SYNC_FILEOP, struct fileop_pkt and the request, up to FILEOP_PKT_MAX):
 * the shim does it and sends the reply back on that socket in
 * SYNC_FILEOP_OUT packets, the last piece in SYNC_FILEOP_DONE with the
 * status, which also says it is idle; the launcher stops a file operation
 * by killing the shim (its pidfd). The shim runs as the sandbox user, under
 * the seccomp filter, so the launcher believes nothing it says beyond its
 * validated form. */
#ifndef AB_SHIM_H
#define AB_SHIM_H

#include <stdint.h>

#include "sandbox/init.h"
#include "util/sync.h"

#define SHIM_SPEC_MAGIC 0x61627331u /* "abs1" */
#define SHIM_SPEC_MAX	(32u << 20)

/* SHIM_FILEOP: argv[0] is a file operation (fileop.h) for the shim itself
 * to do instead of running a program; its SHIM_EXITED is final, and with
 * SHIM_IDLE_AT_FINAL the shim is free once the launcher has read it */
/* SHIM_IDLE_AT_FINAL: after a final SHIM_EXITED (and no keep_background)
 * the shim says no SYNC_READY: the launcher takes that EXITED as its
 * READY, which saves it a wake-up per command */
/* SHIM_NO_STARTED: a file operation's launcher holds the shim's pidfd
 * from the init already: no SHIM_STARTED, and one wake-up less */
/* SHIM_PTY: a new pty pair from the sandbox's devpts, rows x cols: the
 * command's controlling terminal and stdio (the stdio fds are unused); the
 * master goes to the launcher in SHIM_PTY_MASTER, sent before anything
 * else on ctl, and the shim keeps no end of it */
enum {
	SHIM_KEEP_BACKGROUND = 1,
	SHIM_MERGED = 2,
	SHIM_FILEOP = 4,
	SHIM_IDLE_AT_FINAL = 8,
	SHIM_PTY = 16,
	SHIM_NO_STARTED = 32,
};

struct shim_spec {
	uint32_t magic;
	uint32_t flags;
	uint32_t argc, envc;
	uint64_t seq;	     /* the session's command number, for the background log's name */
	uint16_t rows, cols; /* SHIM_PTY: the terminal's size */
	uint32_t pad;
};

enum shim_msg_type { SHIM_STARTED = 1, SHIM_FAILED, SHIM_EXITED, SHIM_PTY_MASTER };
/* The launcher's bytes on ctl; a byte from 1 to SHIM_SIGNAL_MAX - 1 is a
 * signal the caller forwards to the command's process group. */
enum { SHIM_TERM = 'T', SHIM_KILL = 'K', SHIM_SIGNAL_MAX = 65 };

#define SHIM_MAX_BACKGROUND 32

struct shim_msg {
	uint32_t type;
	int32_t status; /* EXITED: the main process's wait status; FAILED: errno */
	uint64_t utime_us, stime_us;
	uint64_t maxrss_kb;
	uint32_t n_background; /* EXITED with keep_background: processes left running */
	uint32_t final;	       /* EXITED: 1 when no process of the command is left */
	struct {
		int32_t pid;
		char comm[20];
	} background[SHIM_MAX_BACKGROUND];
	char text[512]; /* FAILED: why; EXITED: the background log's path, or "" */
};

/* A shim process: takes one SYNC_EXEC (or SYNC_FILEOP) at a time on pool
 * (its socket to the launcher), runs that command to its end, then says
 * SYNC_READY (or FILEOP_DONE) and waits for the next; leaves when pool is closed, or, as the init
 * of a one-command session, after its command. Never returns. */
_Noreturn void shim_serve(const struct init_args *a, int pool);

#endif
