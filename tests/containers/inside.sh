#!/bin/sh
# Run by tests/containers/run inside a Podman container, as uid 1000:
#   inside.sh default   Podman's default seccomp profile and masked /proc:
#                       --isolation full refuses and names what is missing,
#                       best runs and reports exactly own-proc and uts
#   inside.sh shipped   packaging/containers/agentbox-seccomp.json and an
#                       unmasked /proc: full isolation, core attacks contained
#   inside.sh docker    Docker's default profile, no user namespaces: full
#                       refuses, best runs without namespaces (Landlock,
#                       seccomp, ...) and the core attacks are still contained
# A container process (sleep 4242, holding AGENTBOX_CT_TOKEN in its
# environment) is the outside the sandbox must not see, read or kill.
set -u
mode=$1
fails=0
ok() { echo "ok   $mode: $1"; }
bad() {
	echo "FAIL $mode: $1" >&2
	fails=$((fails + 1))
}
ws=/tmp/ws
mkdir -p $ws
cd $ws || exit 1
sleep 4242 &
outside=$!
cat >/tmp/attack.sh <<'ATTACK'
# the escape battery's core, inside the sandbox (it first checks it is in one)
[ -d /workspace ] || case "$TMPDIR" in /tmp/agentbox-tmp-*) ;; *) exit 99 ;; esac
readlink /proc/self/ns/net
r=""
touch /etc/agentbox-escape 2>/dev/null && r="$r write-etc"
touch /usr/agentbox-escape 2>/dev/null && r="$r write-usr"
echo x >/tmp/agentbox-escape 2>/dev/null # the sandbox's own /tmp: allowed
for f in /proc/[0-9]*/environ; do
	grep -aq AGENTBOX_CT_TOKEN "$f" 2>/dev/null && r="$r read-environ:$f"
done
env | grep -q AGENTBOX_CT_TOKEN && r="$r env-leak"
echo "escaped:$r"
# every process of the sandbox but this shell (and pid 1, the init)
kill -9 -1 2>/dev/null
exit 0
ATTACK

# which processes' command line is "sleep 4242"
cat >/tmp/find.sh <<'FIND'
for f in /proc/[0-9]*/cmdline; do
	[ "$(tr '\0' ' ' <"$f" 2>/dev/null)" = "sleep 4242 " ] && echo "$f"
done
exit 0
FIND

# the container's own namespaces, to compare
ct_net=$(readlink /proc/self/ns/net)

run_attacks() { # $@: agentbox options
	# without namespaces there are no binds: the script is at its own path
	if [ "$mode" = docker ]; then
		set -- "$@" -- sh /tmp/attack.sh
	else
		set -- "$@" --ro-bind /tmp/attack.sh:/attack.sh -- sh /attack.sh
	fi
	out=$(agentbox run --workspace $ws "$@" 2>/tmp/attack.err)
	rc=$?
	echo "$out" | sed "s/^/     /"
	[ $rc -eq 0 ] || { bad "attack run exited $rc: $(cat /tmp/attack.err)"; return; }
	echo "$out" | grep -qx "escaped:" && ok "no write outside the workspace, no environ of the outside, no token" ||
		bad "attacks got through: $out"
	kill -0 $outside 2>/dev/null && ok "kill -9 -1 in the sandbox left the container's process" ||
		bad "kill -9 -1 killed the container's process"
	[ -e /etc/agentbox-escape ] || [ -e /tmp/agentbox-escape ] && bad "a file escaped"
	[ "$mode" = docker ] && return # no network namespace: Landlock refuses TCP
	[ "$(echo "$out" | head -1)" != "$ct_net" ] && ok "own network namespace" ||
		bad "the sandbox shares the container's network namespace"
}

case $mode in
default)
	err=$(agentbox run --workspace $ws -- true 2>&1)
	rc=$?
	echo "     full: $err"
	[ $rc -eq 125 ] && ok "--isolation full exits 125" || bad "--isolation full exited $rc"
	echo "$err" | grep -q "missing own-proc, uts" && ok "full names what is missing" ||
		bad "full's message does not name own-proc, uts"
	agentbox run --isolation best --report /tmp/r.json --workspace $ws -- \
		sh -c 'echo ran; hostname' >/tmp/best.out 2>/tmp/best.err
	rc=$?
	sed "s/^/     best: /" /tmp/best.err
	[ $rc -eq 0 ] && grep -qx ran /tmp/best.out && ok "--isolation best runs" || bad "best exited $rc"
	grep -q '"isolation":{"level":"partial","missing":\["own-proc","uts"\]}' /tmp/r.json &&
		ok "the result says partial, missing own-proc and uts" || bad "result: $(cat /tmp/r.json)"
	[ "$(grep -c 'missing own-proc' /tmp/best.err)" = 1 ] && [ "$(grep -c 'missing uts' /tmp/best.err)" = 1 ] &&
		ok "stderr names each missing layer once" || bad "stderr: $(cat /tmp/best.err)"
	hello=$(agentbox serve --isolation best --workspace $ws </dev/null 2>/dev/null | head -1)
	echo "$hello" | grep -q '"isolation":{"level":"partial","missing":\["own-proc","uts"\]}' &&
		ok "the serve hello says partial" || bad "hello: $hello"
	# own-proc is missing, as reported: the container's process is there to
	# see, which is what makes the environ attack below meaningful
	seen=$(agentbox run --isolation best --workspace $ws --ro-bind /tmp/find.sh:/find.sh \
		-- sh /find.sh 2>/dev/null)
	[ -n "$seen" ] &&
		ok "the container's process is visible in the bound /proc, as reported" ||
		bad "the container's process is not visible: own-proc reported missing wrongly"
	run_attacks --isolation best
	;;
shipped)
	agentbox run --report /tmp/r.json --workspace $ws -- sh -c 'hostname' >/tmp/full.out 2>&1
	rc=$?
	[ $rc -eq 0 ] && grep -qx agentbox /tmp/full.out && ok "--isolation full runs, host name agentbox" ||
		bad "full exited $rc: $(cat /tmp/full.out)"
	grep -q '"isolation":"full"' /tmp/r.json && ok "the result says full" || bad "result: $(cat /tmp/r.json)"
	[ -n "$(sh /tmp/find.sh)" ] || bad "find.sh does not find the container's process outside"
	seen=$(agentbox run --workspace $ws --ro-bind /tmp/find.sh:/find.sh -- sh /find.sh 2>&1)
	[ -z "$seen" ] && ok "own /proc: the container's process is not there" ||
		bad "the container's process is visible: $seen"
	run_attacks
	;;
docker)
	err=$(agentbox run --workspace $ws -- true 2>&1)
	rc=$?
	echo "     full: $err"
	[ $rc -eq 125 ] && echo "$err" | grep -q "missing namespaces" &&
		ok "--isolation full exits 125 naming namespaces" || bad "full: rc $rc"
	agentbox run --isolation best --report /tmp/r.json --workspace $ws -- pwd >/tmp/best.out 2>/tmp/best.err
	rc=$?
	[ $rc -eq 0 ] && grep -qx $ws /tmp/best.out && ok "--isolation best runs, in the workspace's host path" ||
		bad "best: rc $rc $(cat /tmp/best.out /tmp/best.err)"
	grep -q '"isolation":{"level":"partial","missing":\["namespaces"\]}' /tmp/r.json &&
		ok "the result says partial, missing namespaces" || bad "result: $(cat /tmp/r.json)"
	run_attacks --isolation best
	;;
esac
echo "---- agentbox check ($mode)"
agentbox check | sed "s/^/     /"
kill $outside 2>/dev/null
exit $((fails > 0))
