"""The `trainprof` command's entry point, kept free of imports: a Ctrl-C while the CLI is still
importing (a third of a second: typer, rich, the commands) ends trainprof as a Ctrl-C at any
later point does, with exit code 130 and no traceback. No job has started by then."""

from __future__ import annotations

import sys

INTERRUPTED = 130  # 128 + SIGINT, what typer and a shell use


def main() -> None:
    from trainprof import std_fds

    std_fds.reserve()  # before anything opens a file: a closed fd 1 must not become a pipe's
    try:
        from trainprof.cli import main as cli_main
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED)
    cli_main()
