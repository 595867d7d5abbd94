"""Build an OCI image layout of the host's tools the escape battery
(tests/security) runs in its sandboxes: the shells, coreutils and the
others it calls, with the libraries ldd names and python3's standard
library, as one layer plus a layer that deletes a file (so the battery runs
on stacked layers with a whiteout). Usage: tools_image.py LAYOUT_DIR"""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ocigen import Entry, layer_from_tree, write_layout  # noqa: E402

TOOLS = ("sh bash dash env timeout sleep id cat stat ls python3 chmod mount umount grep kill "
         "mkdir ln setsid mv rm head tail ps cp nohup dd readlink mkfifo find touch true false "
         "echo printf wc tr sort cut uname test expr seq pgrep pkill chown basename dirname "
         "tee od xargs mktemp sync nproc whoami ldd realpath sed awk tr getent unshare keyctl "
         "nsenter ip sha256sum du passwd su git").split()


def build(layout):
    tree = tempfile.mkdtemp(prefix="agentbox-tools-tree-")
    try:
        # a merged /usr as the host's: /bin -> usr/bin, ...
        for d in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            if os.path.islink("/" + d):
                os.makedirs(os.path.join(tree, "usr", d), exist_ok=True)
                os.symlink(os.readlink("/" + d), os.path.join(tree, d))
        progs = []
        for t in TOOLS:
            p = shutil.which(t, path="/usr/bin:/bin:/usr/sbin:/sbin")
            if p:
                progs.append(os.path.realpath(p))
                for name in {os.path.realpath(os.path.dirname(p)) + "/" + t, "/usr/bin/" + t}:
                    dst = tree + name
                    os.makedirs(os.path.dirname(dst), exist_ok=True)
                    if not os.path.exists(dst):
                        shutil.copy(os.path.realpath(p), dst)
        py = "/usr/lib/python3.%d" % sys.version_info[1]
        dynload = [os.path.join(d, f) for d in (py + "/lib-dynload", "/usr/lib/python3.11/lib-dynload",
                                                "/usr/lib/x86_64-linux-gnu/security")
                   if os.path.isdir(d) for f in os.listdir(d) if f.endswith(".so")]
        out = subprocess.run(["ldd"] + progs + dynload, capture_output=True, text=True).stdout
        for word in sorted(set(out.split())):
            if word.startswith("/") and os.path.exists(word):
                dst = tree + os.path.realpath(os.path.dirname(word)) + "/" + os.path.basename(word)
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                shutil.copy(word, dst)
        # passwd's PAM modules and git's templates, as the battery runs them
        for base in (py, "/usr/lib/python3.11", "/usr/lib/x86_64-linux-gnu/security",
                     "/etc/pam.d", "/usr/share/git-core/templates"):
            if os.path.isdir(base) and not os.path.exists(tree + base):
                shutil.copytree(base, tree + base, symlinks=True,
                                ignore=shutil.ignore_patterns("test", "tests", "__pycache__",
                                                              "idlelib", "tkinter", "ensurepip"))
        os.makedirs(tree + "/etc", exist_ok=True)
        for f in ("passwd", "group", "hosts", "nsswitch.conf", "login.defs"):
            if os.path.exists("/etc/" + f):
                shutil.copy("/etc/" + f, tree + "/etc/" + f)
        with open(tree + "/etc/deleted-by-upper", "w") as f:
            f.write("lower\n")
        for d in ("tmp", "home"):
            os.makedirs(os.path.join(tree, d), exist_ok=True)
        upper = [Entry.file("etc/.wh.deleted-by-upper", b""), Entry.file("etc/image-marker", b"x\n")]
        write_layout(layout, [layer_from_tree(tree), upper], env=["PATH=/usr/bin:/bin"])
    finally:
        shutil.rmtree(tree, True)


if __name__ == "__main__":
    build(sys.argv[1])
