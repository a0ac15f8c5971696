"""`trainprof attach PID`: diagnose a job that is already running, from outside only.

No probe runs inside the job: py-spy's stack samples (``--nonblocking``, so the job is never
paused) and psutil/NVML samples are all there is. ``target`` finds the processes to sample,
``record`` runs py-spy and writes the run directory. What the stacks say is analysis's to
read (analysis/from_stacks.py), judged by the same rules as a run's.
"""

from trainprof.limits import ATTACH_DURATION_S

DEFAULT_DURATION_S = ATTACH_DURATION_S  # --duration: seconds to sample
# --rate: 2.5+ samples per step up to ~80 it/s. Not a round number: a loop paced by a clock at
# an exact divisor of the sampling rate (50 it/s at 200 Hz) is seen at the same phases step
# after step, and its short phases can vanish from the stacks for several steps in a row.
DEFAULT_RATE_HZ = 197
