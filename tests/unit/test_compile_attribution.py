"""Which stacks are torch.compile compiling: an import of torch._dynamo is not (it runs class
bodies and decorators of the compiler's files), a compile that imports a module still is."""

from __future__ import annotations

from trainprof.analysis.attribution import is_compiling

BOOT = "<frozen importlib._bootstrap>"

# py-spy's stack (outermost first) of `torch.optim.SGD(...)` importing torch._dynamo, as recorded
# on torch 2.13: an H200 run of an fp32 job without torch.compile showed it as 39.5 ms of compile.
IMPORT = (
    ("<module>", "train.py", 5),
    ("SGD.__init__", "torch/optim/sgd.py", 65),
    ("_disable_dynamo.<locals>.inner", "torch/_compile.py", 47),
    ("_find_and_load", BOOT, 1176),
    ("<module>", "torch/_dynamo/convert_frame.py", 62),
    ("_find_and_load", BOOT, 1176),
    ("<module>", "torch/_dynamo/symbolic_convert.py", 1347),
    ("InstructionTranslatorBase", "torch/_dynamo/symbolic_convert.py", 4401),
    ("stack_op", "torch/_dynamo/symbolic_convert.py", 503),
    ("update_wrapper", "functools.py", 56),
)

COMPILE = (
    ("<module>", "train.py", 30),
    ("OptimizedModule.__call__", "torch/_dynamo/eval_frame.py", 400),
    ("_compile", "torch/_dynamo/convert_frame.py", 1000),
    ("compile_fx", "torch/_inductor/compile_fx.py", 2000),
    ("_find_and_load", BOOT, 1176),  # the compiler importing a lowering module meanwhile
    ("<module>", "torch/_inductor/lowering.py", 10),
)


def test_importing_the_compiler_is_not_compiling() -> None:
    assert not is_compiling(IMPORT)


def test_a_compile_is_compiling_even_while_it_imports() -> None:
    assert is_compiling(COMPILE)
    assert is_compiling(COMPILE[:4])
