"""One notion of "the user's own code" for py-spy frames and traceback text (usercode.is_user_path).

GIVEN a file path as py-spy or a traceback prints it, THEN it is user code unless it is an
installed package, the standard library, torch's or trainprof's installed package (told by
their real directories, not by a word in the path), interpreter internals or generated code;
the bundled examples are user code.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import trainprof
from trainprof.analysis.usercode import is_torch_path, is_user_path

OWN = Path(trainprof.__file__).parent


@pytest.mark.parametrize(
    ("path", "mine"),
    [
        ("/home/user/proj/train.py", True),
        ("train.py", True),
        ("<string>", True),
        ("<stdin>", True),
        ("<ipython-input-3-1a2b>", True),
        ("C:\\Users\\me\\proj\\train.py", True),
        ("/home/user/proj/lib/utils.py", True),
        ("/usr/lib/python3/dist-packages/trainprof/examples/demo.py", True),
        ("/home/user/src/trainprof/trainprof/examples/zoo/ragged.py", True),
        ("C:\\src\\trainprof\\examples\\demo.py", True),
        ("", False),
        ("/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", False),
        ("/usr/local/lib/python3.10/dist-packages/transformers/trainer.py", False),
        ("/usr/lib/python3.11/multiprocessing/queues.py", False),
        ("/usr/lib/python3.13t/threading.py", False),
        ("/usr/lib64/python3.9/selectors.py", False),
        ("/home/user/.pyenv/versions/3.11.7/lib/python3.11/threading.py", False),
        ("C:\\Users\\me\\anaconda3\\envs\\e\\lib\\site-packages\\torch\\_utils.py", False),
        ("C:\\Python311\\Lib\\threading.py", False),
        ("/tmp/torchinductor_user/ab/cabcdef.py", False),
        (str(OWN / "probe" / "torch_hooks.py"), False),
        (str(OWN / "bootstrap" / "sitecustomize.py"), False),
        (str(OWN / "examples" / "demo_train.py"), True),
        # a word in the path is no package: the user's own folders named torch or trainprof
        ("/home/user/torch/train.py", True),
        ("/home/user/src/pytorch/torch/utils/data/dataloader.py", True),
        ("/home/user/trainprof/train.py", True),
        ("/home/user/src/trainprof/trainprof/probe/torch_hooks.py", True),
        ("/home/user/train prof/trainprof/tests/unit/test_x.py", True),
        ("<frozen runpy>", False),
        ("<built-in>", False),
        # a py-spy frame read torn: a string of the program's where the file name should be
        ("overwrite_input", False),
    ],
)
def test_user_code_is_what_no_library_marker_claims(path: str, mine: bool) -> None:
    assert is_user_path(path) is mine


def test_trainprof_imported_through_a_link_is_trainprof_both_ways(tmp_path: Path) -> None:
    # GIVEN trainprof imported through a symlinked folder (an editable install, a linked checkout)
    link = tmp_path / "link"
    link.symlink_to(OWN.parent, target_is_directory=True)
    code = (
        "import sys; from trainprof.analysis.usercode import is_user_path as u; "
        "print([u(p) for p in sys.argv[1:]])"
    )
    as_imported = link / "trainprof" / "probe" / "writer.py"
    resolved = os.path.realpath(as_imported)
    out = subprocess.run(
        [sys.executable, "-c", code, str(as_imported), resolved],
        env={**os.environ, "PYTHONPATH": str(link)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    # THEN its files are trainprof's, by the path as imported and by the resolved one
    assert out.strip() == "[False, False]"


@pytest.mark.parametrize(
    ("path", "torch"),
    [
        ("/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", True),
        ("C:\\envs\\e\\Lib\\site-packages\\torch\\_utils.py", True),
        ("/usr/lib/python3/dist-packages/torch/utils/data/dataloader.py", True),
        ("/home/user/torch/utils/data/my_loader.py", False),
        ("/home/user/proj/site-packages-notes/torch.py", False),
        ("/usr/lib/python3.11/threading.py", False),
        ("", False),
    ],
)
def test_torch_is_an_installed_torch(path: str, torch: bool) -> None:
    assert is_torch_path(path) is torch


def test_this_environments_torch_is_torch_wherever_it_lies() -> None:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("no torch in this environment")
    here = Path(spec.submodule_search_locations[0]) / "utils" / "data" / "dataloader.py"
    assert is_torch_path(str(here)) and is_torch_path(os.path.realpath(here))
    assert not is_user_path(str(here))
