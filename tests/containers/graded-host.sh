#!/bin/sh
# Graded isolation on the host, no Podman needed (ctest test_isolation_graded):
# as_container refuses agentbox what containers refuse (a masked /proc,
# sethostname, user namespaces), and agentbox must say exactly that:
# --isolation full refuses naming it, best runs without it and reports it.
# Runs as root and as an unprivileged user.
#   graded-host.sh AGENTBOX AS_CONTAINER PROBE
set -u
ab=$(realpath "$1")
ct=$(realpath "$2")
probe=$(realpath "$3")
fails=0
ok() { echo "ok   $1"; }
bad() {
	echo "FAIL $1" >&2
	fails=$((fails + 1))
}
ws=$(mktemp -d /tmp/agentbox-graded-XXXXXX)
chmod 755 "$ws"
bindir=
# as_container --mask-proc makes root uid 65534, who must own the workspace
# and reach agentbox (a checkout in root's 0700 home it cannot): a copy
if [ "$(id -u)" = 0 ]; then
	chown 65534:65534 "$ws"
	bindir=$(mktemp -d /tmp/agentbox-graded-bin-XXXXXX)
	chmod 755 "$bindir"
	cp "$ab" "$bindir/agentbox"
	cp -r "$(dirname "$0")/../../policy" "$bindir/policy"
	chmod -R a+rX "$bindir"
	ab=$bindir/agentbox
	export AGENTBOX_POLICY_DIR="$bindir/policy"
fi
cleanup() {
	kill "$outside" 2>/dev/null
	rm -rf "$ws" ${bindir:+"$bindir"}
}
sleep 4243 &
outside=$!
trap cleanup EXIT
cat >"$ws/find.sh" <<'FIND'
for f in /proc/[0-9]*/cmdline; do
	[ "$(tr '\0' ' ' <"$f" 2>/dev/null)" = "sleep 4243 " ] && echo "$f"
done
exit 0
FIND
cd "$ws" || exit 1
partial() { printf '"isolation":{"level":"partial","missing":[%s]}' "$1"; }

# 1. a container's masked /proc and its seccomp profile's sethostname (Podman)
out=$("$ct" --mask-proc --no-sethostname "$ab" run --workspace "$ws" -- true 2>&1)
rc=$?
[ $rc -eq 125 ] && echo "$out" | grep -q "isolation full: .*missing own-proc, uts" &&
	ok "full refuses, naming own-proc and uts" || bad "full: rc $rc: $out"
out=$("$ct" --mask-proc --no-sethostname "$ab" run --isolation best --report "$ws/r.json" \
	--workspace "$ws" -- sh -c 'hostname; sh /workspace/find.sh' 2>"$ws/err")
rc=$?
[ $rc -eq 0 ] && grep -qF "$(partial '"own-proc","uts"')" "$ws/r.json" &&
	ok "best runs and reports partial, missing own-proc and uts" ||
	bad "best: rc $rc: $(cat "$ws/err" "$ws/r.json" 2>/dev/null)"
[ "$(grep -c 'isolation best: partial isolation, missing' "$ws/err")" = 2 ] &&
	ok "stderr names each missing layer once" || bad "stderr: $(cat "$ws/err")"
echo "$out" | head -1 | grep -qx agentbox && bad "best set the host name, which was refused"
echo "$out" | grep -q /cmdline && ok "the bound /proc shows the outside's process, as reported" ||
	bad "own-proc reported missing, yet the outside's process is not in /proc: $out"
hello=$("$ct" --mask-proc --no-sethostname "$ab" serve --isolation best --workspace "$ws" \
	</dev/null 2>/dev/null | head -1)
echo "$hello" | grep -qF "$(partial '"own-proc","uts"')" && ok "the serve hello reports partial" ||
	bad "hello: $hello"
check=$("$ct" --mask-proc --no-sethostname "$ab" check 2>&1)
echo "$check" | grep -q "warn  isolation .*partial, missing own-proc, uts" &&
	ok "agentbox check says partial, missing own-proc, uts" || bad "check: $check"
echo "$check" | grep -q "seccomp=unconfined" && bad "check suggests an unconfined profile: $check"

# 2. sethostname refused only: /proc is the sandbox's own
out=$("$ct" --no-sethostname "$ab" run --isolation best --report "$ws/r.json" \
	--workspace "$ws" -- sh /workspace/find.sh 2>/dev/null)
rc=$?
[ $rc -eq 0 ] && grep -qF "$(partial '"uts"')" "$ws/r.json" && [ -z "$out" ] &&
	ok "only uts missing: reported alone, own /proc kept" || bad "uts only: rc $rc, $out"

# 3. no user namespaces (Docker's default profile): no sandbox in either mode
out=$("$ct" --no-userns "$ab" run --workspace "$ws" -- true 2>&1)
rc=$?
[ $rc -eq 125 ] && echo "$out" | grep -q "missing namespaces" &&
	ok "no user namespaces: full refuses, naming namespaces" || bad "no userns, full: $rc $out"
if [ "$(id -u)" = 0 ]; then
	out=$("$ct" --no-userns "$ab" run --isolation best --workspace "$ws" -- true 2>&1)
	rc=$?
	[ $rc -eq 125 ] && echo "$out" | grep -q "no sandbox without them as root" &&
		ok "no user namespaces, root: best refuses, the command would keep uid 0" ||
		bad "no userns, root, best: $rc $out"
else
	# what stays without namespaces (isolation_bare.c), each checked
	out=$("$ct" --no-userns "$ab" run --isolation best --report "$ws/r.json" --workspace "$ws" \
		-- sh -c 'echo "cwd $(pwd)"; touch ./in-ws && echo ws-writable
		touch "$HOME/in-tmp" && echo tmp-writable; touch /var/tmp/agentbox-out-$$ 2>/dev/null ||
		echo outside-refused; kill -0 $PPID 2>/dev/null || echo signal-out-refused
		(setsid sleep 4244 &) ; echo "tmp $TMPDIR"' 2>"$ws/err")
	rc=$?
	[ $rc -eq 0 ] && grep -qF "$(partial '"namespaces"')" "$ws/r.json" &&
		ok "no user namespaces: best runs, reports missing namespaces" || bad "bare: rc $rc $out $(cat "$ws/err")"
	echo "$out" | grep -qx "cwd $ws" && ok "bare: the workspace at its host path" || bad "bare cwd: $out"
	echo "$out" | grep -qx ws-writable && echo "$out" | grep -qx tmp-writable &&
		ok "bare: workspace and private tmp writable" || bad "bare writes: $out"
	echo "$out" | grep -qx outside-refused && ok "bare: writes elsewhere refused (Landlock)" ||
		bad "bare wrote outside: $out"
	echo "$out" | grep -qx signal-out-refused && ok "bare: no signal out of the sandbox" ||
		bad "bare signalled its launcher: $out"
	tmp=$(echo "$out" | sed -n 's/^tmp //p')
	pgrep -u "$(id -u)" -f "sleep 4244" >/dev/null && bad "bare: a setsid child outlived the run" ||
		ok "bare: the whole tree killed at the end"
	[ -n "$tmp" ] && [ ! -e "$tmp" ] && ok "bare: the private tmp removed" || bad "bare: $tmp left"
	out=$("$ct" --no-userns "$ab" run --isolation best --workspace "$ws" --skills /usr -- true 2>&1)
	[ $? -eq 125 ] && echo "$out" | grep -q "with --skills" && ok "bare: --skills refused" ||
		bad "bare --skills: $out"
fi

# 4. setns refused (Docker's and Podman's default profiles, agentbox's own for
# containers): the network namespace is made in the clone, not beside it, and
# the sandbox is the same: full, only loopback, and it is up
cp "$probe" "$ws/probe"
out=$("$ct" --no-setns "$ab" run --report "$ws/r.json" --workspace "$ws" -- \
	sh -c '/workspace/probe ifaces; /workspace/probe loopback' 2>&1)
rc=$?
[ $rc -eq 0 ] && [ "$out" = "$(printf 'lo\nok')" ] && grep -q '"isolation":"full"' "$ws/r.json" &&
	ok "setns refused: full isolation, only loopback, and it is up" ||
	bad "setns refused: rc $rc: $out"

# 5. nothing refused: full, and the outside is not in /proc
out=$("$ab" run --isolation best --report "$ws/r.json" --workspace "$ws" -- sh /workspace/find.sh 2>&1)
grep -q '"isolation":"full"' "$ws/r.json" && [ -z "$out" ] && ok "unrefused: best gives full" ||
	bad "unrefused: $out $(cat "$ws/r.json")"
exit $((fails > 0))
