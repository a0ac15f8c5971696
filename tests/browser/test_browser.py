"""The HTML report in a real browser: headless Chromium renders it (light, dark and print)
without a console message and without a single network request.

Skipped when no Chromium is found (`make browser-check` installs Debian's `chromium` and runs
these). $TRAINPROF_CHROMIUM names a browser binary explicitly.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit"))
from test_html import _run  # noqa: E402

from trainprof.render import html, trace  # noqa: E402

BROWSER = os.environ.get("TRAINPROF_CHROMIUM") or next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
REQUIRED = os.environ.get("TRAINPROF_REQUIRE_BROWSER") == "1"  # make browser-check: never skip
pytestmark = pytest.mark.skipif(
    BROWSER is None and not REQUIRED, reason="no Chromium found (make browser-check)"
)

# No browser housekeeping traffic (updates, sync, translation): only what the page asks for.
QUIET = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--enable-logging=stderr", "--v=0",
]  # fmt: skip


def browse(page: Path, tmp: Path, *args: str) -> tuple[str, list[str]]:
    """Open ``page``: Chromium's stderr, and the URLs the page itself requested (net log)."""
    net = tmp / "net.json"
    proc = subprocess.run(
        [BROWSER or "chromium", *QUIET, f"--user-data-dir={tmp / 'profile'}",
         f"--log-net-log={net}", *args, page.as_uri()],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stderr, page_requests(json.loads(net.read_text()))


def page_requests(log: dict[str, Any]) -> list[str]:
    """URL requests made on behalf of a file:// page (the browser's own carry other keys)."""
    return sorted(
        {
            e["params"]["url"]
            for e in log.get("events", [])
            if str(e.get("params", {}).get("network_isolation_key", "")).startswith("file://")
        }
    )


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    s, m, verdict = _run()
    path = tmp_path_factory.mktemp("browser") / "report.html"
    path.write_text(html.render(s, m, verdict, trace.build(s, m)))
    return path


def test_a_browser_is_there() -> None:
    assert BROWSER is not None and os.access(BROWSER, os.X_OK), BROWSER


def test_the_checks_see_console_errors_and_requests(tmp_path: Path) -> None:
    bad = tmp_path / "bad.html"
    bad.write_text(
        "<!DOCTYPE html><p>x</p><script>undefinedFunction()</script>"
        '<img src="http://example.invalid/logo.png">'
    )
    stderr, requests = browse(bad, tmp_path, f"--screenshot={tmp_path / 'bad.png'}")
    assert any("undefinedFunction" in line for line in console_lines(stderr))
    assert requests == ["http://example.invalid/logo.png"]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_report_renders_cleanly(report: Path, tmp_path: Path, scheme: str) -> None:
    shot = tmp_path / f"report-{scheme}.png"
    flags = ["--force-dark-mode"] if scheme == "dark" else []
    stderr, requests = browse(
        report, tmp_path, *flags, "--window-size=1100,3200", f"--screenshot={shot}"
    )
    assert console_lines(stderr) == []
    assert requests == []
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 30_000  # text, charts and colour: far from a blank page


def test_the_report_prints(report: Path, tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    stderr, requests = browse(report, tmp_path, "--no-pdf-header-footer", f"--print-to-pdf={pdf}")
    assert console_lines(stderr) == [] and requests == []
    assert pdf.read_bytes()[:5] == b"%PDF-"
