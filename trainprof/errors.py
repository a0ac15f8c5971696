"""trainprof's own errors: the CLI turns each into one clear line and an exit code, never a traceback."""

from __future__ import annotations


class TrainprofError(Exception):
    """A problem with the user's input or environment that trainprof explains and exits on."""

    exit_code: int = 2

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code
