"""One answer to "is this file the user's own code?", for py-spy frames and traceback text alike.

Pure and cached: py-spy profiles repeat the same few hundred paths millions of times.
"""

from __future__ import annotations

import re
from functools import lru_cache

# Not the user's code: installed packages, the standard library (also on Windows and for other
# interpreter layouts), torch (also from a source checkout), trainprof itself, interpreter
# internals such as <frozen runpy> (but <string>, <stdin> and IPython cells are the user's), and
# code generated at run time (Inductor's kernels under /tmp/torchinductor_<user>/).
_LIBRARY = re.compile(
    r"site-packages|dist-packages"
    r"|/lib(?:64)?/python\d"
    r"|^[A-Za-z]:/.*/Lib/"
    r"|/(?:torch|trainprof)/"
    r"|/multiprocessing/"
    r"|/(?:threading|runpy|selectors|socket|queue)\.py$"
    r"|^<(?!string>|stdin>|ipython-input)"
    r"|<frozen"
    r"|torchinductor_"
)
# The bundled demo and zoo jobs live inside the trainprof package but are user code.
_EXAMPLES = "/trainprof/examples/"


@lru_cache(maxsize=8192)
def is_user_path(path: str) -> bool:
    """True unless ``path`` (``/`` or ``\\`` separated) is a library, the stdlib, torch, trainprof
    or generated code; the bundled examples are user code; an empty path is not."""
    if not path:
        return False
    p = path.replace("\\", "/")
    return _EXAMPLES in "/" + p or not _LIBRARY.search(p)
