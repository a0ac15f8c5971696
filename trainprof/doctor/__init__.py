"""`trainprof doctor`'s checks of the machine, each a pure judgement over measured inputs.

Every module pairs an inputs dataclass and a pure ``check_*`` function (what tests feed with
controlled conditions) with a small ``gather_*`` that reads the real machine. The registry
runs all gatherers concurrently and turns each judgement into the shared ``Finding`` type.
"""
