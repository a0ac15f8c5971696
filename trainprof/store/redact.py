"""Secrets in a command line, masked before trainprof stores or prints it.

Standard library only: the probe imports this inside the user's job (event-file headers).

A name looks secret when it contains (case-insensitive) ``key``, ``token``, ``secret``,
``password``, ``passwd``, ``credential`` or ``auth``. Its value is replaced by ``***`` in
``--name=VALUE``, ``--name VALUE`` (the next argument, unless it starts with ``--``) and
``NAME=VALUE`` (an environment assignment, or a Hydra-style override). The password of a URL
(``scheme://user:PASSWORD@host``) is masked in any argument. Over-masking is the price of
never leaking: ``--max-tokens 512`` reads ``--max-tokens ***``; ``trainprof run --no-redact``
stores the command as given. The job itself always receives its real arguments.
"""

from __future__ import annotations

import re

MASK = "***"
SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "credential", "auth")

_SECRET = re.compile("|".join(SECRET_WORDS), re.IGNORECASE)
# NAME=VALUE: a name as shells, argparse and Hydra spell them (no spaces, no slashes).
_ASSIGN = re.compile(r"^(-{0,2})([A-Za-z_][A-Za-z0-9_.\-+]*)=(.*)$", re.DOTALL)
_OPTION = re.compile(r"^-{1,2}([A-Za-z_][A-Za-z0-9_.\-]*)$")
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@]*:)[^/\s@]+@")


def is_secret_name(name: str) -> bool:
    return _SECRET.search(name) is not None


def redact(argv: list[str]) -> list[str]:
    """``argv`` with the values of secret-looking arguments replaced by ``***`` (a new list)."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        arg = str(arg)
        if mask_next:
            mask_next = False
            if not arg.startswith("--"):
                out.append(MASK)
                continue
        m = _ASSIGN.match(arg)
        if m is not None:
            if is_secret_name(m.group(2)) and m.group(3):
                out.append(f"{m.group(1)}{m.group(2)}={MASK}")
            else:
                out.append(_URL_PASSWORD.sub(rf"\g<1>{MASK}@", arg))
            continue
        m = _OPTION.match(arg)
        if m is not None and is_secret_name(m.group(1)):
            mask_next = True
            out.append(arg)
            continue
        out.append(_URL_PASSWORD.sub(rf"\g<1>{MASK}@", arg))
    return out
