# bash completion for agentbox

# the sandbox profiles --profile NAME finds: shipped ones and any added
_agentbox_profiles()
{
	local d f names="agent offline-build untrusted"
	for d in ${AGENTBOX_POLICY_DIR:+"$AGENTBOX_POLICY_DIR"} /usr/share/agentbox/policy \
		/usr/local/share/agentbox/policy; do
		for f in "$d"/sandbox/*.json; do
			[ -e "$f" ] && f=${f##*/} && names="$names ${f%.json}"
		done
	done
	echo "$names"
}

_agentbox()
{
	local cur prev opts
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	local common="--profile --workspace --workspace-mode --keep-changes --cwd --skills --ro-bind --bind --tmpfs --home --hostname --net
		--uid --gid --host-uid --host-gid --env-policy --pass-env --env --memory --cpus --pids
		--cgroup-parent --require-limits --timeout --kill-after --max-timeout --tmpfs-size
		--rlimit --max-output --seccomp --landlock --protect --protect-created --unprotect --help"
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "run serve mcp runtime check changes commit discard --help --version" -- "$cur"))
		return
	fi
	case $prev in
	--workspace|--skills|--cgroup-parent|--keep-changes) COMPREPLY=($(compgen -d -- "$cur")); return ;;
	--workspace-mode) COMPREPLY=($(compgen -W "direct overlay" -- "$cur")); return ;;
	--ro-bind|--bind|--report|--audit-log) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--net) COMPREPLY=($(compgen -W "none host" -- "$cur")); return ;;
	--env-policy) COMPREPLY=($(compgen -W "core none all" -- "$cur")); return ;;
	--landlock) COMPREPLY=($(compgen -W "on off" -- "$cur")); return ;;
	--protect-created) COMPREPLY=($(compgen -W "quarantine report" -- "$cur")); return ;;
	--output-encoding) COMPREPLY=($(compgen -W "utf8 base64" -- "$cur")); return ;;
	--profile) COMPREPLY=($(compgen -W "$(_agentbox_profiles)" -- "$cur") $(compgen -f -- "$cur")); return ;;
	--seccomp) COMPREPLY=($(compgen -W "default strict permissive none" -- "$cur") $(compgen -f -- "$cur")); return ;;
	esac
	case ${COMP_WORDS[1]} in
	run) opts="$common -c --report --capture --merge-output --output-encoding" ;;
	serve) opts="$common --max-concurrent --audit-log" ;;
	mcp) opts="$common --max-concurrent" ;;
	runtime) opts="$common --max-concurrent --listen --http-port --http-timeout --drain-timeout" ;;
	check) opts="--json --cgroup-parent --help" ;;
	changes) opts="--json --diff --max-diff-bytes --ignored --help" ;;
	commit) opts="--force --help" ;;
	discard) opts="--help" ;;
	esac
	case ${COMP_WORDS[1]} in
	changes|commit|discard)
		[[ $cur != -* ]] && { COMPREPLY=($(compgen -d -- "$cur")); return; } ;;
	esac
	local i
	for ((i = 2; i < COMP_CWORD; i++)); do
		[ "${COMP_WORDS[i]}" = "--" ] && { COMPREPLY=($(compgen -c -- "$cur")); return; }
	done
	COMPREPLY=($(compgen -W "$opts" -- "$cur"))
}
complete -F _agentbox agentbox
