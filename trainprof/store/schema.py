"""The event-file format shared by the probe (writer) and the store (reader).

Standard library only: the probe imports this inside the user's job.

One file per process, ``events-<pid>.tp``. The first line is ``#TP1 `` plus a JSON header
(magic, schema version, pid, ppid, role, argv, clocks). Every other line is one record: a
one-letter kind, then space-separated fields. Times are integer microseconds since the
header's ``t0`` (``time.monotonic()``, which is system-wide on Linux, so records of different
processes and the runner's samples line up). Text lines keep a step at about 40 bytes.
"""

from __future__ import annotations

MAGIC = "#TP1 "
SCHEMA_VERSION = 1
EVENT_FILE_PREFIX = "events-"
EVENT_FILE_SUFFIX = ".tp"
PROBE_LOADED = "probe-loaded"  # an empty file: a process of the job started the probe
PROBE_FAILED = "probe-failed"  # the first process's failure to start it (bootstrap writes it)
PROBE_STOPPED = "probe-stopped-"  # + "<pid>-<errno>", empty: that process stopped recording

# Environment variables the runner sets for the job.
ENV_RUN_DIR = "TRAINPROF_RUN_DIR"
ENV_MAX_STEPS = "TRAINPROF_MAX_STEPS"
# With ENV_MAX_STEPS: stop no sooner than this many seconds after the first step (trainprof ci:
# a fast job still gets a steady state long enough for the rules to judge)
ENV_STEPS_MIN_S = "TRAINPROF_STEPS_MIN_S"
ENV_PKG_PARENT = "TRAINPROF_PKG_PARENT"
ENV_DISABLE = "TRAINPROF_PROBE_DISABLE"  # comma list of probe parts to switch off (benchmarks)
# "cpu": count a CPU job's step FLOPs too (tests; MFU needs a GPU, so a CPU job is not counted)
ENV_FLOPS = "TRAINPROF_FLOPS"
ENV_NO_REDACT = "TRAINPROF_NO_REDACT"  # "1": store argv as given (trainprof run --no-redact)

# Record kinds.
STEP = "S"  # S t dur wait sampler batch_size fetches samples   (one per optimizer step)
BATCH = "B"  # B t wait sampler batch_size                       (per fetch, before the first step)
BACKWARD = "K"  # K t   (a backward() returned, in a job with no optimizer step and no batch yet)
LOADER = "L"  # L key {json config}
EPOCH = "E"  # E key t_iter first_batch_wait                      (a loader started an epoch)
SAVE = "C"  # C t dur bytes {json path}
MODE = "M"  # M t training(0|1)                                  (top-level nn.Module.train)
FETCH = "F"  # F t count total_us collate_us pin_us               (dataset fetch, cumulative)
TORCH = "T"  # T t                                                (torch finished importing)
INFO = "X"  # X {json}                                            (stop reason, exception, role)
DEVICE = "G"  # G t step dev_fwd dev_bwd dev_opt dev_gap host_fwd host_bwd host_opt host_gap
#               allocated reserved peak   (one timed step on the GPU's clock; µs, -1 unknown)


def event_file_name(pid: int) -> str:
    return f"{EVENT_FILE_PREFIX}{pid}{EVENT_FILE_SUFFIX}"
