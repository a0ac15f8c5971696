"""A damaged run directory gives a report or one line (CorruptRunError), never a traceback.

A realistic run directory is written by hand (every event-record kind, a DataLoader worker,
samples, a stack trace, a hang dump, run.json), then a few hundred seeded corruptions of its
files (truncation, flipped and inserted bytes, deleted or repeated lines, garbage files, JSON
values of the wrong type) each go through the whole read path: ``Session.load``, ``analyze``,
the JSON report and the console report, as ``trainprof report`` runs them (trainprof.report).
"""

from __future__ import annotations

import io
import json
import random
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from trainprof.report import report
from trainprof.store.session import CorruptRunError, Session

MAIN, WORKER = 4242, 4250
T0 = 1000.0
STACK_START = T0 + 0.5
SCRIPT = "/home/u/train.py"


def _header(pid: int, role: str) -> str:
    header = {
        "magic": "trainprof-events",
        "version": 1,
        "pid": pid,
        "ppid": 1,
        "role": role,
        "argv": [SCRIPT, "--epochs", "3"],
        "executable": "/usr/bin/python3",
        "t0": T0,
        "wall0": 1.7e9,
        "rank": None,
        "local_rank": None,
        "world_size": None,
    }
    if role == "worker":
        header["worker_id"] = 0
    return "#TP1 " + json.dumps(header) + "\n"


def _main_events() -> str:
    loader = {
        "batch_size": 16,
        "num_workers": 1,
        "pin_memory": False,
        "persistent_workers": False,
        "prefetch_factor": 2,
        "drop_last": False,
        "sampler": "torch.utils.data.sampler.RandomSampler",
        "batch_sampler": "torch.utils.data.sampler.BatchSampler",
        "collate_fn": "torch.utils.data._utils.collate.default_collate",
        "dataset": "__main__.Images",
        "getitem_at": [SCRIPT, 29, "Images.__getitem__"],
        "len": 4096,
        "sharing_strategy": "file_descriptor",
        "start_method": "fork",
    }
    lines = ["T 900000\n", f"L 0 {json.dumps(loader)}\n", "E 0 1000000 300000\n"]
    lines += [f"B {1000000 + 10000 * i} 2000 100 16\n" for i in range(3)]
    precision = {"device": "cpu", "dtype": "float32", "matmul_precision": "highest"}
    lines.append(f"X {json.dumps({'t': 1040000, 'precision': precision})}\n")
    t = 1050000
    for i in range(120):
        dur = 250000 if i % 30 == 29 else 10000  # a stall every 30 steps
        t += dur
        lines.append(f"S {t} {dur} {4000 if i % 2 else 3000} 80 16 1 16\n")
        if i == 60:
            lines.append(f"M {t + 10} 0\n")
            lines.append(f"M {t + 40000} 1\n")
        if i == 90:
            lines.append(f'C {t + 100} 30000 1048576 "{SCRIPT[:-8]}ckpt.pt"\n')
        if i % 40 == 0:
            lines.append(f"F {t} {i + 3} {(i + 3) * 600} {(i + 3) * 40} 0\n")
    lines.append(f"X {json.dumps({'t': t + 5, 'stop': 'steps'})}\n")
    lines.append(f"X {json.dumps({'t': t + 9, 'exception': 'KeyError', 'message': 'x'})}\n")
    return _header(MAIN, "main") + "".join(lines)


def _worker_events() -> str:
    lines = [
        f"F {1000000 + 100000 * i} {i * 4} {i * 4 * 3000} {i * 4 * 200} 0\n" for i in range(30)
    ]
    return _header(WORKER, "worker") + "".join(lines)


def _samples() -> str:
    rows = []
    for i in range(12):
        t = T0 + 0.5 * i
        procs: list[dict[str, Any]] = [
            {
                "pid": MAIN,
                "ppid": 1,
                "name": "python",
                "cpu": None if i == 0 else 95.0,
                "rss": 200_000_000 + i * 1_000_000,
                "uss": 190_000_000,
                "fds": 12,
                "threads": 3,
                "nofile": [1024, 4096],
            },
            {"pid": WORKER, "name": "pt_data_worker", "cpu": 40.0, "rss": 90_000_000, "fds": 9},
        ]
        rows.append(
            {
                "t": t,
                "procs": procs,
                "cpu": 60.0,
                "mem": {"total": 8 << 30, "available": (6 << 30) - i * 1000, "used": 2 << 30},
                "swap": {"total": 1 << 30, "used": 0, "in_bps": 0.0, "out_bps": 0.0},
                "shm": {"total": 64 << 20, "used": 1 << 20},
                "gpu": {"unavailable": "no NVIDIA driver (NVML not found)"},
            }
        )
    return "".join(json.dumps(r) + "\n" for r in rows)


def _stacks() -> str:
    events: list[dict[str, Any]] = []
    frames = [("<module>", SCRIPT, 40), ("main", SCRIPT, 60), ("search", SCRIPT, 12)]
    for k in range(40):
        ts = 500_000 + k * 50_000
        depth = 3 if k % 5 == 0 else 2
        for name, path, line in frames[:depth]:
            events.append(_trace_event(name, path, line, "B", ts))
        for name, path, line in reversed(frames[:depth]):
            events.append(_trace_event(name, path, line, "E", ts + 40_000))
    return json.dumps(events)


def _trace_event(name: str, path: str, line: int, ph: str, ts: int) -> dict[str, Any]:
    args = {"filename": path, "line": line}
    return {"args": args, "cat": "py-spy", "name": name, "ph": ph, "pid": MAIN, "tid": 7, "ts": ts}


HANG = f"""=== pid {MAIN} (python) ===
Process {MAIN}: python {SCRIPT}
Python v3.11.7 (/usr/bin/python3.11)

Thread {MAIN} (idle): "MainThread"
    wait (threading.py:320)
    get (queue.py:180)
    main ({SCRIPT}:61)
    <module> ({SCRIPT}:40)

=== pid {WORKER} (pt_data_worker) ===
Process {WORKER}: python {SCRIPT}
Python v3.11.7 (/usr/bin/python3.11)

Thread {WORKER} (idle): "MainThread"
    recv (socket.py:99)
    __getitem__ ({SCRIPT}:29)
"""


def _meta() -> dict[str, Any]:
    return {
        "trainprof_version": "0.1.0",
        "command": ["/usr/bin/python3", SCRIPT, "--epochs", "3"],
        "redacted": True,
        "cwd": "/home/u",
        "run_dir": "/home/u/trainprof-runs/x",
        "usable_cpus": 2,
        "interval_s": None,
        "max_steps": None,
        "timeout_s": None,
        "wall_start": 1.7e9,
        "t_launch": T0 - 0.1,
        "pid": MAIN,
        "hang": {
            "stacks_file": "hang-stacks.txt",
            "processes": 2,
            "workers": 1,
            "main_stack": "wait (threading.py:320)",
            "compiling": False,
            "silent_s": 12.5,
            "steps_before": 120,
            "unit": "optimizer step",
        },
        "stacks": {
            "chunks": [{"file": "stacks-0.json", "started_at": STACK_START, "rate_hz": 50}],
            "pid": MAIN,
            "error": None,
            "ranks": [  # another rank's recorder (a torchrun job's rank 1)
                {
                    "rank": 1,
                    "pid": MAIN + 7,
                    "chunks": [
                        {"file": "stacks-rank1-0.json", "started_at": STACK_START, "rate_hz": 20}
                    ],
                    "error": None,
                }
            ],
        },
        "exit_code": 124,
        "signal": None,
        "wall_s": 7.2,
        "forwarded": ["SIGTERM"],
        "samples": 12,
        "output": {"stdout_bytes": 10, "stdout_lines": 1, "stderr_bytes": 900, "stderr_lines": 9},
        "stopped_by": "hang",
        "runner": {"pid": 1, "started": 1.7e9 - 5},
        "probe": {"loaded": True},
        "exception": {"type": "KeyError", "message": "'label'"},
    }


STDERR = "Traceback (most recent call last):\n  File \"train.py\", line 3\nKeyError: 'label'\n"


def _files() -> dict[str, bytes]:
    files = {
        f"events-{MAIN}.tp": _main_events(),
        f"events-{WORKER}.tp": _worker_events(),
        "samples.jsonl": _samples(),
        "stacks-0.json": _stacks(),
        "stacks-rank1-0.json": _stacks(),
        "hang-stacks.txt": HANG,
        "run.json": json.dumps(_meta(), indent=1),
        "stdout.log": "step 0\n",
        "stderr.log": STDERR,
    }
    return {name: text.encode() for name, text in files.items()}


def _write(run_dir: Path, files: dict[str, bytes]) -> None:
    run_dir.mkdir()
    for name, data in files.items():
        (run_dir / name).write_bytes(data)


def _read_all(run_dir: Path) -> str:
    """The whole read path of `trainprof report`; the console text, or the one-line error."""
    try:
        session = Session.load(run_dir)
    except CorruptRunError as exc:
        assert "\n" not in str(exc)
        return f"trainprof: {exc}"
    out = io.StringIO()
    data = report(session, None, console=Console(file=out, width=100))  # as `trainprof report`
    json.loads((run_dir / "report.json").read_text())
    assert data["schema"] == "trainprof.report/1"
    return out.getvalue()


# ---- corruptions ----------------------------------------------------------------------------

ODD_VALUES: list[Any] = [
    None, True, 0, -1, 2**70, -(2**70), 1e308, -1e308, float("nan"), float("inf"), 0.5,
    "", "x", "../../etc/passwd", [], [1, "a"], {}, {"a": None},
]  # fmt: skip


def _mutate_json_value(node: Any, rng: random.Random) -> Any:
    """One value somewhere inside a JSON document replaced by an odd one."""
    if isinstance(node, dict) and node and rng.random() < 0.8:
        key = rng.choice(list(node))
        return {**node, key: _mutate_json_value(node[key], rng)}
    if isinstance(node, list) and node and rng.random() < 0.8:
        i = rng.randrange(len(node))
        return [*node[:i], _mutate_json_value(node[i], rng), *node[i + 1 :]]
    return rng.choice(ODD_VALUES)


def _mutate_json_line(line: bytes, rng: random.Random) -> bytes:
    head, sep, rest = line.partition(b" ") if line[:1].isalpha() else (b"", b"", line)
    if head and head not in (b"L", b"X", b"#TP1"):
        fields = rest.split()
        if fields:
            i = rng.randrange(len(fields))
            fields[i] = str(rng.choice([-1, 0, 2**31, 2**63, -(2**64), "nan", "1e9", "-"])).encode()
        return head + b" " + b" ".join(fields) + b"\n"
    prefix = b""
    if head == b"L":
        key, _, rest = rest.partition(b" ")
        prefix = key + b" "
    try:
        doc = json.loads(rest)
    except ValueError:
        return line
    return head + sep + prefix + json.dumps(_mutate_json_value(doc, rng)).encode() + b"\n"


def _corrupt(data: bytes, rng: random.Random) -> bytes:
    kind = rng.randrange(9)
    n = len(data)
    if kind == 0:  # truncated
        return data[: rng.randrange(n + 1)]
    if kind == 1:  # bytes flipped
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            if out:
                out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if kind == 2:  # garbage inserted
        at = rng.randrange(n + 1)
        return data[:at] + rng.randbytes(rng.randint(1, 64)) + data[at:]
    if kind == 3:  # a range deleted
        a = rng.randrange(n + 1)
        return data[:a] + data[a + rng.randint(1, 200) :]
    if kind == 4:  # the whole file is garbage, or empty
        return rng.choice([b"", rng.randbytes(rng.randint(1, 300)), b"\x00" * 50, b"[]", b"null"])
    lines = data.splitlines(keepends=True)
    if not lines:
        return data
    i = rng.randrange(len(lines))
    if kind == 5:  # a line repeated, or two swapped
        j = rng.randrange(len(lines))
        lines[i], lines[j] = lines[j], lines[i]
        lines.insert(i, lines[i])
        return b"".join(lines)
    if kind == 6:  # a line lost
        del lines[i]
        return b"".join(lines)
    # a value of the wrong type or size, the file still well-formed
    try:
        doc = json.loads(data)
    except ValueError:
        lines[i] = _mutate_json_line(lines[i], rng)
        return b"".join(lines)
    return json.dumps(_mutate_json_value(doc, rng)).encode()


def test_the_base_run_loads_and_reports(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    _write(run_dir, _files())
    session = Session.load(run_dir)
    assert session.primary is not None and session.primary.n_steps == 120
    assert len(session.workers) == 1 and session.spans and session.hang_dumps
    assert list(session.rank_spans) == [1] and len(session.rank_spans[1]) == len(session.spans)
    assert len(session.samples) == 12
    text = _read_all(run_dir)
    assert "trainprof report" in text


@pytest.mark.parametrize("name", ["", "[]", '[{"command": 1}]', '{"comm', "\x00\xff", "null"])
def test_unreadable_run_json_is_one_line(tmp_path: Path, name: str) -> None:
    files = _files()
    files["run.json"] = name.encode("latin-1")
    _write(tmp_path / "run", files)
    out = _read_all(tmp_path / "run")
    assert out.startswith("trainprof: ") and "run.json cannot be read as a run record" in out


FILES = sorted(_files())


@pytest.mark.parametrize("seed", range(6))
def test_fuzzed_run_directories_never_raise(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    base = _files()
    for case in range(60):  # 6 x 60 = 360 corrupted run directories
        files = dict(base)
        for name in rng.sample(FILES, rng.choice([1, 1, 1, 2, 3])):
            files[name] = _corrupt(files[name], rng)
        run_dir = tmp_path / f"case{case}"
        _write(run_dir, files)
        try:
            _read_all(run_dir)
        except Exception as exc:  # pragma: no cover - the failure message names the case
            changed = [n for n in FILES if files[n] != base[n]]
            raise AssertionError(
                f"seed {seed} case {case}: {changed} -> {type(exc).__name__}: {exc}"
            ) from exc


def test_record_fields_of_the_wrong_type_or_size_are_dropped(tmp_path: Path) -> None:
    # num_workers 2**40 once made the analysis build a set of 2**40 step indices (OOM);
    # precision as a string and a list as an info record made it raise.
    files = _files()
    main = f"events-{MAIN}.tp"
    text = files[main].decode()
    text = text.replace('"num_workers": 1', f'"num_workers": {2**40}', 1)
    text = text.replace(
        '"precision": {"device": "cpu"', '"precision": "cpu", "x": {"device": "cpu"'
    )
    files[main] = (text + "X [1, 2]\nL 1 [3]\n").encode()
    _write(tmp_path / "run", files)
    session = Session.load(tmp_path / "run")
    log = session.primary
    assert log is not None and log.bad_lines == 2
    assert "num_workers" not in log.loaders[0] and log.loaders[0]["batch_size"] == 16
    assert all(not isinstance(i.get("precision"), str) for i in log.infos)
    assert "trainprof report" in _read_all(tmp_path / "run")


def test_run_json_fields_of_the_wrong_type_read_as_unknown(tmp_path: Path) -> None:
    files = _files()
    meta = _meta()
    meta.update(exit_code="0", wall_s=float("inf"), usable_cpus=2**70, command=["py", 3])
    meta["output"] = {"stdout_lines": [1], "stderr_lines": 9}
    files["run.json"] = json.dumps(meta).encode()
    _write(tmp_path / "run", files)
    got = Session.load(tmp_path / "run").meta
    assert got["exit_code"] is None and got["wall_s"] is None and got["usable_cpus"] is None
    assert got["command"] == ["py", "3"]
    assert got["output"] == {"stderr_lines": 9}  # inside an object: left out
    assert "trainprof report" in _read_all(tmp_path / "run")
