"""`trainprof attach PID`: diagnose a job that is already running, from outside only.

No probe runs inside the job: py-spy's stack samples (``--nonblocking``, so the job is never
paused) and psutil/NVML samples are all there is. ``target`` finds the processes to sample,
``record`` runs py-spy, ``estimate`` derives iterations/s from the periodicity of the main
thread's stacks, ``analysis`` turns the stacks into the same Metrics and time ledger the rules
read, and ``rules`` holds the attach variants of the rules that stacks alone can judge.
"""

DEFAULT_DURATION_S = 30.0  # --duration: seconds to sample
# --rate: 2.5+ samples per step up to ~80 it/s. Not a round number: a loop paced by a clock at
# an exact divisor of the sampling rate (50 it/s at 200 Hz) is seen at the same phases step
# after step, and its short phases can vanish from the stacks for several steps in a row.
DEFAULT_RATE_HZ = 197
