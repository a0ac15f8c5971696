"""Secrets in a command line are masked before trainprof stores or prints it (store.redact),
in run.json's command, the probe's event-file headers and py-spy's dump headers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainprof.collect.samplers.hang import _redact_process_line
from trainprof.store.redact import (
    CARRY_MAX,
    Redactor,
    StreamMasker,
    is_secret_name,
    redact,
    secret_values,
)
from trainprof.store.schema import ENV_NO_REDACT, MAGIC


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--api-key=sk-1"], ["--api-key=***"]),
        (["--api-key", "sk-1"], ["--api-key", "***"]),
        (["API_KEY=sk-1"], ["API_KEY=***"]),
        (["--hf_token", "hf_1", "--lr", "0.1"], ["--hf_token", "***", "--lr", "0.1"]),
        (["-p", "x", "--db-password=hunter2"], ["-p", "x", "--db-password=***"]),
        (["--SECRET", "s"], ["--SECRET", "***"]),
        (["--passwd=p", "--credentials", "c.json"], ["--passwd=***", "--credentials", "***"]),
        (["--auth-header", "Bearer x"], ["--auth-header", "***"]),
        (["wandb.api_key=abc", "trainer.max_epochs=3"], ["wandb.api_key=***", "trainer.max_epochs=3"]),
        # a flag whose name looks secret, followed by another option: nothing to mask
        (["--use-auth", "--epochs", "3"], ["--use-auth", "--epochs", "3"]),
        (["--token", "--", "x"], ["--token", "--", "x"]),
        (["--token="], ["--token="]),
        # the password of a URL, in any argument
        (["--db", "postgres://u:pw@host/db"], ["--db", "postgres://u:***@host/db"]),
        (["--url=https://u:pw@h/x"], ["--url=https://u:***@h/x"]),
        (["https://host/path", "u:p"], ["https://host/path", "u:p"]),
        # nothing secret: unchanged
        (["python", "train.py", "--epochs", "3", "lr=0.1"], ["python", "train.py", "--epochs", "3", "lr=0.1"]),
    ],
)  # fmt: skip
def test_redact(argv: list[str], expected: list[str]) -> None:
    original = list(argv)
    assert redact(argv) == expected
    assert argv == original  # a new list; the input is left alone
    assert redact(expected) == expected  # idempotent


@pytest.mark.parametrize(
    "name",
    ["--hf_token", "--api-key", "--password", "WANDB_API_KEY", "HF_TOKEN", "apiKey", "PGPASSWORD",
     "AWS_SECRET_ACCESS_KEY", "--auth-header", "--token", "GOOGLE_APPLICATION_CREDENTIALS"],
)  # fmt: skip
def test_secret_names(name: str) -> None:
    assert is_secret_name(name.lstrip("-"))


@pytest.mark.parametrize(
    "name",
    ["--tokenizer_name", "--max_tokens", "--token_budget", "--max-tokens", "--num_tokens",
     "--keys", "--monkey", "--key_size", "--tokenizer"],
)  # fmt: skip
def test_names_that_only_contain_a_secret_word(name: str) -> None:
    assert not is_secret_name(name.lstrip("-"))
    assert redact([name, "512"]) == [name, "512"]


def test_secret_values_are_masked_in_any_text() -> None:
    env = {"HF_TOKEN": "hf_abcdefgh123", "HOME": "/home/me", "SHORT_TOKEN": "ab"}
    argv = ["train.py", "--api-key", "sk-live-99999", "--lr", "0.1", "DB_PASSWORD=pa55word!"]
    values = secret_values(argv, env)
    assert values == {"hf_abcdefgh123", "sk-live-99999", "pa55word!"}  # "ab" is too short
    r = Redactor(values)
    text = "401 for hf_abcdefgh123 at https://bob:hunter22@hub.example/x with sk-live-99999"
    assert r.text(text) == "401 for *** at https://bob:***@hub.example/x with ***"
    data = {"k": ["pa55word!", {"hf_abcdefgh123": 1}], "n": 3}
    assert r.data(data) == {"k": ["***", {"***": 1}], "n": 3}
    assert Redactor(values, enabled=False).text(text) == text


def test_url_passwords_never_swallow_a_json_quote() -> None:
    text = '["https://a:b","c@d"]'
    assert Redactor([]).text(text) == text


def test_the_module_is_standard_library_only() -> None:
    # The probe imports it inside the user's job, before torch: nothing outside the stdlib.
    code = (
        "import sys; before = set(sys.modules); import trainprof.store.redact; "
        "print(sorted(m for m in set(sys.modules) - before))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    added = {m.split(".")[0] for m in eval(out.stdout)}
    assert added <= {"trainprof"} | set(sys.stdlib_module_names)


def _header_argv(
    tmp_path: Path,
    no_redact: bool,
    args: tuple[str, ...] = (),
    env_add: dict[str, str] | None = None,
) -> list[str]:
    """The argv a real probe writes into its event-file header, in a fresh interpreter."""
    code = (
        "import sys; from trainprof.probe.writer import EventWriter; "
        f"w = EventWriter({str(tmp_path)!r}); w.add('T 1\\n'); w.close()"
    )
    env = {k: v for k, v in os.environ.items() if k != ENV_NO_REDACT}
    env.update(env_add or {})
    if no_redact:
        env[ENV_NO_REDACT] = "1"
    args = args or (
        "--api-key=sk-live-1",
        "--token",
        "sk-live-2",
        "AWS_SECRET=sk-live-3",
        "--n",
        "1",
    )
    subprocess.run([sys.executable, "-c", code, *args], env=env, check=True)
    (path,) = tmp_path.glob("events-*.tp")
    first = path.read_text().splitlines()[0]
    assert first.startswith(MAGIC)
    path.unlink()
    return json.loads(first[len(MAGIC) :])["argv"]


def test_event_file_header_argv_is_redacted(tmp_path: Path) -> None:
    argv = _header_argv(tmp_path, no_redact=False)
    assert argv[1:] == ["--api-key=***", "--token", "***", "AWS_SECRET=***", "--n", "1"]
    assert "sk-live" not in json.dumps(argv)


def test_event_file_header_masks_a_known_secret_value_anywhere(tmp_path: Path) -> None:
    """A token passed as a plain argument (`train.py $HF_TOKEN`) has no secret name: its value,
    that of a secret-named variable, is masked as everywhere else."""
    argv = _header_argv(
        tmp_path,
        False,
        ("hf_POSITIONAL77", "--url", "x=hf_POSITIONAL77"),
        {"HF_TOKEN": "hf_POSITIONAL77"},
    )
    assert argv[1:] == ["***", "--url", "x=***"]
    argv = _header_argv(tmp_path, True, ("hf_POSITIONAL77",), {"HF_TOKEN": "hf_POSITIONAL77"})
    assert argv[1:] == ["hf_POSITIONAL77"]  # trainprof run --no-redact: as given


def test_event_file_header_argv_with_no_redact(tmp_path: Path) -> None:
    argv = _header_argv(tmp_path, no_redact=True)
    assert argv[1:] == ["--api-key=sk-live-1", "--token", "sk-live-2", "AWS_SECRET=sk-live-3"] + [
        "--n",
        "1",
    ]


def test_py_spy_dump_header_is_redacted() -> None:
    dump = (
        "Process 4242: /usr/bin/python3 train.py --api-key sk-live-1 --epochs 3\n"
        "Python v3.11.7 (/usr/bin/python3.11)\n\n"
        'Thread 4242 (idle): "MainThread"\n'
        "    main (train.py:10)\n"
    )
    out = _redact_process_line(dump)
    assert out.splitlines()[0] == "Process 4242: /usr/bin/python3 train.py --api-key *** --epochs 3"
    assert out.splitlines()[1:] == dump.splitlines()[1:]


def test_the_shells_working_directories_are_no_secret() -> None:
    """PWD ends in "pwd" like DB_PWD, but it is the job's directory: masking it hid every path
    of the job's own files in its report."""
    assert not is_secret_name("PWD") and not is_secret_name("OLDPWD")
    assert is_secret_name("DB_PWD")
    assert secret_values([], {"PWD": "/home/user/proj", "DB_PWD": "hunter22"}) == {"hunter22"}


# ---- trainprof's own --no-redact, never the job's; the job's output masked as it is copied ----


def test_a_no_redact_in_the_command_line_turns_nothing_off(tmp_path: Path) -> None:
    """In the runner sys.argv holds the job's command, in the job its own arguments: a job
    argument named --no-redact must not unmask. Only configure (trainprof's parsed option)
    and, in the job, the runner's ENV_NO_REDACT may."""
    code = (
        "import sys; from trainprof.store import redact; "
        "r = redact.current(); j = redact.configure_in_job(); "
        "print(r.enabled, j.enabled, r.text('x hf_ENVSECRET1 y'), "
        "redact.configure(False).enabled)"
    )
    env = {k: v for k, v in os.environ.items() if k != ENV_NO_REDACT}
    env["HF_TOKEN"] = "hf_ENVSECRET1"
    out = subprocess.run(
        [sys.executable, "-c", code, "--no-redact"], env=env, capture_output=True, text=True
    )
    assert out.stdout.split() == ["True", "True", "x", "***", "y", "False"], out.stderr
    env[ENV_NO_REDACT] = "1"  # what the runner sets for `trainprof run --no-redact`
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split()[:2] == ["True", "False"], out.stderr


SECRET_VALUE = "hf_STREAMSECRET123"


def _streamed(chunks: list[bytes], values: tuple[str, ...] = (SECRET_VALUE,)) -> list[bytes]:
    """What a StreamMasker lets out after each chunk, then at the end."""
    masker = StreamMasker(Redactor(values))
    return [masker.feed(c) for c in chunks] + [masker.flush()]


@pytest.mark.parametrize("at", [1, 3, 9, len(SECRET_VALUE) - 1])
def test_a_secret_split_across_two_writes_is_masked(at: int) -> None:
    line = f"token {SECRET_VALUE} ok\n".encode()
    cut = len(b"token ") + at
    out = _streamed([line[:cut], line[cut:]])
    assert b"".join(out) == b"token *** ok\n"
    assert out[0] == b""  # nothing of an unfinished line is let out


def test_every_write_lets_out_only_masked_whole_lines() -> None:
    s = SECRET_VALUE.encode()
    chunks = [b"a\n" + s[:4], s[4:] + b"\rb", b"\n", b"https://u:pw123@h/x tail"]
    out = _streamed(chunks)
    assert out[:3] == [b"a\n", b"***\r", b"b\n"]
    assert out[4] == b"https://u:***@h/x tail"  # the end: what was held back, masked
    assert all(s[:5] not in o for o in out)


def test_a_line_with_no_end_is_let_out_in_masked_pieces() -> None:
    """A 4 MiB line without LF or CR (a progress dump, a blob) is not held in memory: it goes
    out in pieces, each cut where no secret crosses it, and bytes that are not UTF-8 survive."""
    s = SECRET_VALUE.encode()
    filler = b"\xff" + b"x" * (CARRY_MAX // 3)
    stream = (filler + s) * 12 + b"\n"
    chunks = [stream[i : i + 65536] for i in range(0, len(stream), 65536)]
    out = _streamed(chunks)
    assert b"".join(out) == (filler + b"***") * 12 + b"\n"
    assert sum(1 for o in out[:-2] if o) >= 3  # let out before the line ended
    assert max(map(len, out)) <= 3 * CARRY_MAX


def test_masking_off_passes_every_byte_at_once() -> None:
    masker = StreamMasker(Redactor([SECRET_VALUE], enabled=False))
    assert masker.feed(b"half " + SECRET_VALUE.encode()[:5]) == b"half " + b"hf_ST"
