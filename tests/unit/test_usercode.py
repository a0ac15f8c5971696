"""One notion of "the user's own code" for py-spy frames and traceback text (usercode.is_user_path).

GIVEN a file path as py-spy or a traceback prints it, THEN it is user code unless it is an
installed package, the standard library, torch (also a source checkout), trainprof itself,
interpreter internals or generated code; the bundled examples are user code.
"""

from __future__ import annotations

import pytest

from trainprof.analysis.usercode import is_user_path


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
        ("/home/user/src/pytorch/torch/utils/data/dataloader.py", False),
        ("/home/user/src/trainprof/trainprof/probe/torch_hooks.py", False),
        ("/tmp/torchinductor_user/ab/cabcdef.py", False),
        ("<frozen runpy>", False),
        ("<built-in>", False),
    ],
)
def test_user_code_is_what_no_library_marker_claims(path: str, mine: bool) -> None:
    assert is_user_path(path) is mine
