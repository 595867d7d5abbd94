"""The report of bench/run: markdown tables, the machine and versions, and a
gnuplot chart, from the results the measuring half wrote as JSON."""
import datetime
import os
import platform
import subprocess

MiB = 1 << 20


def first_line(argv):
    try:
        out = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        return out.stdout.strip().splitlines()[0]
    except (OSError, IndexError):
        return "?"


def cell(s):
    """Text for a markdown table cell."""
    return s.replace("|", "\\|")


def ms(x):
    return f"{x * 1e3:.2f} ms"


def mib(kb):
    return f"{kb / 1024:.1f} MiB" if kb is not None else "?"


def render(r):
    out = []
    w = out.append
    st = {x["key"]: x for x in r["startup"]}
    bw, bare = st["bwrap"]["median"], st["bare"]["median"]
    n = st["bare"]["n"]
    p = r["params"]
    w(f"### One-shot startup\n\n`/bin/true` started {n} times each with `hyperfine -N`, in "
      f"{p['rounds']} interleaved round(s); medians.\n")
    w("| command | median | min – max | × bwrap | × bare | isolation |")
    w("| --- | ---: | ---: | ---: | ---: | --- |")
    for x in r["startup"][:4]:
        w(f"| {x['label']} | {ms(x['median'])} | {ms(x['min'])} – {ms(x['max'])} | "
          f"{x['median'] / bw:.2f} | {x['median'] / bare:.2f} | {x['isolation']} |")
    ab = st["agentbox"]["median"]
    w("\n### Cost of each layer\n\n`agentbox run -- /bin/true` with one layer turned off "
      "at a time (same hyperfine rounds); the saving is what the layer costs.\n")
    w("| variant | turned off | median | min – max | saving vs default |")
    w("| --- | --- | ---: | ---: | ---: |")
    w(f"| agentbox run (default) | nothing | {ms(ab)} | {ms(st['agentbox']['min'])} – "
      f"{ms(st['agentbox']['max'])} | |")
    for x in r["startup"][4:]:
        w(f"| {x['label']} | {x['isolation']} | {ms(x['median'])} | {ms(x['min'])} – "
          f"{ms(x['max'])} | {(ab - x['median']) * 1e3:+.2f} ms |")
    w("\nNo option turns these off, so they are not measured apart:\n")
    for s in r["no_switch"]:
        w(f"- {s}")

    back = [x for x in r["roundtrip"] if not x.get("gap_s")]
    spaced = [x for x in r["roundtrip"] if x.get("gap_s")]
    rt = {x["key"]: x for x in back}
    sub = rt["subprocess"]["median"]
    cap_sub = rt["subprocess-capture"]["median"]
    w(f"\n### Session round trip\n\nPer request, sequential, one request in flight, "
      f"{p['rt_rounds']} interleaved round(s), back to back; raw JSON lines from Python, "
      f"and the Python client's `execute(\"true\")`; `true` runs under `/bin/sh -c` in "
      f"every case.\n")
    w("| method | requests | median | min – max | × subprocess.run | × subprocess.run "
      "(capture_output) |")
    w("| --- | ---: | ---: | ---: | ---: | ---: |")
    for x in back:
        w(f"| {x['label']} | {x['n']} | {ms(x['median'])} | {ms(x['min'])} – {ms(x['max'])} | "
          f"{x['median'] / sub:.2f} | {x['median'] / cap_sub:.2f} |")
    if spaced:
        gap = spaced[0]["gap_s"]
        cap_gap = {x["key"]: x for x in spaced}["subprocess-capture"]["median"]
        w(f"\nThe same with {gap:g} s before each request (an agent's cadence), one request "
          f"of each in a rotating order per round, {spaced[0]['n']} rounds:\n")
        w("| method | median | min – max | × subprocess.run (capture_output) |")
        w("| --- | ---: | ---: | ---: |")
        for x in spaced:
            w(f"| {x['label']} | {ms(x['median'])} | {ms(x['min'])} – {ms(x['max'])} | "
              f"{x['median'] / cap_gap:.2f} |")

    if "cadence" in r:
        cadence(r, w)

    cap = {x["key"]: x for x in r["capture"]}
    raw = cap["raw"]["mibps"]
    w(f"\n### Output capture\n\nInput: zeros is `head -c N /dev/zero`; text is a file of "
      f"printable lines and random is one of random bytes, made beforehand in the workspace "
      f"and `cat` several times (NUL bytes would measure JSON's six-byte escape of each). MiB/s "
      f"of the command's output bytes over the median time, start-up included for `run`; the "
      f"serve times are from request to result, the output events read as lines (the server's "
      f"own `duration_ms` in brackets). Peak RSS is the launcher's VmHWM (polled for `run`, "
      f"read after the result for `serve`; a fresh session each time).\n")
    w("| path | input | size | runs | median | MiB/s | × raw pipe | launcher peak RSS |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for x in r["capture"]:
        extra = f" ({x['server_ms']:.0f} ms)" if "server_ms" in x else ""
        w(f"| {cell(x['label'])} | {x.get('input', 'zeros')} | {x['bytes'] // MiB} MiB | "
          f"{x['n']} | {x['median']:.3f} s{extra} | {x['mibps']:.0f} | {x['mibps'] / raw:.2f} | "
          f"{mib(x['peak_rss_kb']) if x['peak_rss_kb'] else '–'} |")
    if "tree_maxrss_kb" in cap["run"]:
        w(f"\n`agentbox run --capture`: the launcher's peak RSS is "
          f"{mib(cap['run']['baseline_rss_kb'])} when the command prints nothing; the largest "
          f"ru_maxrss of the launcher and the processes it reaped (wait4) is "
          f"{mib(cap['run']['tree_maxrss_kb'])}.")
    if "stream-text" in cap:  # issue 21, item 4
        peak = max(x["peak_rss_kb"] or 1e9 for x in r["capture"] if x["key"] != "raw")
        w(f"\nStreaming (issue 21): text {cap['stream-text']['mibps']:.0f} MiB/s (target "
          f"≥ 1024: {'met' if cap['stream-text']['mibps'] >= 1024 else 'not met'}), base64 "
          f"{cap['stream-b64']['mibps']:.0f} MiB/s (target ≥ 500: "
          f"{'met' if cap['stream-b64']['mibps'] >= 500 else 'not met'}); the launcher's "
          f"largest peak RSS of every path {mib(peak)} (target ≤ 4 MiB: "
          f"{'met' if peak <= 4096 else 'not met'}).")

    idle, con = r["idle"], r["concurrent"]
    how = "" if idle["pss_known"] and con["pss_known"] else \
        " The sandbox's processes are not dumpable, so only root may read their Pss: " \
        "run bench/run as root for the totals (? here)."
    w(f"\n### Memory of sessions\n\nPss from /proc/PID/smaps_rollup of the `agentbox serve` "
      f"launcher and every process below it, after a `ping`.{how}\n")
    w("| what | value |")
    w("| --- | ---: |")
    w(f"| one idle session, Pss (median of {len(idle['all_pss_kb'])}) | {mib(idle['pss_kb'])} "
      f"(RSS {mib(idle['rss_kb'])}) |")
    for q in idle["procs"]:
        w(f"| &nbsp; pid {q['pid']} `{q['comm']}` | Pss {mib(q['pss'])} · RSS {mib(q['rss'])} |")
    w(f"| {con['n']} concurrent sessions: alive / answered ping | {con['alive']} / "
      f"{con['pongs']} |")
    w(f"| &nbsp; time to start all (Popen to the last hello) | {con['start_s']:.2f} s |")
    w(f"| &nbsp; ping to all, all pongs | {con['ping_all_s'] * 1e3:.1f} ms |")
    w(f"| &nbsp; processes | {con['processes']} |")
    w(f"| &nbsp; total Pss (RSS) | {mib(con['pss_kb'])} ({mib(con['rss_kb'])}) |")
    w(f"| &nbsp; Pss per session | "
      f"{mib(con['pss_kb'] / con['n']) if con['pss_known'] else '?'} |")
    w(f"| &nbsp; shutdown of all | {con['stop_s']:.2f} s |")

    s = r["setup"]
    w(f"\n### Setup rate\n\n{s['n']} sessions one after another: start, hello, shutdown, "
      f"exit.\n")
    w("| what | value |")
    w("| --- | ---: |")
    w(f"| sessions per second | {s['per_s']:.1f} |")
    w(f"| create (spawn to hello), median (min – max) | {ms(s['create']['median'])} "
      f"({ms(s['create']['min'])} – {ms(s['create']['max'])}) |")
    w(f"| shutdown (request to exit), median (min – max) | {ms(s['shutdown']['median'])} "
      f"({ms(s['shutdown']['min'])} – {ms(s['shutdown']['max'])}) |")

    w("\n### Against the targets of issue 8\n")
    w("| target | now | met |")
    w("| --- | ---: | :---: |")
    big = [x for x in r["capture"] if x["key"] == "run"][0]
    rows = [
        ("one-shot startup ≤ 0.5 × bwrap", f"{ab / bw:.2f} ×", ab / bw <= 0.5),
        ("session round trip ≤ 1.0 × subprocess.run", f"{rt['serve']['median'] / sub:.2f} ×",
         rt["serve"]["median"] / sub <= 1.0),
        ("&nbsp; the same, against subprocess.run capturing the output",
         f"{rt['serve']['median'] / cap_sub:.2f} ×", rt["serve"]["median"] / cap_sub <= 1.0),
        ("capture ≥ 1 GiB/s (run --capture)", f"{big['mibps']:.0f} MiB/s", big["mibps"] >= 1024),
        ("capture RSS ≤ 4 MiB (run --capture launcher)", mib(big["peak_rss_kb"]),
         (big["peak_rss_kb"] or 1e9) <= 4096),
        ("one idle session ≤ 2 MiB (Pss)", mib(idle["pss_kb"]),
         idle["pss_known"] and idle["pss_kb"] <= 2048),
        (f"{con['n']} concurrent sessions", f"{con['pongs']} answered",
         con["pongs"] == con["n"]),
    ]
    for t, now, ok in rows:
        w(f"| {t} | {now} | {'?' if now == '?' else 'yes' if ok else 'no'} |")
    return "\n".join(out) + "\n"


def cadence_ratios(r):
    """{gap: (run / bwrap, execute / subprocess.run capturing)} of the medians."""
    med = {(x["key"], x["gap_s"]): x["median"] for x in r["cadence"]}
    gaps = sorted({x["gap_s"] for x in r["cadence"]})
    return {g: (med[("run", g)] / med[("bwrap", g)],
                med[("execute", g)] / med[("subprocess", g)]) for g in gaps}


def cadence(r, w):
    """The agent's cadence: back to back and with a pause before each run."""
    gaps = sorted({x["gap_s"] for x in r["cadence"]})
    med = {(x["key"], x["gap_s"]): x for x in r["cadence"]}
    keys = list(dict.fromkeys(x["key"] for x in r["cadence"]))
    label = {x["key"]: x["label"] for x in r["cadence"]}
    base = {"run": "bwrap", "bwrap": "bwrap", "execute": "subprocess",
            "subprocess": "subprocess"}

    def gap_name(g):
        return "back to back" if g == 0 else f"{g:.1f} s gaps"

    w(f"\n### At an agent's cadence\n\nOne start at a time, each contender once per round "
      f"in a rotating order, {med[(keys[0], gaps[0])]['n']} rounds per cadence: back to back, "
      f"and with a pause before every run (agents think between commands). One-shot starts "
      f"are spawned and waited for (stdout to /dev/null); the session is the Python client's "
      f"`execute(\"true\")`; medians, and the ratio to bwrap (one-shot) or to "
      f"`subprocess.run` (session) in the same cadence.\n")
    w("| method | " + " | ".join(f"{gap_name(g)} | ×" for g in gaps) + " |")
    w("| --- | " + " | ".join("---: | ---:" for _ in gaps) + " |")
    for k in keys:
        cells = []
        for g in gaps:
            x = med[(k, g)]
            cells.append(f"{ms(x['median'])} | {x['median'] / med[(base[k], g)]['median']:.2f}")
        w(f"| {cell(label[k])} | " + " | ".join(cells) + " |")
    ratios = cadence_ratios(r)
    w("\n| target of issue 21 | now | met |")
    w("| --- | ---: | :---: |")
    g = max(gaps)
    run, ex = ratios[g]
    w(f"| {gap_name(g)}: agentbox run ≤ 1.0 × bwrap | {run:.2f} × | "
      f"{'yes' if run <= 1.0 else 'no'} |")
    w(f"| {gap_name(g)}: session execute ≤ 0.8 × subprocess.run capturing | {ex:.2f} × | "
      f"{'yes' if ex <= 0.8 else 'no'} |")


def machine(r, total_s, repo):
    mem_kb = int(next(line for line in open("/proc/meminfo") if line.startswith("MemTotal"))
                 .split()[1])
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "?")
    debian = open("/etc/debian_version").read().strip() if os.path.exists(
        "/etc/debian_version") else "?"
    v = r["versions"]
    rev = subprocess.run(["git", "-C", repo, "describe", "--always", "--dirty"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout
    return [
        f"- machine: {os.cpu_count()} CPUs ({cpu}), {mem_kb / 1024 / 1024:.1f} GiB, Linux "
        f"{platform.release()}, Debian {debian}",
        f"- versions: {v['agentbox']}" + (f" (git {rev.strip()})" if rev.strip() else "")
        + f", {v['bwrap']}, {v['hyperfine']}, {v['python']}, "
        f"{first_line(['gnuplot', '--version'])}",
        f"- measured as user `{v['user']}`; cgroup parent: "
        f"{r['cgroup_parent'] or 'none (no cgroup could be made)'}",
        f"- mode: {r['mode']}; measuring took {r['measure_s']:.0f} s, the whole run "
        f"{total_s:.0f} s",
    ]


def chart(r, png):
    """Three panels: startup and layers (ms), round trip (ms), capture (MiB/s)."""
    def block(name, rows):
        lines = [f"${name} << EOD"]
        for label, val in rows:
            lines.append(f'"{label}" {val:.4f}')
        return lines + ["EOD"]

    start = [(x["label"].replace("agentbox ", "ab "), x["median"] * 1e3) for x in r["startup"]]
    rt = [(x["key"], x["median"] * 1e3) for x in r["roundtrip"] if not x.get("gap_s")]
    cap = [(x["key"], x["mibps"]) for x in r["capture"]]
    term = "pngcairo size 1400,1100 font 'sans,10'"
    if "pngcairo" not in subprocess.run(["gnuplot", "-e", "set terminal"], text=True,
                                        stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT).stdout:
        term = "png size 1400,1100"
    script = block("start", start) + block("rt", rt) + block("cap", cap) + [
        f"set terminal {term}",
        f"set output '{png}'",
        "set style fill solid 0.8 border -1",
        "set boxwidth 0.6",
        "set grid ytics",
        "set yrange [0:*]",
        "set offsets 0, 0, graph 0.15, 0",
        "set xtics nomirror rotate by -25 noenhanced",
        "set multiplot layout 3,1 title "
        f"'agentbox benchmarks ({r['mode']}, {datetime.date.today()})'",
        "set title 'one-shot startup of /bin/true and the cost of each layer: median ms'",
        "plot $start using 0:2:xtic(1) with boxes lc rgb '#4477aa' notitle, "
        "'' using 0:2:(sprintf('%.2f',$2)) with labels offset 0,0.8 notitle",
        "set title 'session round trip per request: median ms'",
        "plot $rt using 0:2:xtic(1) with boxes lc rgb '#228833' notitle, "
        "'' using 0:2:(sprintf('%.2f',$2)) with labels offset 0,0.8 notitle",
        "set title 'output capture (zeros; streamed: text, random as base64): MiB/s (median)'",
        "plot $cap using 0:2:xtic(1) with boxes lc rgb '#ee6677' notitle, "
        "'' using 0:2:(sprintf('%.0f',$2)) with labels offset 0,0.8 notitle",
        "unset multiplot",
    ]
    p = subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if p.returncode != 0:
        raise RuntimeError("gnuplot failed:\n" + p.stdout)
