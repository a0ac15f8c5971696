"""Why a training job crashed or hung: its stderr read against a table of known failures."""

from trainprof.analysis.crash.context import crash_context
from trainprof.analysis.crash.matcher import match_signatures
from trainprof.analysis.crash.row import CrashContext
from trainprof.analysis.crash.verdict import crash_findings

__all__ = ["CrashContext", "crash_context", "crash_findings", "match_signatures"]
