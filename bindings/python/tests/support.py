"""What the client's tests share: a workspace the sandbox's user owns, a
Sandbox that skips where agentbox cannot run (never in CI, where
AGENTBOX_MUST_WORK=1), and agentbox loaded beside the deepagents stand-in."""

import importlib
import os
import sys
import tempfile
import unittest

ROOT = os.getuid() == 0
UID = 65534 if ROOT else os.getuid()
SANITIZED = os.environ.get("AGENTBOX_SANITIZED") == "1"
STANDIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "standin")


def workspace():
    d = tempfile.mkdtemp(prefix="agentbox-py-")
    if ROOT:
        os.chown(d, UID, UID)
    return d


def root_tree():
    """A minimal root tree for --rootfs (docs/rootfs.md): the host's dash
    as /bin/sh, cat and the libraries ldd names, an etc/passwd; no other
    host tool. The caller removes it."""
    import shutil
    import subprocess
    d = tempfile.mkdtemp(prefix="agentbox-py-root-")
    os.chmod(d, 0o755)
    for sub in ("bin", "etc", "opt"):
        os.mkdir(os.path.join(d, sub))
    shutil.copy("/bin/dash", os.path.join(d, "bin", "sh"))
    shutil.copy("/bin/cat", os.path.join(d, "bin", "cat"))
    out = subprocess.run(["ldd", "/bin/dash", "/bin/cat"], capture_output=True, text=True,
                         check=True).stdout
    for word in out.split():
        if word.startswith("/") and os.path.exists(word):
            dst = d + word
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            shutil.copy(word, dst)
    with open(os.path.join(d, "etc", "passwd"), "w") as f:
        f.write("root:x:0:0:root:/root:/bin/sh\n")
    with open(os.path.join(d, "opt", "marker"), "w") as f:
        f.write("from-tree\n")
    for base, dirs, files in os.walk(d):
        for n in dirs + files:
            os.chmod(os.path.join(base, n), 0o755)
    return d


def oci_image(tree):
    """An OCI image layout (docs/images.md) of tree plus a layer that adds
    /opt/layered and deletes /opt/marker, built by tests/image/ocigen.py;
    its Env sets IMGVAR. The caller removes it."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "..", "..", "tests", "image"))
    from ocigen import Entry, layer_from_tree, write_layout
    d = tempfile.mkdtemp(prefix="agentbox-py-oci-")
    os.chmod(d, 0o755)
    top = [Entry.file("opt/layered", b"layered\n"), Entry.file("opt/.wh.marker", b"")]
    write_layout(d, [layer_from_tree(tree), top], env=["IMGVAR=fromimage"])
    return d


def sandbox(ws, module=None, cls="Sandbox", **kw):
    import agentbox
    module = module or agentbox
    extra = tuple(kw.pop("extra_args", ()))
    if ROOT:
        extra += ("--host-uid", str(UID))
    try:
        return getattr(module, cls)(ws, extra_args=extra, **kw)
    except module.SandboxError as e:
        if os.environ.get("AGENTBOX_MUST_WORK") == "1" or "user namespace" not in str(e):
            raise
        raise unittest.SkipTest("agentbox cannot run here: %s" % e)


def _ours(name):
    return name in ("agentbox", "deepagents") or name.startswith(("agentbox.", "deepagents."))


def agentbox_with_standin():
    """A second agentbox package, imported while the deepagents stand-in
    is importable; sys.modules and sys.path are as they were after."""
    saved = {k: v for k, v in sys.modules.items() if _ours(k)}
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, STANDIN)
    try:
        ab = importlib.import_module("agentbox")
        proto = importlib.import_module("deepagents.backends.protocol")
    finally:
        sys.path.remove(STANDIN)
        for k in [k for k in sys.modules if _ours(k)]:
            del sys.modules[k]
        sys.modules.update(saved)
    return ab, proto


def status(pid, key):
    """A /proc/PID/status value in kB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)
