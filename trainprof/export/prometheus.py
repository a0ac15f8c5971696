"""Serve a running job's live numbers for Prometheus to scrape, with prometheus-client.

The server is bound before the job starts (a port in use is said at once) and reads the
runner's live view at each scrape: steps, steps/s, samples/s, data wait, stalls, CPU, memory
and GPU use, and each rank's steps. Nothing is computed between scrapes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from trainprof.errors import TrainprofError
from trainprof.export.extras import need
from trainprof.store import gpus

if TYPE_CHECKING:
    from trainprof.collect.live import LiveView

OPTION = "--metrics-port"


class MetricsServer:
    """An HTTP endpoint on ``port`` (all interfaces) serving Prometheus text and OpenMetrics."""

    def __init__(self, port: int) -> None:
        client = need("prometheus_client", "prometheus", OPTION)
        registry_mod = need("prometheus_client.registry", "prometheus", OPTION)
        self.live: LiveView | None = None
        self.registry = registry_mod.CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))
        try:
            self.server, self.thread = client.start_http_server(port, registry=self.registry)
        except OSError as exc:
            raise TrainprofError(
                f"{OPTION} {port}: cannot serve on it ({exc.strerror or exc}); pick a free port"
            ) from None
        self.port = int(self.server.server_address[1])

    def watch(self, live: LiveView) -> None:
        """Serve this live view's numbers from now on."""
        self.live = live

    def close(self) -> None:
        """Stop serving and free the port; the thread ends."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


class _Collector:
    """Builds the metric families from the live view at each scrape."""

    def __init__(self, owner: MetricsServer) -> None:
        self.owner = owner

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        live = self.owner.live
        up = GaugeMetricFamily("trainprof_job_running", "1 while trainprof watches the job")
        up.add_metric([], 1.0 if live is not None else 0.0)
        yield up
        if live is None:
            return
        stats = live.stats
        done, unit = stats.progress
        progress = CounterMetricFamily(
            "trainprof_progress", "Units of progress so far", labels=["unit"]
        )
        progress.add_metric([unit], float(done))
        yield progress
        try:
            it_s, samples_s, wait = stats.rate()
            ranks = {pid: stats.stepping.get(pid, {}).get("rank") for pid in list(stats.rank_steps)}
            rank_steps = dict(stats.rank_steps)
        except RuntimeError:  # the runner changed a window mid-read: this scrape goes without
            it_s = samples_s = wait = None
            ranks, rank_steps = {}, {}
        for name, doc, value in (
            ("trainprof_steps_per_second", "Recent optimizer steps per second", it_s),
            ("trainprof_samples_per_second", "Recent samples per second", samples_s),
            ("trainprof_data_wait_ratio", "Recent share of step time waiting for data", wait),
        ):
            if value is not None:
                g = GaugeMetricFamily(name, doc)
                g.add_metric([], float(value))
                yield g
        stalls = CounterMetricFamily("trainprof_stalls", "Steps far slower than the median")
        stalls.add_metric([], float(stats.stalls))
        yield stalls
        stall_s = CounterMetricFamily(
            "trainprof_stall_seconds", "Time the stalls took beyond a median step"
        )
        stall_s.add_metric([], stats.stall_s)
        yield stall_s
        if rank_steps:
            per_rank = CounterMetricFamily(
                "trainprof_rank_steps", "Optimizer steps of each rank", labels=["rank"]
            )
            for pid, n in sorted(rank_steps.items()):
                rank = ranks.get(pid)
                per_rank.add_metric([str(rank if rank is not None else f"pid{pid}")], float(n))
            yield per_rank
        if live.judge is not None:
            findings = GaugeMetricFamily(
                "trainprof_finding",
                "Findings so far (live.json): the share of time each claims, 1 where unmeasured",
                labels=["id", "severity"],
            )
            for f in list(live.judge.findings):
                impact = f.get("impact")
                share = float(impact) if isinstance(impact, (int, float)) else 1.0
                findings.add_metric([str(f.get("id")), str(f.get("severity"))], share)
            yield findings
        yield from _host(live.latest_sample)


def _host(sample: dict[str, Any] | None) -> Iterator[Any]:
    """The newest host sample's CPU, memory and GPU use of the job's processes."""
    from prometheus_client.core import GaugeMetricFamily

    if not sample:
        return
    procs = [p for p in sample.get("procs") or [] if isinstance(p, dict)]
    cpu = GaugeMetricFamily("trainprof_cpu_percent", "CPU of the job's processes, % of one CPU")
    cpu.add_metric([], float(sum(p.get("cpu") or 0 for p in procs)))
    yield cpu
    rss = GaugeMetricFamily("trainprof_memory_rss_bytes", "Resident memory of the job's processes")
    rss.add_metric([], float(sum(p.get("rss") or 0 for p in procs)))
    yield rss
    util = gpus.row_util(sample)
    if util is not None:
        g = GaugeMetricFamily("trainprof_gpu_utilization_percent", "GPU utilization, mean")
        g.add_metric([], float(util))
        yield g
