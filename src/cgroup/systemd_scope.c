/* A transient Delegate=yes scope from the user's systemd (systemd_scope.h).
 *
 * sd-bus's declarations come from libsystemd-dev, but the library is
 * loaded with dlopen on first use: the agentbox binary links its other
 * libraries statically for start-up speed, Debian ships no static
 * libsystemd, and most runs (root, a delegated caller, v1) never get here. */
#include "cgroup/systemd_scope.h"

#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <time.h>
#include <unistd.h>

#include "util/util.h"

/* how long systemd may take to answer and to finish the scope's job: a
 * loaded machine's user manager can be slow, but never a hang */
#define SCOPE_TIMEOUT_US (20ULL * 1000 * 1000)

#define SD_FUNCS(X)                                                                                \
	X(sd_bus_open_user)                                                                        \
	X(sd_bus_new)                                                                              \
	X(sd_bus_set_address)                                                                      \
	X(sd_bus_set_bus_client)                                                                   \
	X(sd_bus_start)                                                                            \
	X(sd_bus_flush_close_unref)                                                                \
	X(sd_bus_match_signal)                                                                     \
	X(sd_bus_slot_unref)                                                                       \
	X(sd_bus_message_new_method_call)                                                          \
	X(sd_bus_message_append)                                                                   \
	X(sd_bus_message_open_container)                                                           \
	X(sd_bus_message_close_container)                                                          \
	X(sd_bus_message_read)                                                                     \
	X(sd_bus_message_unref)                                                                    \
	X(sd_bus_call)                                                                             \
	X(sd_bus_process)                                                                          \
	X(sd_bus_get_property_trivial)                                                             \
	X(sd_bus_call_method)                                                                      \
	X(sd_bus_wait)                                                                             \
	X(sd_bus_error_free)

static struct {
#define FIELD(f) __typeof__(f) *f;
	SD_FUNCS(FIELD)
#undef FIELD
} sd;

/* libsystemd.so.0, once per process; false and why when it cannot be had */
static bool load(char *why, size_t len)
{
	static int loaded = -1;
	static char err[160];
	if (loaded < 0) {
		void *h = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
		loaded = h != NULL;
		if (!h)
			snprintf(err, sizeof(err), "cannot load libsystemd.so.0: %s", dlerror());
#define SYM(f)                                                                                     \
	if (loaded && !(*(void **)&sd.f = dlsym(h, #f))) {                                         \
		loaded = 0;                                                                        \
		snprintf(err, sizeof(err), "libsystemd.so.0 has no %s", #f);                       \
	}
		SD_FUNCS(SYM)
#undef SYM
	}
	if (!loaded)
		snprintf(why, len, "%s", err);
	return loaded;
}

/* The user manager's bus: where the environment says, else where systemd
 * puts it (runuser, su and cron leave XDG_RUNTIME_DIR unset). */
static int open_bus(sd_bus **bus)
{
	if (getenv("DBUS_SESSION_BUS_ADDRESS") || getenv("XDG_RUNTIME_DIR"))
		return sd.sd_bus_open_user(bus);
	char addr[64];
	snprintf(addr, sizeof(addr), "unix:path=/run/user/%u/bus", (unsigned)getuid());
	int r = sd.sd_bus_new(bus);
	if (r >= 0)
		r = sd.sd_bus_set_address(*bus, addr);
	if (r >= 0)
		r = sd.sd_bus_set_bus_client(*bus, 1);
	if (r >= 0)
		r = sd.sd_bus_start(*bus);
	if (r < 0 && *bus)
		*bus = sd.sd_bus_flush_close_unref(*bus);
	return r;
}

struct job_wait {
	const char *path; /* the job's object path, once StartTransientUnit said it */
	bool done;
	char result[32];
};

static int on_job_removed(sd_bus_message *m, void *userdata, sd_bus_error *error)
{
	struct job_wait *w = userdata;
	uint32_t id;
	const char *path, *unit, *result;
	(void)error;
	if (sd.sd_bus_message_read(m, "uoss", &id, &path, &unit, &result) < 0 || !w->path ||
	    strcmp(path, w->path) != 0)
		return 0;
	w->done = true;
	snprintf(w->result, sizeof(w->result), "%s", result);
	return 0;
}

static unsigned long long now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
}

/* StartTransientUnit(unit, "fail", properties, no auxiliary units) */
static int start_scope(sd_bus *bus, const char *unit, sd_bus_message **reply, sd_bus_error *e)
{
	sd_bus_message *m = NULL;
	int r = sd.sd_bus_message_new_method_call(
		bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
		"org.freedesktop.systemd1.Manager", "StartTransientUnit");
	if (r >= 0)
		r = sd.sd_bus_message_append(m, "ss", unit, "fail");
	if (r >= 0)
		r = sd.sd_bus_message_open_container(m, 'a', "(sv)");
	if (r >= 0)
		r = sd.sd_bus_message_append(m, "(sv)", "Description", "s", "agentbox sandbox");
	if (r >= 0)
		r = sd.sd_bus_message_append(m, "(sv)", "PIDs", "au", 1, (uint32_t)getpid());
	if (r >= 0)
		r = sd.sd_bus_message_append(m, "(sv)", "Delegate", "b", 1);
	/* gone once empty, even if a sandbox in it failed */
	if (r >= 0)
		r = sd.sd_bus_message_append(m, "(sv)", "CollectMode", "s", "inactive-or-failed");
	if (r >= 0)
		r = sd.sd_bus_message_close_container(m);
	if (r >= 0)
		r = sd.sd_bus_message_append(m, "a(sa(sv))", 0);
	if (r >= 0)
		r = sd.sd_bus_call(bus, m, SCOPE_TIMEOUT_US, e, reply);
	sd.sd_bus_message_unref(m);
	return r;
}

/* libsystemd and the user manager's bus, or why not */
static int connect_bus(sd_bus **bus, char *why, size_t why_len)
{
	*bus = NULL;
	if (!load(why, why_len))
		return -ENOSYS;
	int r = open_bus(bus);
	if (r < 0)
		snprintf(why, why_len, "cannot reach the systemd user manager's bus: %s",
			 strerror(-r));
	return r;
}

int ab_systemd_delegated(void)
{
	char why[200];
	sd_bus *bus = NULL;
	sd_bus_message *reply = NULL;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	const char *unit;
	int r = connect_bus(&bus, why, sizeof(why));
	if (r >= 0)
		r = sd.sd_bus_call_method(bus, "org.freedesktop.systemd1",
					  "/org/freedesktop/systemd1",
					  "org.freedesktop.systemd1.Manager", "GetUnitByPID", &e,
					  &reply, "u", (uint32_t)getpid());
	if (r >= 0)
		r = sd.sd_bus_message_read(reply, "o", &unit);
	int delegate = 0;
	/* Delegate is a property of scopes and services alike */
	static const char *const ifaces[] = {"org.freedesktop.systemd1.Scope",
					     "org.freedesktop.systemd1.Service"};
	for (size_t i = 0; r >= 0 && i < AB_ARRAY_SIZE(ifaces); i++) {
		sd.sd_bus_error_free(&e);
		r = sd.sd_bus_get_property_trivial(bus, "org.freedesktop.systemd1", unit, ifaces[i],
						   "Delegate", &e, 'b', &delegate);
		if (r >= 0)
			break;
		if (i + 1 < AB_ARRAY_SIZE(ifaces))
			r = 0;
	}
	sd.sd_bus_message_unref(reply);
	sd.sd_bus_error_free(&e);
	if (bus)
		sd.sd_bus_flush_close_unref(bus);
	return r < 0 ? r : delegate != 0;
}

int ab_systemd_scope(const char *unit, char *why, size_t why_len)
{
	sd_bus *bus = NULL;
	sd_bus_slot *slot = NULL;
	sd_bus_message *reply = NULL;
	sd_bus_error e = SD_BUS_ERROR_NULL;
	struct job_wait w = {0};
	int r = connect_bus(&bus, why, why_len);
	if (r < 0)
		return r;
	/* subscribed before the call, so the job's end cannot be missed */
	r = sd.sd_bus_match_signal(bus, &slot, "org.freedesktop.systemd1",
				   "/org/freedesktop/systemd1", "org.freedesktop.systemd1.Manager",
				   "JobRemoved", on_job_removed, &w);
	if (r >= 0)
		r = start_scope(bus, unit, &reply, &e);
	if (r < 0)
		snprintf(why, why_len, "systemd could not make the scope %s: %s", unit,
			 e.message ? e.message : strerror(-r));
	else if ((r = sd.sd_bus_message_read(reply, "o", &w.path)) < 0)
		snprintf(why, why_len, "systemd's answer for %s had no job", unit);
	/* wait for the job: only then is this process in the scope */
	unsigned long long deadline = now_us() + SCOPE_TIMEOUT_US;
	while (r >= 0 && !w.done) {
		r = sd.sd_bus_process(bus, NULL);
		if (r > 0)
			continue;
		unsigned long long t = now_us();
		if (r == 0 && t >= deadline)
			r = -ETIMEDOUT;
		else if (r == 0)
			r = sd.sd_bus_wait(bus, deadline - t);
		if (r < 0)
			snprintf(why, why_len, "waiting for systemd to start %s: %s", unit,
				 strerror(-r));
	}
	if (r >= 0 && strcmp(w.result, "done") != 0) {
		snprintf(why, why_len, "systemd's job for %s ended with '%s'", unit, w.result);
		r = -EIO;
	}
	sd.sd_bus_message_unref(reply);
	sd.sd_bus_error_free(&e);
	sd.sd_bus_slot_unref(slot);
	sd.sd_bus_flush_close_unref(bus);
	return r < 0 ? r : 0;
}
