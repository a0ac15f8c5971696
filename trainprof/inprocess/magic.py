"""``%load_ext trainprof`` and the ``%%trainprof [RUN_DIR]`` cell magic of IPython and Jupyter.

The cell runs profiled in the kernel; its report is shown below it, as the HTML report and a
one-line summary as text, also when the cell raises (its exception is then raised again, so the
traceback and the cell's failure are as without trainprof).
"""

from __future__ import annotations

from typing import Any

from trainprof.inprocess import Profile


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%trainprof`` with this IPython shell."""
    ipython.register_magic_function(_trainprof_cell, magic_kind="cell", magic_name="trainprof")


def _trainprof_cell(line: str, cell: str) -> None:
    """Profile this cell and show trainprof's report below it. ``%%trainprof DIR``: run dir."""
    from IPython import get_ipython
    from IPython.display import display

    shell = get_ipython()
    profile = Profile(run_dir=line.strip() or None, print_report=False, label="notebook-cell")
    profile.start()
    error: BaseException | None = None
    try:
        code = compile(shell.transform_cell(cell), "<trainprof cell>", "exec")
        exec(code, shell.user_ns)
    except BaseException as exc:
        error = exc
    finally:
        profile.stop(error)
        display({"text/html": profile.html(), "text/plain": profile.summary()}, raw=True)
    if error is not None:
        raise error
