"""trainprof: imports only typing, so the probe never drags the CLI dependencies into a job."""

from typing import Any


def profile(**options: Any) -> Any:
    """``with trainprof.profile() as p:``: profile a block of this process (trainprof.inprocess)."""
    from trainprof.inprocess import profile as make

    return make(**options)


def start(**options: Any) -> Any:
    """Start profiling this process until ``trainprof.stop()`` (trainprof.inprocess)."""
    from trainprof.inprocess import start as begin

    return begin(**options)


def stop() -> Any:
    """Stop the profile ``trainprof.start()`` began; its report (trainprof.inprocess)."""
    from trainprof.inprocess import stop as end

    return end()


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext trainprof``: the ``%%trainprof`` cell magic."""
    from trainprof.inprocess.magic import load_ipython_extension as load

    load(ipython)
