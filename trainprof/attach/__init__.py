"""`trainprof attach PID`: diagnose a job that is already running, from outside only.

No probe runs inside the job: py-spy's stack samples (``--nonblocking``, so the job is never
paused) and psutil/NVML samples are all there is. ``target`` finds the processes to sample,
``record`` runs py-spy, ``estimate`` derives iterations/s from the periodicity of the main
thread's stacks, ``analysis`` turns the stacks into the same Metrics and time ledger the rules
read, and ``rules`` holds the attach variants of the rules that stacks alone can judge.
"""
