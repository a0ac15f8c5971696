"""trainprof's version: the one pyproject.toml declares (a test keeps the two equal).

A constant, not importlib.metadata: every CLI start and every JSON file reads it, and the
metadata scan costs ~40 ms.
"""

__version__ = "0.1.0"
