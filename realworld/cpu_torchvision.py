"""Run a script whose imports need torchvision, beside a CPU-only torch: ``python cpu_torchvision.py SCRIPT ARGS...``.

The index's torchvision wheels are CUDA builds. Beside a CPU torch their C++ ops library cannot load,
and ``import torchvision`` then fails on registering fake kernels for ``torchvision::nms``/``qnms``,
ops that were never defined. This defines the two schemas (and nothing else) when, and only when,
that library cannot load, so that torchvision imports with its C++ ops unavailable (timm's training
script uses none of them). The packages come from ``<venv>/realworld-vision`` when they are not
importable otherwise: they live outside the venv's site-packages, since an importable but broken
torchvision breaks ``from transformers import Trainer`` for every other job of that venv.
The script then runs as ``__main__``, unmodified, with ``sys.argv`` = [SCRIPT, ARGS...] and its
folder first on ``sys.path``, as ``python SCRIPT ARGS...`` would run it.
"""

import importlib.util
import os
import runpy
import sys

SIDE = os.path.join(sys.prefix, "realworld-vision")


def _define_missing_ops() -> None:
    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is None or not spec.submodule_search_locations:
        return
    folder = list(spec.submodule_search_locations)[0]
    lib_path = next((os.path.join(folder, f) for f in os.listdir(folder) if f.startswith("_C.")), None)
    if lib_path is not None:
        try:
            torch.ops.load_library(lib_path)
            return
        except OSError:
            pass
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _define_missing_ops.keep = lib  # the schemas live as long as the Library object


def main() -> None:
    # as `python SCRIPT` does: the script's folder first, so it imports its sibling modules
    sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[1]))
    if importlib.util.find_spec("torchvision") is None and os.path.isdir(SIDE):
        sys.path.insert(0, SIDE)
    _define_missing_ops()
    sys.argv = sys.argv[1:]
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
