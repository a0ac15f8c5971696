"""Secrets masked before trainprof stores or prints them: in command lines and in any text.

Standard library only: the probe imports this inside the user's job (event-file headers, the
job's exception message).

A name is secret by its words (split at ``_``, ``-``, ``.`` and camelCase): its last word is
``token``, ``key``, ``pwd`` or ``passphrase``, or ends in ``token``, ``secret``, ``password``,
``passwd`` or ``apikey`` (``HFTOKEN``, ``PGPASSWORD``); or any word is ``secret``,
``password``, ``passwd``, ``credential(s)``, ``auth``, ``authorization`` or ``apikey``.
``--hf_token``, ``--api-key``, ``--auth-header`` and ``WANDB_API_KEY`` are secret;
``--tokenizer_name``, ``--max_tokens`` and ``--token_budget`` are not.
In a command line the value is replaced by ``***`` in ``--name=VALUE``, ``--name VALUE`` (the
next argument, unless it starts with ``--``) and ``NAME=VALUE``.

Text (an exception message, a traceback, a file trainprof writes) is masked by value: each
value of a secret-named environment variable or argument (at least ``MIN_SECRET`` characters)
becomes ``***`` wherever it appears, and so does the password of a URL
(``scheme://user:PASSWORD@host``). ``trainprof run --no-redact`` turns all of this off. The job
itself always receives its real arguments and environment.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
MIN_SECRET = 6  # shorter values ("1", "true") would mask ordinary text everywhere
NO_REDACT_FLAG = "--no-redact"
ENV_NO_REDACT = "TRAINPROF_NO_REDACT"  # as store.schema names it; "1": nothing is masked

_LAST_WORDS = frozenset(("token", "key", "pwd", "passphrase"))
_ANY_WORDS = frozenset(
    ("secret", "password", "passwd", "credential", "credentials", "auth", "authorization", "apikey")
)
_SUFFIXES = ("token", "secret", "password", "passwd", "apikey")
_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
# NAME=VALUE: a name as shells, argparse and Hydra spell them (no spaces, no slashes).
_ASSIGN = re.compile(r"^(-{0,2})([A-Za-z_][A-Za-z0-9_.\-+]*)=(.*)$", re.DOTALL)
_OPTION = re.compile(r"^-{1,2}([A-Za-z_][A-Za-z0-9_.\-]*)$")
# A URL's password; never across quotes, backslashes or markup (text may be JSON, XML, HTML).
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@\"'\\<>&]*:)[^/\s@\"'\\<>&]+@")


# The shell's working directories: "pwd" ends their names, and they are no secret.
_NOT_SECRET = frozenset(("PWD", "OLDPWD"))


def is_secret_name(name: str) -> bool:
    """Whether an option or variable name names a secret (by its last word)."""
    if name in _NOT_SECRET:
        return False
    words = [w.lower() for w in _WORD.findall(name)]
    if not words:
        return False
    last = words[-1]
    return last in _LAST_WORDS or last.endswith(_SUFFIXES) or not _ANY_WORDS.isdisjoint(words)


def _mask_urls(text: str) -> str:
    return _URL_PASSWORD.sub(rf"\g<1>{MASK}@", text)


def redact(argv: list[str]) -> list[str]:
    """``argv`` with the values of secret-named arguments replaced by ``***`` (a new list)."""
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
                out.append(_mask_urls(arg))
            continue
        m = _OPTION.match(arg)
        if m is not None and is_secret_name(m.group(1)):
            mask_next = True
            out.append(arg)
            continue
        out.append(_mask_urls(arg))
    return out


def secret_values(argv: Iterable[str], environ: Mapping[str, str]) -> set[str]:
    """The values to mask in any text: secret-named variables' and arguments' values."""
    found = {v for k, v in environ.items() if is_secret_name(k)}
    take_next = False
    for arg in argv:
        arg = str(arg)
        if take_next:
            take_next = False
            if not arg.startswith("--"):
                found.add(arg)
                continue
        m = _ASSIGN.match(arg)
        if m is not None:
            if is_secret_name(m.group(2)):
                found.add(m.group(3))
            continue
        m = _OPTION.match(arg)
        take_next = m is not None and is_secret_name(m.group(1))
    return {v for v in found if len(v) >= MIN_SECRET and v != MASK}


class Redactor:
    """Masks known secret values and URL passwords in text, and in JSON-like data."""

    def __init__(self, values: Iterable[str], enabled: bool = True) -> None:
        self.enabled = enabled
        ordered = sorted(set(values), key=len, reverse=True)  # a longer secret first
        self._values = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def text(self, text: str) -> str:
        if not self.enabled:
            return text
        if self._values is not None:
            text = self._values.sub(MASK, text)
        return _mask_urls(text) if "://" in text else text

    def data(self, obj: Any) -> Any:
        """A copy of ``obj`` (dicts, lists, strings) with every string (keys too) masked."""
        if not self.enabled:
            return obj
        stack: list[tuple[Any, Any]] = []
        root = self._copy(obj, stack)
        while stack:  # iterative: data read back from a file can be deep
            src, dst = stack.pop()
            if isinstance(src, dict):
                for k, v in src.items():
                    dst[self.text(k) if isinstance(k, str) else k] = self._copy(v, stack)
            else:
                dst.extend(self._copy(v, stack) for v in src)
        return root

    def _copy(self, value: Any, stack: list[tuple[Any, Any]]) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            new: Any = {}
        elif isinstance(value, (list, tuple)):
            new = []
        else:
            return value
        stack.append((value, new))
        return new


_current: Redactor | None = None


def current() -> Redactor:
    """This process's redactor: the secrets of its environment and of its own command line
    (trainprof's, which holds the job's; or, in the job, the job's), unless ``--no-redact``."""
    global _current
    if _current is None:
        off = os.environ.get(ENV_NO_REDACT) == "1" or NO_REDACT_FLAG in sys.argv
        _current = Redactor(secret_values(sys.argv, os.environ), enabled=not off)
    return _current


def redact_text(text: str) -> str:
    """``text`` with this process's known secrets masked."""
    return current().text(text)


def redact_data(obj: Any) -> Any:
    """``obj`` (JSON-like) with this process's known secrets masked in every string."""
    return current().data(obj)


def redact_file(path: os.PathLike[str] | str) -> None:
    """Mask this process's known secrets in a file (a copy of the job's output), in place."""
    r = current()
    if not r.enabled:
        return
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError:
        return
    text = raw.decode("utf-8", "surrogateescape")
    masked = r.text(text)
    if masked == text:
        return
    try:
        with open(path, "r+b") as f:
            f.write(masked.encode("utf-8", "surrogateescape"))
            f.truncate()
    except OSError:
        pass
