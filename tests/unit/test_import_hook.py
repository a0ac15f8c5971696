"""The post-import hook calls back once, after the module body ran, however often the module
was looked up first (``importlib.util.find_spec`` probes whose specs are thrown away)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from trainprof.probe.import_hook import _AfterImport, call_after_import


@pytest.fixture
def module_dir(tmp_path: Path) -> Iterator[Path]:
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    yield tmp_path
    sys.path.remove(str(tmp_path))
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _AfterImport)]
    for name in [n for n in sys.modules if n.startswith("pih_watched")]:
        del sys.modules[name]


def test_a_thrown_away_find_spec_leaves_the_hook_for_the_import(module_dir: Path) -> None:
    (module_dir / "pih_watched.py").write_text("VALUE = 42\n")
    seen: list[int] = []
    call_after_import("pih_watched", lambda m: seen.append(m.VALUE))
    call_after_import("pih_watched", lambda m: seen.append(-m.VALUE))
    assert importlib.util.find_spec("pih_watched") is not None
    assert importlib.util.find_spec("pih_watched") is not None
    assert seen == []
    import pih_watched  # type: ignore[import-not-found]  # noqa: F401

    assert seen == [42, -42]
    assert not any(isinstance(f, _AfterImport) for f in sys.meta_path)


def test_a_submodule_is_watched_through_its_parents_path(module_dir: Path) -> None:
    (module_dir / "pih_watched_pkg").mkdir()
    (module_dir / "pih_watched_pkg" / "__init__.py").write_text("")
    (module_dir / "pih_watched_pkg" / "sub.py").write_text("VALUE = 7\n")
    seen: list[ModuleType] = []
    call_after_import("pih_watched_pkg.sub", seen.append)
    import pih_watched_pkg.sub  # type: ignore[import-not-found]

    assert seen == [pih_watched_pkg.sub]


def test_an_imported_module_calls_back_at_once(module_dir: Path) -> None:
    seen: list[ModuleType] = []
    call_after_import("json", seen.append)
    assert seen == [sys.modules["json"]]
