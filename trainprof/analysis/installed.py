"""Where this environment's installed code lies: the standard library, the site directories,
the installed scripts (``torchrun``, ``accelerate``), and the files of each distribution
installed elsewhere on ``sys.path`` (``pip install --target`` onto PYTHONPATH), by real paths.

The job runs with trainprof's interpreter, or one sharing its environment variables (its
PYTHONPATH), so these are the job's too; a run recorded on another machine has other paths, and
``usercode`` falls back on the installers' folder names for those. An editable install of the
user's own project lists no source file in its RECORD: its code stays the user's.
"""

from __future__ import annotations

import os
import site
import sys
import sysconfig
from functools import lru_cache
from importlib import metadata

_SCHEME_KEYS = ("stdlib", "platstdlib", "purelib", "platlib", "scripts")


def forms(path: str, directory: bool) -> tuple[str, ...]:
    """``path`` as given and resolved, absolute and ``/``-separated, a directory's ending in
    ``/``."""
    both = {os.path.abspath(path), os.path.realpath(path)}
    out = {p.replace("\\", "/").rstrip("/") + ("/" if directory else "") for p in both}
    return tuple(sorted(out))


def _site_dirs() -> set[str]:
    """The interpreter's standard library, site and scripts directories, of the environment and
    of the interpreter it was made from (a venv's base)."""
    dirs: set[str] = set()
    bases = {
        (sys.prefix, sys.exec_prefix),
        (sys.base_prefix, sys.base_exec_prefix),
    }
    for base, platbase in bases:
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


def _distribution_files(entry: str) -> set[str]:
    """The top-level files and folders of the distributions installed in ``entry``, a
    ``sys.path`` folder outside the site directories, by their RECORD; none where it holds no
    ``.dist-info``."""
    try:
        if not any(n.endswith(".dist-info") for n in os.listdir(entry)):
            return set()
    except OSError:
        return set()
    out: set[str] = set()
    for dist in metadata.distributions(path=[entry]):
        for f in dist.files or ():
            top = f.parts[0] if f.parts else ""
            if not top or top in ("..", "__pycache__") or top.endswith((".dist-info", ".data")):
                continue
            out.add(os.path.join(entry, top))
    return out


@lru_cache(maxsize=1)
def installed_roots() -> tuple[str, ...]:
    """Path prefixes of installed code (see ``forms``): the site directories, and what
    distributions installed elsewhere on ``sys.path`` (or PYTHONPATH) put there."""
    sites = _site_dirs()
    roots: set[str] = set()
    for d in sites:
        roots.update(forms(d, directory=True))
    site_forms = tuple(roots)
    entries = [*sys.path, *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    for entry in dict.fromkeys(e for e in entries if e and os.path.isabs(e)):
        if not os.path.isdir(entry):
            continue
        if any(f.startswith(site_forms) for f in forms(entry, directory=True)):
            roots.update(forms(entry, directory=True))  # a site directory, through a link
            continue
        for path in _distribution_files(entry):
            roots.update(forms(path, os.path.isdir(path)))
    return tuple(sorted(roots))


def is_installed(path: str) -> bool:
    """True when ``path`` (``/``-separated) lies in installed code of this environment."""
    return any(
        path == root or (root.endswith("/") and path.startswith(root)) for root in installed_roots()
    )
