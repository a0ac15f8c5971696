"""Numbers for humans, said one way everywhere: byte sizes, durations and counted nouns.

Sizes are binary (1 MiB = 2**20 bytes) and named so (KiB, MiB, GiB, TiB), the way `free -h`
and `df -h` count; the run report, the live line and `trainprof doctor` all use ``fmt_bytes``.
"""

from __future__ import annotations

BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")


def fmt_bytes(n: float | None, missing: str = "—") -> str:
    """``512 B``, ``1.5 KiB``, ``308.0 MiB``, ``31.0 GiB``; ``missing`` for None."""
    if n is None:
        return missing
    value = float(n)
    for unit in BYTE_UNITS:
        if abs(value) < 1024 or unit == BYTE_UNITS[-1]:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def fmt_duration(seconds: float) -> str:
    """``850.0 ms``, ``1.72 s``, ``3.5 min``."""
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    if seconds < 120:
        return f"{seconds:.2f} s"
    return f"{seconds / 60:.1f} min"


def plural_of(word: str) -> str:
    """``batch`` → ``batches``, ``step`` → ``steps``, ``optimizer step`` → ``optimizer steps``,
    ``epoch`` → ``epochs`` (its "ch" is a k)."""
    if word.endswith("epoch"):
        return word + "s"
    if word.endswith(("s", "sh", "ch", "x", "z")):
        return word + "es"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "i", "o", "u"):
        return word[:-1] + "ies"
    return word + "s"


def plural(n: int, word: str) -> str:
    """``1 batch``, ``2 batches``, ``0 optimizer steps``."""
    return f"{n} {word if n == 1 else plural_of(word)}"
