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
(``scheme://user:PASSWORD@host``). Only ``trainprof run``'s own ``--no-redact``, parsed before
the job's command, turns this off: the runner says so with ``configure``, and tells the probe
through ``ENV_NO_REDACT``; nothing reads the flag from ``sys.argv`` (there it may be the job's).
The job itself always receives its real arguments and environment.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
MIN_SECRET = 6  # shorter values ("1", "true") would mask ordinary text everywhere
ENV_NO_REDACT = "TRAINPROF_NO_REDACT"  # as store.schema names it; "1": the probe masks nothing

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
# A scheme starts a word: tried from each letter of a long word, the pattern took quadratic time.
_URL_PASSWORD = re.compile(
    r"(?<![A-Za-z0-9+.\-])([A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@\"'\\<>&]*:)[^/\s@\"'\\<>&]+@"
)


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
        self.longest = len(ordered[0]) if ordered else 0

    def text(self, text: str) -> str:
        if not self.enabled:
            return text
        if self._values is not None:
            text = self._values.sub(MASK, text)
        return _mask_urls(text) if "://" in text else text

    def safe_cut(self, text: str) -> int:
        """Where ``text`` may be cut and its head masked alone: no secret it holds, whole or
        begun, crosses the cut (a URL's password only within ``URL_HOLD`` characters)."""
        cut = max(0, len(text) - max(self.longest - 1, URL_HOLD))
        spans = [m.span() for m in self._values.finditer(text)] if self._values else []
        if "://" in text:
            spans += [m.span() for m in _URL_PASSWORD.finditer(text)]
        for start, end in sorted(spans):
            if start < cut < end:
                cut = end
        return cut

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
    """This process's redactor: masks the secrets of its environment and its command line,
    unless ``configure`` said otherwise."""
    global _current
    if _current is None:
        _current = Redactor(secret_values(sys.argv, os.environ))
    return _current


def configure(
    enabled: bool, argv: Iterable[str] = (), environs: Iterable[Mapping[str, str]] = ()
) -> Redactor:
    """Set this process's redactor: on unless trainprof's own option said not; ``argv`` (the
    job's command) and ``environs`` (an attached job's environments) add their secret values
    to those of this process's environment and argv."""
    global _current
    values = secret_values([*sys.argv, *map(str, argv)], os.environ)
    for environ in environs:
        values |= secret_values((), environ)
    _current = Redactor(values, enabled=enabled)
    return _current


def configure_in_job() -> Redactor:
    """In the job (the probe): masking is off only where the runner set ``ENV_NO_REDACT``."""
    return configure(enabled=os.environ.get(ENV_NO_REDACT) != "1")


def redact_text(text: str) -> str:
    """``text`` with this process's known secrets masked."""
    return current().text(text)


def redact_data(obj: Any) -> Any:
    """``obj`` (JSON-like) with this process's known secrets masked in every string."""
    return current().data(obj)


# A line with no end this long is masked in pieces; held back of it: the longest secret less
# one character, and at least URL_HOLD characters (a URL's password ends at the "@" after it).
CARRY_MAX = 64 * 1024
URL_HOLD = 256


class StreamMasker:
    """Masks a byte stream as it is written: each complete line (ended by LF or CR) at once,
    the rest held back until its end comes, so a secret split across two writes is still
    masked. Bytes that are not UTF-8 pass through as they are."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._carry = b""

    def feed(self, data: bytes) -> bytes:
        """The masked bytes of ``data`` that can be written now (a whole line, or more)."""
        if not self.redactor.enabled:
            return data
        buf = self._carry + data if self._carry else data
        end = max(buf.rfind(b"\n"), buf.rfind(b"\r")) + 1
        if len(buf) - end <= CARRY_MAX:
            self._carry = buf[end:]
            return self._mask(buf[:end])
        text = buf.decode("utf-8", "surrogateescape")
        cut = self.redactor.safe_cut(text)
        self._carry = text[cut:].encode("utf-8", "surrogateescape")
        return self.redactor.text(text[:cut]).encode("utf-8", "surrogateescape")

    def flush(self) -> bytes:
        """What was held back, masked: the stream has ended."""
        out, self._carry = self._carry, b""
        return self._mask(out) if self.redactor.enabled else out

    def _mask(self, data: bytes) -> bytes:
        if not data:
            return data
        return self.redactor.text(data.decode("utf-8", "surrogateescape")).encode(
            "utf-8", "surrogateescape"
        )
