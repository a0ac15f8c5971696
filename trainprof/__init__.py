"""trainprof: imports nothing, so the probe never drags the CLI dependencies into a job."""
