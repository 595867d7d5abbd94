/* Detached sandboxes (docs/detached.md): agentbox create, exec, connect,
 * ls, rm. No daemon: each sandbox's launcher is agentbox serve detached
 * from its caller, serving the protocol on a unix socket in a directory
 * only its owner can enter. */
#ifndef AB_DETACH_H
#define AB_DETACH_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "agentbox/agentbox.h"
#include "ckpt/ckpt.h"

/* The commands (argv[0] is the command's name); each returns the exit
 * status. */
int detach_cli_create(int argc, char **argv);
int detach_cli_exec(int argc, char **argv);
int detach_cli_connect(int argc, char **argv);
int detach_cli_ls(int argc, char **argv);
int detach_cli_rm(int argc, char **argv);
int detach_cli_logs(int argc, char **argv);
int detach_cli_watch(int argc, char **argv); /* detach_watch.c */
/* agentbox pause ID and agentbox resume ID (argv[0] says which). */
int detach_cli_pause(int argc, char **argv);
/* agentbox port ID [PORT] (detach_port.c). */
int detach_cli_port(int argc, char **argv);
/* PORT as a number from 1 to 65535, or -1. */
long detach_port_number(const char *s);
/* {"op":"port"} to sandbox id (port 0: the list): its reply (type
 * "port", owned) into *reply, or the sandbox's refusal in err. */
int detach_port_request(const char *id, long port, const char *host, bool public, bool close_it,
			json_object **reply, struct ab_error *err);
/* agentbox checkpoint|checkpoints|restore (detach_ckpt.c, src/ckpt/) */
int detach_cli_checkpoint(int argc, char **argv);
/* agentbox fork (detach_fork.c) */
int detach_cli_fork(int argc, char **argv);
/* One request (its "id" a string) to sandbox id, on its exec socket, and
 * the result or error message that answers it (*reply, owned). */
int detach_request(const char *id, json_object *req, json_object **reply, struct ab_error *err);

/* ---- where sandboxes live (detach_dir.c) ---- */

/* Longest id (a name: letters, digits, '.', '_', '-', not first). */
#define DETACH_ID_MAX 63

/* The directory of the caller's sandboxes into root: $AGENTBOX_RUNTIME_DIR,
 * else /run/agentbox for root, $XDG_RUNTIME_DIR/agentbox (when that is the
 * caller's, 0700), or /tmp/agentbox-UID; made (0700) when create, and
 * refused unless it is a directory of the caller's that no one else may
 * enter (another user's named, with the way out). */
int detach_root(char *root, size_t size, bool create, struct ab_error *err);
bool detach_id_valid(const char *id);
/* root/id/leaf into out, which holds a unix socket's path (108 bytes). */
int detach_path(char *out, size_t size, const char *root, const char *id, const char *leaf,
		struct ab_error *err);
/* A socket connected to root/id/leaf ("sock" or "ctl"): -ENOENT no such
 * sandbox, -ECONNREFUSED its launcher is gone (err says which). */
int detach_dial(const char *root, const char *id, const char *leaf, struct ab_error *err);
/* What fd sends within timeout_ms at each wait, into buf (NUL-ended):
 * all of it up to its end, or with line up to a newline; -ETIMEDOUT,
 * -EPIPE when nothing came. */
int detach_read_reply(int fd, char *buf, size_t size, int timeout_ms, bool line);
/* One control request (status, stop) and its reply (*reply, owned). */
int detach_ctl(const char *root, const char *id, const char *word, json_object **reply,
	       struct ab_error *err);
/* Its halves, for asking many at once (ls): the request sent, the socket
 * its reply comes on; that reply's line (r: detach_read_reply's) parsed.
 * A reply is this long at most. */
#define DETACH_CTL_REPLY_MAX 4096
int detach_ctl_send(const char *root, const char *id, const char *word, struct ab_error *err);
int detach_ctl_parse(const char *id, const char *word, const char *line, int r, json_object **reply,
		     struct ab_error *err);
/* The state file the launcher wrote (NULL: none). */
json_object *detach_state_read(const char *root, const char *id);
int detach_state_write(const char *root, const char *id, json_object *state, struct ab_error *err);
/* The same for another file of root/id: leaf, a JSON object, written whole
 * (renamed into place). */
json_object *detach_json_read(const char *root, const char *id, const char *leaf);
int detach_json_write(const char *root, const char *id, const char *leaf, json_object *state,
		      struct ab_error *err);
/* When pid (0: ourselves) started, in clock ticks since boot (/proc's
 * stat): a pid and this name one process; -1 when it is gone. */
long long detach_pid_start(pid_t pid);
/* A released idle sandbox's launcher writes root/id/idle, which ls reads
 * instead of asking it ({"since_ms": realtime ms it has been idle since,
 * "start": detach_pid_start of the launcher, "memory_file": where its
 * cgroup's memory is read, or null}), and removes it as soon as it is not
 * idle (a client, a command, a pause). */
/* root/id and what is in it: the sockets, the state, the log. */
void detach_remove(const char *root, const char *id);

/* ---- agentbox create (detach_create.c) ---- */

struct detach_opts {
	const char *name;			    /* NULL: an id is made */
	unsigned long long idle_timeout_ms, ttl_ms; /* 0: none */
	bool idle_pause;			    /* pause at the idle timeout */
	unsigned long long keep_output, keep_total; /* --keep-output (serve.h) */
	unsigned long long idle_release_ms;	    /* 0: never */
	/* a fork's (detach_fork.c): the layers its workspace starts from
	 * (ckpt_fork_begin), and an fd of its maker the launcher must not
	 * keep (0: none) */
	char *const *base;
	size_t n_base;
	const struct ckpt_fork_own *base_own; /* /tmp's and home's (ckpt.h) */
	size_t n_base_own;
	int close_fd;
	/* makes forks of it (detach_fork_make); NULL: refused */
	int (*fork)(struct ab_config *cfg, const struct detach_opts *o, const struct ckpt_fork *f,
		    json_object *ids, struct ab_error *err);
};

/* --idle-release's default: what an idle sandbox keeps ready for its next
 * command goes after this long. */
#define DETACH_IDLE_RELEASE_MS 10000

/* Make the sandbox dir, start the launcher detached and wait until the
 * sandbox is ready; its id into id. */
int detach_create(struct ab_config *cfg, const struct detach_opts *o, char *id, size_t size,
		  struct ab_error *err);
/* In a child of sandbox's launcher (cfg and o: what it was made with):
 * make f->count forks of it, each from f->base, their ids into ids; all
 * of them, or none (those made are removed). */
int detach_fork_make(struct ab_config *cfg, const struct detach_opts *o, const struct ckpt_fork *f,
		     json_object *ids, struct ab_error *err);

#endif
