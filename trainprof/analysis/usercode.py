"""One answer to "is this file the user's own code?", for py-spy frames and traceback text alike.

Installed code is told by where it lies (``installed``: the standard library, the site and
scripts directories, the files a distribution installed beside them lists in its RECORD), and
trainprof's and torch's own code by their packages' real directories, never by a word in the
path: a user's script in a folder named ``trainprof`` or ``torch`` is the user's, a distribution
installed with ``pip install --target`` into a folder named ``vendor`` is not. The installers' folder names
serve for paths of another environment (a run recorded on another machine). Cached: py-spy
profiles repeat the same few hundred paths millions of times.
"""

from __future__ import annotations

import importlib.util
import os
import re
from functools import lru_cache

from trainprof.analysis.installed import is_installed

# Not the user's code, in another environment's paths too: installed packages, the standard
# library (also on Windows and for other interpreter layouts), interpreter internals such as
# <frozen runpy> (but <string>, <stdin> and IPython cells are the user's), and code generated at
# run time (Inductor's kernels under /tmp/torchinductor_<user>/).
_LIBRARY = re.compile(
    r"site-packages|dist-packages"
    r"|/lib(?:64)?/python\d"
    r"|^[A-Za-z]:/.*/Lib/"
    r"|/multiprocessing/"
    r"|/(?:threading|runpy|selectors|socket|queue)\.py$"
    r"|^<(?!string>|stdin>|ipython-input)"
    r"|<frozen"
    r"|torchinductor_"
)
# torch, and trainprof's bundled examples (user code), installed in any environment: the job's
# own (it may not be trainprof's), or another machine's for a run recorded there.
_INSTALLED_TORCH = re.compile(r"(?:site|dist)-packages/torch/")
_INSTALLED_EXAMPLES = re.compile(r"(?:site|dist)-packages/trainprof/examples/")
_INSTALLED_TRAINPROF = re.compile(r"(?:site|dist)-packages/trainprof/")


@lru_cache(maxsize=1)
def _roots() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(trainprof's package directories, its bundled examples', torch's): each as imported and
    resolved, ``/``-separated and ending in ``/``; torch's only where this environment has it."""

    def forms(directory: str) -> tuple[str, ...]:
        both = {os.path.abspath(directory), os.path.realpath(directory)}
        return tuple(sorted(p.replace("\\", "/").rstrip("/") + "/" for p in both))

    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    torch: tuple[str, ...] = ()
    try:  # finds torch without importing it
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        torch = tuple(p for d in spec.submodule_search_locations for p in forms(d))
    return forms(own), forms(os.path.join(own, "examples")), torch


# The standard library's own files: pure-Python host work (copy.deepcopy, json, pickle, random),
# never a model's tensor code.
_STDLIB = re.compile(
    r"/lib(?:64)?/python\d[^/]*/(?!site-packages/|dist-packages/)"
    r"|^[A-Za-z]:/.*/Lib/(?!site-packages/)"
    r"|<frozen"
)


@lru_cache(maxsize=8192)
def is_stdlib_path(path: str) -> bool:
    """True when ``path`` (``/`` or ``\\`` separated) is a file of Python's standard library."""
    return bool(_STDLIB.search(path.replace("\\", "/")))


@lru_cache(maxsize=8192)
def is_torch_path(path: str) -> bool:
    """True when ``path`` (``/`` or ``\\`` separated) is a file of torch's installed package."""
    p = path.replace("\\", "/")
    return bool(_INSTALLED_TORCH.search(p)) or p.startswith(_roots()[2])


@lru_cache(maxsize=8192)
def is_trainprof_path(path: str) -> bool:
    """True when ``path`` is a file of trainprof's own package (its probe's hooks), not of its
    bundled examples: by the package's real directory, or its installed folder elsewhere."""
    p = path.replace("\\", "/")
    own, examples, _torch = _roots()
    if p.startswith(examples) or _INSTALLED_EXAMPLES.search(p):
        return False
    return p.startswith(own) or bool(_INSTALLED_TRAINPROF.search(p))


@lru_cache(maxsize=8192)
def is_user_path(path: str) -> bool:
    """True unless ``path`` (``/`` or ``\\`` separated) is a library, the stdlib, torch, trainprof
    or generated code; the bundled examples are user code; an empty path is not, nor a string
    that names no file (a py-spy frame read torn: ``overwrite_input``)."""
    if not path or not _names_a_file(path):
        return False
    p = path.replace("\\", "/")
    _own, examples, torch = _roots()
    if p.startswith(examples) or _INSTALLED_EXAMPLES.search(p):
        return True
    if is_trainprof_path(p) or p.startswith(torch) or is_installed(p):
        return False
    return not _LIBRARY.search(p)


def _names_a_file(path: str) -> bool:
    """A source file's name as a code object carries it: ``….py``, a path, or ``<string>``."""
    return path.endswith(".py") or "/" in path or "\\" in path or path.startswith("<")
