"""Numbers that a collector enforces and a rule judges by, in one place that both read."""

from __future__ import annotations

# The hang watch stops waiting for a step after the longer of these (rules/hang.py states them).
HANG_SILENCE_S = 10.0  # no optimizer step for this long, at least
HANG_STEP_MULTIPLE = 20.0  # or this many median steps, if longer
# Read or written by the job's processes while their stacks kept still: at work, not hung.
MOVED_BYTES = 1 << 20
ATTACH_DURATION_S = 30.0  # attach's --duration: seconds to sample
