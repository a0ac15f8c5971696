"""ptrace-blocked / py-spy-missing: can `trainprof attach` read a running job's stacks?

The live test is real: py-spy dumps a sibling Python, and, run as an unprivileged user against
a root-owned target, is really refused by the kernel.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from trainprof.doctor.ptrace import (
    PtraceInputs,
    attach_test,
    check_ptrace,
    detect_container,
    find_py_spy,
    gather_ptrace,
    has_cap_sys_ptrace,
)


def inputs(**kw: object) -> PtraceInputs:
    base: dict[str, object] = dict(
        py_spy="/usr/bin/py-spy",
        ptrace_scope=1,
        euid=1000,
        cap_sys_ptrace=False,
        container=None,
        attach_ok=None,
        attach_detail="disabled",
    )
    base.update(kw)
    return PtraceInputs(**base)  # type: ignore[arg-type]


def test_live_attach_on_this_machine() -> None:
    py_spy = find_py_spy()
    if py_spy is None:
        pytest.skip("py-spy not installed")
    ok, detail = attach_test(py_spy)
    inp = gather_ptrace()
    r = check_ptrace(inp)
    assert r.finding.id == "ptrace-blocked"
    assert inp.attach_ok is ok
    assert r.status == ("ok" if ok else "warn"), detail


def test_unprivileged_py_spy_is_really_refused() -> None:
    py_spy, setpriv = find_py_spy(), shutil.which("setpriv")
    if py_spy is None or setpriv is None or os.geteuid() != 0:
        pytest.skip("needs py-spy, setpriv and root (to drop to another user)")
    ok, detail = attach_test(
        py_spy, runner=[setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    )
    assert ok is False and detail and "Permission" in detail
    r = check_ptrace(inputs(euid=65534, attach_ok=ok, attach_detail=detail))
    assert (r.status, r.finding.severity) == ("warn", "warning")
    assert any("Permission" in e for e in r.finding.evidence)


def test_blocked_in_a_container_suggests_cap_add() -> None:
    r = check_ptrace(
        inputs(container="/.dockerenv present", attach_ok=False, attach_detail="EPERM")
    )
    assert r.status == "warn"
    assert any("--cap-add SYS_PTRACE" in f for f in r.finding.fix)
    assert any("ptrace_scope=0" in f for f in r.finding.fix)


def test_without_live_test_rules_decide() -> None:
    assert check_ptrace(inputs(ptrace_scope=0)).status == "ok"
    assert check_ptrace(inputs(ptrace_scope=None)).status == "ok"
    assert check_ptrace(inputs(ptrace_scope=1, cap_sys_ptrace=True)).status == "ok"
    assert check_ptrace(inputs(ptrace_scope=1)).status == "warn"
    assert check_ptrace(inputs(ptrace_scope=3, cap_sys_ptrace=True)).status == "warn"


def test_missing_py_spy() -> None:
    r = check_ptrace(inputs(py_spy=None))
    assert (r.status, r.finding.id) == ("warn", "py-spy-missing")


def test_container_markers_and_caps(tmp_path: Path) -> None:
    assert detect_container(tmp_path) is None
    (tmp_path / ".dockerenv").write_text("")
    assert detect_container(tmp_path) == "/.dockerenv present"
    status = tmp_path / "status"
    status.write_text("Name:\tx\nCapEff:\t0000000000080000\n")
    assert has_cap_sys_ptrace(status) is True
    status.write_text("CapEff:\t0000000000000000\n")
    assert has_cap_sys_ptrace(status) is False
