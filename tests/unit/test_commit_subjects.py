"""`make lint`'s commit check flags subjects over 72 characters among the branch's new commits
only: those not on origin/main when it exists, else the last ones, in a checkout with no
remote at all too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LONG = "Make the report say which interpreter ran the job and how to choose another one"
SHORT = "Name the interpreter that ran the job"


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    out = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def commit(repo: Path, subject: str) -> None:
    git(repo, "commit", "-q", "--allow-empty", "-m", subject, "-m", "why, and the numbers")


def check(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "tools.commit_subjects", *args],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_a_long_subject_without_a_remote_fails(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    commit(tmp_path, SHORT)
    commit(tmp_path, LONG)
    out = check(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert f"subject of {len(LONG)} characters" in out.stdout and LONG in out.stdout
    assert SHORT not in out.stdout


def test_only_commits_not_on_origin_main_are_judged(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    commit(tmp_path, LONG)  # already on main: not this branch's to fix
    git(tmp_path, "update-ref", "refs/remotes/origin/main", "HEAD")
    commit(tmp_path, SHORT)
    out = check(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "not on origin/main" in out.stdout
    commit(tmp_path, LONG)
    assert check(tmp_path).returncode == 1


def test_outside_a_checkout_it_passes_and_says_so(tmp_path: Path) -> None:
    out = check(tmp_path, "--base", "HEAD")
    assert out.returncode == 0 and "not a git checkout" in out.stderr
