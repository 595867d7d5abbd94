"""The client's PEP 517 build backend: standard library only, so that
`pip install ./bindings/python` needs no package index (pip asks an index
for setuptools and wheel whenever the backend is one of theirs). It builds
the one pure-Python package there is: agentbox/*.py plus the metadata of
pyproject.toml's [project] table."""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "agentbox"


def _project():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        text = f.read().decode("utf-8")
    try:
        import tomllib  # Python 3.11
        return tomllib.loads(text)["project"]
    except ImportError:
        return _parse_project(text)


def _parse_project(text):
    """The few forms pyproject.toml's [project] uses, for Pythons before
    tomllib: key = "string", key = [ "strings", ... ], [project.X] tables."""
    project, table = {}, None
    for m in re.finditer(r'^\[([^\]]+)\]\s*$|^([A-Za-z0-9_-]+)\s*=\s*("[^"]*"|\[[^\]]*\])',
                         text, re.M | re.S):
        if m.group(1):
            name = m.group(1).strip()
            sub = name[len("project."):]
            if sub.startswith("entry-points."):  # entry-points."group"
                table = project.setdefault("entry-points", {}).setdefault(
                    sub[len("entry-points."):].strip('"'), {})
            else:
                table = project if name == "project" else (
                    project.setdefault(sub, {}) if name.startswith("project.") else None)
        elif table is not None:
            v = m.group(3)
            table[m.group(2)] = (v[1:-1] if v.startswith('"')
                                 else re.findall(r'"([^"]*)"', v))
    return project


def _dist_name(p):
    return "%s-%s" % (re.sub(r"[-_.]+", "_", p["name"]), p["version"])


def _metadata(p):
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"]]
    if p.get("description"):
        lines.append("Summary: " + p["description"])
    if p.get("requires-python"):
        lines.append("Requires-Python: " + p["requires-python"])
    lines += ["Classifier: " + c for c in p.get("classifiers", [])]
    for extra, reqs in p.get("optional-dependencies", {}).items():
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s; extra == "%s"' % (r, extra) for r in reqs]
    body = ""
    readme = p.get("readme")
    if isinstance(readme, str):
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(ROOT, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _sources():
    src = os.path.join(ROOT, PACKAGE)
    return sorted(n for n in os.listdir(src) if n.endswith(".py") or n == "py.typed")


def _write_wheel(wheel_directory, files):
    """files: {archive name: bytes}; the dist-info's WHEEL and RECORD added."""
    p = _project()
    dist = _dist_name(p)
    info = dist + ".dist-info"
    files[info + "/METADATA"] = _metadata(p).encode("utf-8")
    groups = p.get("entry-points", {})
    if groups:  # deepagents-code finds the provider through one
        files[info + "/entry_points.txt"] = "".join(
            "[%s]\n%s\n" % (g, "".join("%s = %s\n" % kv for kv in eps.items()))
            for g, eps in groups.items()).encode("utf-8")
    files[info + "/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: agentbox_backend\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        record.append("%s,sha256=%s,%d" % (name, digest.decode(), len(data)))
    record.append(info + "/RECORD,,")
    files[info + "/RECORD"] = ("\n".join(record) + "\n").encode("utf-8")
    wheel = dist + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w",
                         zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    return wheel


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    for n in _sources():
        with open(os.path.join(ROOT, PACKAGE, n), "rb") as f:
            files["%s/%s" % (PACKAGE, n)] = f.read()
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """pip install -e: a .pth file that puts this directory on sys.path."""
    return _write_wheel(wheel_directory,
                        {"__editable__.agentbox.pth": (ROOT + "\n").encode("utf-8")})


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    base = _dist_name(p)
    names = ["pyproject.toml", "README.md", "_backend/agentbox_backend.py"]
    names += ["%s/%s" % (PACKAGE, n) for n in _sources()]
    sdist = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, sdist), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for n in names:
            t.add(os.path.join(ROOT, n), arcname="%s/%s" % (base, n))
        info = tarfile.TarInfo("%s/PKG-INFO" % base)
        data = _metadata(p).encode("utf-8")
        info.size = len(data)
        t.addfile(info, io.BytesIO(data))
    return sdist
