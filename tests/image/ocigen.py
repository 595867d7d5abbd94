"""Build OCI image layouts for the tests and benchmarks: no network, no
podman. A layer is a list of entries; the layout gets its blobs, manifest,
config and index.json as skopeo writes them (docs/images.md).

    from ocigen import Entry, layer_from_tree, write_layout
    base = layer_from_tree("/tmp/tree")
    top = [Entry.file("opt/new", b"new\\n"), Entry.file("opt/.wh.gone", b"")]
    write_layout("/tmp/img", [base, top], env=["A=b"], workdir="/opt", tag="v1")
"""

import gzip
import hashlib
import io
import json
import os
import tarfile

GZ = "application/vnd.oci.image.layer.v1.tar+gzip"
TAR = "application/vnd.oci.image.layer.v1.tar"


class Entry:
    def __init__(self, name, kind, data=b"", link="", mode=0o644, devmajor=0, devminor=0):
        self.name, self.kind, self.data, self.link, self.mode = name, kind, data, link, mode
        self.devmajor, self.devminor = devmajor, devminor

    @staticmethod
    def file(name, data, mode=0o644):
        return Entry(name, tarfile.REGTYPE, data, mode=mode)

    @staticmethod
    def dir(name, mode=0o755):
        return Entry(name, tarfile.DIRTYPE, mode=mode)

    @staticmethod
    def symlink(name, target):
        return Entry(name, tarfile.SYMTYPE, link=target, mode=0o777)

    @staticmethod
    def hardlink(name, target):
        return Entry(name, tarfile.LNKTYPE, link=target)

    @staticmethod
    def chardev(name, major, minor):
        return Entry(name, tarfile.CHRTYPE, devmajor=major, devminor=minor)


def tar_bytes(entries):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        for e in entries:
            ti = tarfile.TarInfo(e.name)
            ti.type, ti.mode, ti.linkname = e.kind, e.mode, e.link
            ti.devmajor, ti.devminor = e.devmajor, e.devminor
            ti.uid = ti.gid = 0
            ti.mtime = 1700000000
            if e.kind == tarfile.REGTYPE:
                ti.size = len(e.data)
                t.addfile(ti, io.BytesIO(e.data))
            else:
                t.addfile(ti)
    return buf.getvalue()


def layer_from_tree(root):
    """A layer of every file, directory and link under root, sorted."""
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        rel = os.path.relpath(dirpath, root)
        for name in sorted(dirs + files):
            path = os.path.join(dirpath, name)
            arc = name if rel == "." else os.path.join(rel, name)
            st = os.lstat(path)
            if os.path.islink(path):
                out.append(Entry.symlink(arc, os.readlink(path)))
            elif os.path.isdir(path):
                out.append(Entry.dir(arc, st.st_mode & 0o7777))
            else:
                with open(path, "rb") as f:
                    out.append(Entry.file(arc, f.read(), st.st_mode & 0o7777))
    return out


def _blob(layout, data):
    digest = hashlib.sha256(data).hexdigest()
    d = os.path.join(layout, "blobs", "sha256")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, digest), "wb") as f:
        f.write(data)
    return {"digest": "sha256:" + digest, "size": len(data)}


def write_layout(layout, layers, env=None, workdir=None, user=None, tag="latest",
                 compress=True, raw_layers=None, arch="amd64"):
    """The layout at layout (made), one manifest tagged tag; layers are
    entry lists (or bytes: a blob as is). Returns the layer digests."""
    os.makedirs(layout, exist_ok=True)
    with open(os.path.join(layout, "oci-layout"), "w") as f:
        json.dump({"imageLayoutVersion": "1.0.0"}, f)
    descs, diff_ids = [], []
    for layer in layers:
        tar = layer if isinstance(layer, bytes) else tar_bytes(layer)
        data = gzip.compress(tar, compresslevel=1, mtime=0) if compress else tar
        d = _blob(layout, data)
        d["mediaType"] = GZ if compress else TAR
        descs.append(d)
        diff_ids.append("sha256:" + hashlib.sha256(tar).hexdigest())
    conf = {"Env": env or []}
    if workdir:
        conf["WorkingDir"] = workdir
    if user:
        conf["User"] = user
    config = {"architecture": arch, "os": "linux", "config": conf,
              "rootfs": {"type": "layers", "diff_ids": diff_ids}}
    cd = _blob(layout, json.dumps(config).encode())
    cd["mediaType"] = "application/vnd.oci.image.config.v1+json"
    manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": cd, "layers": descs}
    md = _blob(layout, json.dumps(manifest).encode())
    md["mediaType"] = "application/vnd.oci.image.manifest.v1+json"
    md["annotations"] = {"org.opencontainers.image.ref.name": tag}
    index_path = os.path.join(layout, "index.json")
    index = {"schemaVersion": 2, "manifests": []}
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
    index["manifests"] = [m for m in index["manifests"]
                          if m.get("annotations", {}).get("org.opencontainers.image.ref.name") != tag]
    index["manifests"].append(md)
    with open(index_path, "w") as f:
        json.dump(index, f)
    return [d["digest"][7:] for d in descs]
