/* Inside a session (include/agentbox/agentbox.h, "Sessions"): what the
 * launcher keeps for one sandbox and each of its commands, shared by the
 * files that supervise it:
 *
 *   session.c         open (build the sandbox, wait for READY), the epoll
 *                     dispatch, the init's messages, stats, close
 *   command_input.c   a command's streamed stdin and its pty's size
 *   command.c         one command's lifecycle: start, output, deadline,
 *                     TERM -> KILL escalation, the shim's messages
 *   command_result.c  its result: status, timeout, OOM, accounting,
 *                     denials, protected paths, output; its slot's release
 *   shim_pool.c       the command shims the init starts: idle ones, spares;
 *                     which command a denied process belongs to
 *   session_watch.c   the clock, and interest in the epoll set
 *   run.c             `agentbox run`: a session of one command
 *
 * Each file calls only the ones below it in this list (tools/check-circles).
 *
 * Nothing the sandbox sends is trusted beyond its validated form: a
 * malformed message from the init ends the session, one from a shim ends
 * that command. */
#ifndef AB_SESSION_H
#define AB_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agentbox/agentbox.h"
#include "net/netproxy.h"
#include "util/output.h"
#include "layer/protect.h"
#include "sandbox/sandbox.h"
#include "seccomp/seccomp_profile.h"
#include "sandbox/shim.h"

/* After the main process exits, how long processes it left behind may
 * keep the output pipes open before they are killed. */
#define BACKGROUND_GRACE_MS 200
/* After a shim is gone, how long others may still hold the pipes. */
#define ORPHAN_PIPE_GRACE_MS 1000
#define SETUP_TIMEOUT_MS     30000

/* What an epoll event of the session is about (low byte of its data). */
enum { K_SYNC = 1, K_INIT, K_LISTENER, K_TIMER, K_CTL, K_OUT, K_ERR, K_SHIM, K_NET, K_IN };

struct cmd {
	bool used;
	unsigned long long tag, seq;
	int ctl, out_rd, err_rd; /* out_rd, err_rd: -1 when passed through */
	int shim_pidfd, cmd_pidfd;
	pid_t shim_pid;	  /* on the host, once looked up; 0: not yet, -1: unknown */
	size_t shim_slot; /* its shim's slot in the pool, while shim_gen is that slot's */
	unsigned shim_gen;
	struct ab_capture out, err;
	bool merged, stream, keep_bg;
	bool file_op;	/* done by the shim itself: its process is the shim */
	bool inline_op; /* a file_op on its shim's own socket (SYNC_FILEOP): no ctl, no pipes */
	bool exited, failed, ctl_eof, term_sent, kill_sent, timed_out, cancelled;
	int timeout_signal;
	struct shim_msg msg; /* EXITED, or FAILED */
	unsigned long long started_ms;
	unsigned long long timeout_ms; /* this command's own, as applied; 0: none */
	unsigned long long deadline_ms, kill_at_ms, grace_at_ms; /* 0: none */
	unsigned long long grace_left_ms; /* of the orphan grace, while output is paused */
	unsigned long long oom_before;
	unsigned long long pids_before; /* pids.events "max" at the start */
	struct ab_denials denials;
	struct ab_net_report net; /* --net allow=: its connections (netproxy.h) */
	/* a streamed stdin or a pty (command_input.c): in_wr the pipe's
	 * write end or a dup of the pty's master (-1: none yet, or closed);
	 * out_rd is the master itself once the shim sent it (pty_got) */
	bool pty, pty_got, stdin_stream;
	unsigned short rows, cols; /* a pty's size: the last asked */
	int in_wr;
	char *in_buf; /* one ab_session_stdin's data, while in_busy */
	size_t in_len, in_off;
	bool in_busy, in_eof_after, in_closed, in_watched;
};

struct ab_session {
	struct sandbox sb;
	bool one_command; /* `agentbox run`: the init is the only shim */
	bool ready;	  /* the init said READY: file operations can go in */
	pid_t init;
	bool init_reaped; /* its pid may be another process's now */
	bool sync_eof;	  /* the init's end of the sync socket closed: it is dying */
	int init_pidfd, sync_fd, listener;
	int epfd, timerfd, devnull;
	unsigned long long timer_at; /* the deadline timerfd is armed for, 0: none */
	struct cmd *cmds;
	size_t max, running;
	bool out_paused; /* ab_session_pause_output: stream commands' pipes unread */
	char *drain_buf; /* what a read of a command's pipe or a shim's packet gives (session_buf)
			  */
	bool no_inline;	 /* file operations' packets are too big for the shims' sockets */
	unsigned long long seq, started_ms, commands_run;
	/* the session's denials, made at the first (session_denials): 3 KiB
	 * an idle sandbox without any would hold twice, in its launcher and
	 * in its init's copy */
	struct ab_denials *denials;
	struct ab_result limits;
	/* the protected paths as the last command that changed one left
	 * them (valid when have_seen), else as they were at open (sb.protect) */
	struct protect_state seen;
	bool have_seen;
	char **layer_seen; /* in an overlay workspace: the protected paths reported */
	char id[64];
	bool dead;
	struct ab_error *death; /* once dead: why (made then, not 1 KiB of every idle session) */
	struct ab_denied_syscall *stats_denied;
	/* the command shims the init started (sock -1: a free slot); a
	 * command goes to an idle one straight from here */
	struct {
		int sock;
		bool idle;
		pid_t pid;    /* on the host; 0: unknown */
		int pidfd;    /* from the init, or -1 */
		unsigned gen; /* which shim this slot holds (pool_add counts) */
		/* when it last became idle (idle_ticks) */
		unsigned long long idle_since;
	} * shims;
	unsigned shim_gens;
	/* counts the shims' turns to idle */
	unsigned long long idle_ticks;
	size_t n_shims;	     /* slots: commands running, shims still cleaning up after
			      * theirs, and a spare */
	unsigned asked;	     /* SYNC_NEW_SHIM sent and not answered yet */
	int shim_error;	     /* why the init could not start the last one asked */
	bool shim_no_pidfd;  /* a shim came without its pidfd: STARTED brings them */
	struct netproc *net; /* --net allow='s helper (sb's, net/netproc.h), or NULL */
	/* published ports (port/port.h), or NULL: none yet */
	struct port_set *ports;
};

/* session.c */
/* ab_session_open, and for `agentbox run` one_command: the init runs the
 * one command's shim itself (no second process, no spare), and the
 * session is returned before the init is ready, so that the command can
 * be started meanwhile: session_ready then waits for it (and says why the
 * sandbox could not be built). limits, when not NULL, gets the limits as
 * applied as soon as they are, so that a failure later still reports them. */
int session_open(struct ab_config *cfg, bool one_command, struct ab_result *limits,
		 struct ab_session **out, struct ab_error *err);
int session_ready(struct ab_session *s, struct ab_error *err);
/* ab_session_close without the --bind files' sync (bindsync.c). */
void session_free(struct ab_session *s);

/* Waiting for the result of the command of tag: done, then its result in
 * *res (owned) and r 0, or its error in *err and r its -errno. */
struct session_result_wait {
	unsigned long long tag;
	bool done;
	struct ab_result *res;
	struct ab_error *err;
	int r;
};
/* The ab_event_fn that fills a session_result_wait (arg). */
void session_result_event(const struct ab_event *ev, void *arg);

/* session_watch.c */
unsigned long long session_now_ms(void);
int session_watch(struct ab_session *s, int fd, size_t slot, int kind);
void session_unwatch(struct ab_session *s, int *fd);
/* Interest in fd's room to write (EPOLLOUT), on or off; the fd stays open. */
int session_watch_out(struct ab_session *s, int fd, size_t slot, int kind, bool on);

/* shim_pool.c */
/* A shim's socket (and its pidfd, or -1) into the pool, idle (closed when
 * there is no room). */
void pool_add(struct ab_session *s, int sock, pid_t pid, int pidfd);
/* The shim a command goes to: its slot, or a negative errno (err says). */
int pool_give(struct ab_session *s, int fds[SYNC_EXEC_FDS], struct ab_error *err);
/* The same for a file operation's request, on the shim's socket itself
 * (SYNC_FILEOP); -EMSGSIZE, with err unset, when the socket cannot take
 * it: the caller gives it with fds instead. */
int pool_give_fileop(struct ab_session *s, const char *request, struct ab_error *err);
void pool_on_shim(struct ab_session *s, size_t i);
/* The command shim i does on its own socket (an inline_op), if any. */
struct cmd *pool_inline_cmd(struct ab_session *s, size_t i);
/* Shim i is idle again (an inline_op's FILEOP_DONE); or gone: its socket
 * closed, its slot free. */
void pool_set_idle(struct ab_session *s, size_t i);
void pool_forget(struct ab_session *s, size_t i);
/* A message of the init after setup; false when it ends the session. */
bool pool_on_sync(struct ab_session *s);
void pool_drop_idle(struct ab_session *s);
/* A command's final SHIM_EXITED (SHIM_IDLE_AT_FINAL): its shim, if that
 * slot still holds it, is idle without a SYNC_READY. */
void pool_idle_at_final(struct ab_session *s, const struct cmd *c);
/* The session's denials, made at the first; NULL without memory (one not
 * counted, still answered). */
struct ab_denials *session_denials(struct ab_session *s);
/* Which command's denials a denied process counts for (the command whose
 * shim is its ancestor), or NULL: the session's (an ab_denial_route). */
struct ab_denials *command_route_denial(pid_t pid, void *arg);

/* command_input.c: a command's streamed stdin, its pty's size */
/* Room in its stdin: write more of the data waiting (K_IN). */
void command_input_write(struct ab_session *s, struct cmd *c, ab_event_fn fn, void *arg);

/* command_spec.c */
/* The spec for x's shim in an fd (build_spec: the session's environment
 * with the request's), or a negative errno with err set. */
int command_spec(const struct ab_session *s, const struct ab_exec *x, const char *cwd,
		 uint32_t flags, struct ab_error *err);
/* data in a sealed memfd, or a negative errno. */
int command_memfd(const char *name, const void *data, size_t len);

/* command.c */
/* The session's buffer for a read of a command's pipe or a shim's packet
 * (DRAIN_SIZE, at least a FILEOP_PKT_MAX packet), made on first use; NULL
 * without memory. */
char *session_buf(struct ab_session *s);
void command_on_ctl(struct ab_session *s, struct cmd *c);
/* An inline_op's packets on its shim's socket (shim slot i). */
void command_on_shim(struct ab_session *s, struct cmd *c, size_t i);
void command_drain(struct ab_session *s, struct cmd *c, int *fd, int stream, ab_event_fn fn,
		   void *arg);
/* ab_session_pause_output for one command: its stream pipes out of the
 * epoll set or back in, its orphan-pipe grace stopped or running on. */
void command_pause_output(struct ab_session *s, struct cmd *c, bool pause, unsigned long long now);
/* Deadlines and grace periods due at now; the result once complete. */
void command_check(struct ab_session *s, struct cmd *c, unsigned long long now, ab_event_fn fn,
		   void *arg);
/* The earliest deadline of any command, 0: none. */
unsigned long long command_next_deadline(const struct ab_session *s);
/* The session's one timer, at the next deadline of its commands. */
void command_arm_timer(struct ab_session *s);

/* command_result.c */
void command_clear(struct cmd *c);
/* Out of the epoll set, its fds closed, its slot free. */
void command_release(struct ab_session *s, struct cmd *c);
/* The command's RESULT event (a result, or the error why there is none),
 * then its slot is free. */
void command_finish(struct ab_session *s, struct cmd *c, ab_event_fn fn, void *arg);
/* At a session's end, once every process of the sandbox is gone: the
 * protected paths a kept background process or a file operation created
 * after the last command's check, put out of effect (protect_quarantine.h)
 * and told through cfg.notice. */
void command_quarantine_at_close(struct ab_session *s);
/* The OOM killer struck in the sandbox's cgroup since the command started
 * (the cgroup's own events, counted before and after). */
bool command_oom(struct ab_session *s, const struct cmd *c);
int denials_collect(const struct ab_denials *d, struct ab_denied_syscall **out, size_t *nout);

#endif
