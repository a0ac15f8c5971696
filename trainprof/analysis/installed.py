"""Whether a file is installed code, by where it lies: under the standard library, a site or
scripts directory, or listed in the RECORD of a distribution installed beside it.

The second finds what ``pip install --target DIR`` put in DIR, however the job put DIR on its
path (PYTHONPATH, or ``sys.path.insert`` in a wrapper script): the folder that holds the file's
top-level package also holds the distribution's ``.dist-info``, whose RECORD lists the package.
An editable install's RECORD lists only its ``.pth`` and finder, so a project's own code stays
the user's. The directories are this environment's: the job runs with trainprof's interpreter,
or beside it; a run recorded on another machine has other paths, and ``usercode`` falls back on
the installers' folder names for those.
"""

from __future__ import annotations

import csv
import os
import site
import sys
import sysconfig
from functools import lru_cache

_SCHEME_KEYS = ("stdlib", "platstdlib", "purelib", "platlib", "scripts")


def _slashed(path: str) -> str:
    return path.replace("\\", "/")


def _site_dirs() -> set[str]:
    """The interpreter's standard library, site and scripts directories, of the environment and
    of the interpreter it was made from (a venv's base)."""
    dirs: set[str] = set()
    for base, platbase in {(sys.prefix, sys.exec_prefix), (sys.base_prefix, sys.base_exec_prefix)}:
        paths = sysconfig.get_paths(vars={"base": base, "platbase": platbase})
        dirs.update(paths[k] for k in _SCHEME_KEYS if paths.get(k))
    try:
        dirs.update(site.getsitepackages())
    except AttributeError:  # an old virtualenv's site module
        pass
    user = getattr(site, "getusersitepackages", None)
    if user is not None:
        dirs.add(user())
    return {d for d in dirs if d and os.path.isabs(d)}


@lru_cache(maxsize=1)
def site_roots() -> tuple[str, ...]:
    """The site directories (``_site_dirs``) as given and resolved, ``/``-separated and ending
    in ``/``."""
    roots = set()
    for d in _site_dirs():
        for p in (os.path.abspath(d), os.path.realpath(d)):
            roots.add(_slashed(p).rstrip("/") + "/")
    return tuple(sorted(roots))


@lru_cache(maxsize=4096)
def distribution_tops(directory: str) -> frozenset[str]:
    """The top-level names (``timm``, ``six.py``) of the files the distributions installed in
    ``directory`` list in their RECORD; empty where it holds no ``.dist-info``."""
    try:
        infos = [n for n in os.listdir(directory) if n.endswith(".dist-info")]
    except OSError:
        return frozenset()
    tops: set[str] = set()
    for info in infos:
        try:
            with open(os.path.join(directory, info, "RECORD"), encoding="utf-8", newline="") as f:
                rows = list(csv.reader(f))
        except (OSError, UnicodeDecodeError, csv.Error):
            continue
        for row in rows:
            top = _slashed(row[0]).split("/", 1)[0] if row else ""
            if (
                top
                and top not in ("..", ".", "__pycache__")
                and not top.endswith((".dist-info", ".data"))
            ):
                tops.add(top)
    return frozenset(tops)


def _in_a_distribution(path: str) -> bool:
    """Whether a folder above ``path`` holds a distribution whose RECORD lists the top-level
    name ``path`` lies under."""
    parts = path.split("/")
    for i in range(len(parts) - 1, 0, -1):
        directory = "/".join(parts[:i]) or "/"
        if parts[i] in distribution_tops(directory):
            return True
    return False


@lru_cache(maxsize=8192)
def is_installed(path: str) -> bool:
    """True when ``path`` (absolute, ``/``-separated) is installed code of this environment."""
    if not path.startswith("/") and not (len(path) > 2 and path[1] == ":"):
        return False  # relative, or not a path (<frozen runpy>): nothing to look at
    real = _slashed(os.path.realpath(path))
    if path.startswith(site_roots()) or real.startswith(site_roots()):
        return True
    return _in_a_distribution(path) or (real != path and _in_a_distribution(real))
