"""Fills a CrashContext from a recorded run: the limits and peaks measured before the failure,
which the crash rows quote as evidence."""

from __future__ import annotations

from trainprof.analysis.crash.row import CrashContext
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.stats import finite
from trainprof.store.session import Session


def crash_context(session: Session, metrics: Metrics) -> CrashContext:
    samples = session.samples
    roles = {p.pid: p.role for p in session.processes}
    nofile = [s.nofile for s in samples.procs.values() if s.nofile]
    fds = [s.max_fds for s in samples.procs.values() if s.max_fds is not None]
    worker_rss = [
        max(finite(s.rss), default=0.0)
        for pid, s in samples.procs.items()
        if roles.get(pid) == "worker"
    ]
    cfg = metrics.loaders[0].config if metrics.loaders else {}
    shm_used = finite(samples.shm_used)
    avail = finite(samples.mem_available)
    return CrashContext(
        exit_code=session.meta.get("exit_code"),
        signal=session.meta.get("signal"),
        nofile_soft=min(n[0] for n in nofile) if nofile else None,
        nofile_hard=min(n[1] for n in nofile) if nofile else None,
        max_open_fds=max(fds) if fds else None,
        shm_size_bytes=samples.shm_total,
        shm_peak_used_bytes=int(max(shm_used)) if shm_used else None,
        worker_peak_rss_bytes=int(max(worker_rss)) if worker_rss else None,
        mem_total_bytes=samples.mem_total,
        mem_available_min_bytes=int(min(avail)) if avail else None,
        job_peak_rss_bytes=metrics.peak_rss_bytes,
        sharing_strategy=cfg.get("sharing_strategy"),
        num_workers=cfg.get("num_workers"),
    )
