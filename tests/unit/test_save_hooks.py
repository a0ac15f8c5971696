"""Every checkpoint writer the probe times has its own post-import hook: Lightning's current
package and its older standalone name (a typo once left only one of them)."""

from __future__ import annotations

from trainprof.probe.saves import HOOKS, wrap_lightning, wrap_safetensors


def test_each_writer_module_is_hooked() -> None:
    assert HOOKS == {
        "safetensors.torch": wrap_safetensors,
        "lightning.fabric.utilities.cloud_io": wrap_lightning,
        "lightning_fabric.utilities.cloud_io": wrap_lightning,
    }
