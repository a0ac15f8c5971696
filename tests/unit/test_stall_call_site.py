"""Where a stall is said to be called from: its window also holds its step's own forward,
backward and optimizer step, so a loop line that ordinary steps run yields to another loop line
holding a fair share of the window (a CI run named a pseudo-label refresh after the forward
line, whose stack py-spy held across half of it); with nothing else in the window, it stays."""

from __future__ import annotations

from trainprof.analysis.call_sites import call_site, step_lines
from trainprof.store.stacks import StackSpan

TRAIN = "/home/u/train.py"
TORCH = "/venv/lib/python3.12/site-packages/torch"
LOOP = frozenset({("main", TRAIN)})
MODULE = ("Module._call_impl", f"{TORCH}/nn/modules/module.py", 1789)
STEP_FORWARD = (("main", TRAIN, 104), MODULE)
STEP_BACKWARD = (("main", TRAIN, 107), ("backward", f"{TORCH}/autograd/__init__.py", 354))
REFRESH = (("main", TRAIN, 111), ("refresh_pseudo_labels", TRAIN, 84), ("search", TRAIN, 50))


def spans(*parts: tuple[float, tuple[tuple[str, str, int], ...]]) -> list[StackSpan]:
    out, t = [], 0.0
    for d, frames in parts:
        out.append(StackSpan(t, t + d, frames))
        t += d
    return out


def test_the_steps_forward_line_yields_to_the_refresh() -> None:
    ordinary = spans(*[(0.004, STEP_FORWARD), (0.006, STEP_BACKWARD)] * 10)
    lines = step_lines(ordinary, {}, LOOP)
    assert lines == {("main", TRAIN, 104), ("main", TRAIN, 107)}
    stall = spans((0.11, STEP_FORWARD), (0.09, REFRESH))
    site = call_site(stall, [(0.0, 0.2)], LOOP, lines)
    assert site is not None and site.where == f"{TRAIN}:111 (main → refresh_pseudo_labels())"
    assert site.hot_where == f"{TRAIN}:50 (search)"
    # without the steps' lines, the longest call wins
    assert call_site(stall, [(0.0, 0.2)], LOOP).where == f"{TRAIN}:104 (main)"  # type: ignore[union-attr]


def test_a_stall_inside_the_steps_own_line_keeps_it() -> None:
    lines = frozenset({("main", TRAIN, 104), ("main", TRAIN, 107)})
    stall = spans((0.19, STEP_FORWARD), (0.01, REFRESH))
    site = call_site(stall, [(0.0, 0.2)], LOOP, lines)
    assert site is not None and site.where == f"{TRAIN}:104 (main)"


def test_the_probes_loader_caller_is_the_innermost_user_frame() -> None:
    """The probe's ``loader_callers`` (innermost first): tqdm's wrapper is skipped; a
    malformed record names nothing."""
    from trainprof.analysis.attribution import recorded_caller

    tqdm = ["tqdm.__iter__", "/venv/lib/python3.12/site-packages/tqdm/std.py", 1181]
    record = [tqdm, ["main", TRAIN, 73], ["<module>", TRAIN, 90]]
    assert recorded_caller([{"x": 1}, {"loader_callers": record}], "loader_callers") == (
        "main",
        TRAIN,
        73,
    )
    assert recorded_caller([{"loader_callers": [["main", TRAIN, "73"]]}], "loader_callers") is None
    assert recorded_caller([], "loader_callers") is None


def test_a_function_under_a_decorator_is_the_one_named() -> None:
    """validate() under @torch.no_grad(): the loop calls it through torch's wrapper, and the
    stall was named after the loop's line alone (`train_one_epoch`), not after validate."""
    wrapper = ("decorate_context", f"{TORCH}/utils/_contextlib.py", 120)
    evaluating = (("main", TRAIN, 130), wrapper, ("validate", TRAIN, 60), MODULE)
    site = call_site(spans((0.2, evaluating)), [(0.0, 0.2)], LOOP)
    assert site is not None and site.where == f"{TRAIN}:130 (main → validate())"
