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


def test_a_save_to_an_open_file_records_its_path(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """torch.save(state, f) with an open file was recorded as the file object's repr
    ("last saved to <_io.BufferedWriter name=...>"): the record holds the file's path."""
    from trainprof.probe import records
    from trainprof.probe.saves import timed
    from trainprof.probe.writer import EventWriter

    w = EventWriter(str(tmp_path))
    monkeypatch.setattr(records, "_writer", w)
    target = tmp_path / "ckpt.pt"
    with open(target, "wb") as f:
        timed(lambda obj, out: out.write(b"x" * 10), "f")({"w": 1}, f)
    w.close()
    text = "".join(p.read_text() for p in tmp_path.glob("events-*"))
    assert f'"{target}"' in text and "BufferedWriter" not in text
