"""Helpers for the doctor tests: a fake NVML at the ``pynvml`` boundary and a real tiny tmpfs."""
