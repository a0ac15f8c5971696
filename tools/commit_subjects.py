"""Flag commit subjects over 72 characters among the branch's new commits; exit 1 when any is.

    python -m tools.commit_subjects            # what `make lint` runs
    python -m tools.commit_subjects --base REF # new commits: those not on REF

The new commits are those not on ``origin/main`` where that ref exists; else those after
``BASE``, the last commit before the rule was adopted; else (a shallow or foreign history
without it) the last ``FALLBACK`` commits. Outside a git checkout it says so and passes.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

LIMIT = 72
# The last commit before CONTRIBUTING.md's commit rules: every later commit follows them.
BASE = "830ea2cb3d39a522f4fb4dd3067e94d9352c9be8"
FALLBACK = 20
# Commits of a shared branch whose subjects went over before a check ran, left as they are:
# the branch is never rewritten (CONTRIBUTING.md). Each is named in full; nothing else passes.
LANDED_LONG = frozenset(
    {
        "1ded3cb351798bb605e3e30a453016a9a0bf363f",
        "6aa9c818995467ac58951cbb588ab1554027858c",
        "6dd8dafd8daa5bd2eb9028f039913dd65a499245",
        "0498b9ef7be3267eb2e9eddbc3b7ed319f75ef9b",
    }
)


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], capture_output=True, text=True, check=False)


def _exists(ref: str) -> bool:
    return _git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode == 0


def new_commits_range(base: str | None) -> tuple[list[str], str]:
    """The ``git log`` arguments that select the new commits, and how they were chosen."""
    for ref, why in ((base, f"not on {base}"), ("origin/main", "not on origin/main"), (BASE, "")):
        if ref and _exists(ref):
            return [f"{ref}..HEAD"], why or f"after {BASE[:7]} (tools/commit_subjects.py's BASE)"
    if base:
        raise SystemExit(f"commit_subjects: no commit {base!r}")
    return ["-n", str(FALLBACK), "HEAD"], f"the last {FALLBACK} (no origin/main, no {BASE})"


def long_subjects(log_args: list[str]) -> list[tuple[str, str]]:
    out = _git("log", "--no-merges", "--format=%H%x00%s", *log_args)
    if out.returncode != 0:
        raise SystemExit(f"commit_subjects: git log failed: {out.stderr.strip()}")
    rows = [line.split("\0", 1) for line in out.stdout.splitlines() if "\0" in line]
    return [
        (sha[:7], subject)
        for sha, subject in rows
        if len(subject) > LIMIT and sha not in LANDED_LONG
    ]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.commit_subjects", description=__doc__)
    parser.add_argument("--base", help="the commits not on this ref are checked")
    args = parser.parse_args()
    if _git("rev-parse", "--git-dir").returncode != 0:
        print("commit_subjects: not a git checkout: nothing to check", file=sys.stderr)
        return 0
    log_args, chosen = new_commits_range(args.base)
    bad = long_subjects(log_args)
    for sha, subject in bad:
        shown = subject if len(subject) <= 100 else subject[:99] + "…"
        print(f"{sha}: subject of {len(subject)} characters (at most {LIMIT}): {shown}")
    if bad:
        print(
            f"commit_subjects: {len(bad)} commit(s) {chosen} have subjects over {LIMIT} "
            "characters: put the details in the body (git commit --amend, or rebase -i 'reword')",
            file=sys.stderr,
        )
        return 1
    print(f"commit_subjects: every new commit ({chosen}) has a subject of at most {LIMIT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
