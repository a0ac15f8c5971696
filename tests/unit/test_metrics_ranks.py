"""--metrics-port on a torchrun job: each rank's steps are a labelled series, scraped over HTTP
from a real prometheus-client server fed by the live view's event lines."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest

from trainprof.collect.live import LiveView
from trainprof.store.schema import STEP

openmetrics = pytest.importorskip("prometheus_client.openmetrics.parser")


def _step(t_us: int, dur_us: int = 10_000) -> str:
    return f"{STEP} {t_us} {dur_us} 1000 0 8 1 8\n"


def test_each_rank_is_a_series_and_a_stall_is_counted(tmp_path: Path) -> None:
    from trainprof.export.prometheus import MetricsServer

    live = LiveView(str(tmp_path), None, 2)
    for rank, pid, steps in ((0, 101, 30), (1, 102, 28)):
        header = {"pid": pid, "role": "rank", "rank": rank, "t0": 1000.0}
        for i in range(steps):
            live.stats.feed(header, _step((i + 1) * 10_000))
    header = {"pid": 101, "role": "rank", "rank": 0, "t0": 1000.0}
    live.stats.feed(header, _step(31 * 10_000 + 500_000, dur_us=500_000))  # a 0.5 s step
    server = MetricsServer(0)
    try:
        server.watch(live)
        req = urllib.request.Request(
            f"http://127.0.0.1:{server.port}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            body = resp.read().decode()
    finally:
        server.close()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in openmetrics.text_string_to_metric_families(body)
        for s in family.samples
    }
    assert samples[("trainprof_rank_steps_total", (("rank", "0"),))] == 31
    assert samples[("trainprof_rank_steps_total", (("rank", "1"),))] == 28
    assert samples[("trainprof_progress_total", (("unit", "optimizer step"),))] == 31
    assert samples[("trainprof_stalls_total", ())] == 1
    assert samples[("trainprof_stall_seconds_total", ())] == pytest.approx(0.49, abs=0.005)
