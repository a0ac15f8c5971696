"""The pathology zoo: small, honest CPU reproductions of what makes training slow or broken.

One standalone script per finding id (plus variants and healthy controls), each written the way
real training loops are written, each reproducing a real write-up from the seed documents. The
table below is what ``trainprof demo`` and the integration tests read: each script's kind and
summary. Which finding a script must get is the rule's to say (its ``examples=``), so the table
names no rule; it imports nothing but the standard library (the scripts import torch when run).
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass
from typing import Literal

Kind = Literal["slow", "healthy", "crash", "hang", "gpu", "dist"]  # dist: under torchrun

ZOO_DIR = pathlib.Path(__file__).resolve().parent


@dataclass(frozen=True)
class ZooCase:
    """One zoo script and what trainprof must say about it."""

    name: str  # file stem
    kind: Kind
    summary: str  # one line: what the script does wrong (or right)
    timeout_s: float  # a generous bound for trainprof's --timeout

    @property
    def expect(self) -> str | None:
        """The finding id that must come first among warnings and errors: the rule that names
        this script among its ``examples``; None for a healthy control."""
        from trainprof.analysis.rules import example_of  # the table itself needs no analysis

        return example_of(self.name)


_CASES: tuple[ZooCase, ...] = (
    ZooCase(
        "fake_batching",
        "slow",
        "DataLoader(batch_size=1) and 64 next(it) calls + forwards per optimizer step (seed 000)",
        60.0,
    ),
    ZooCase(
        "input_bound",
        "slow",
        "read + decompress + augment every image in __getitem__ with num_workers=0; tiny CNN waits",
        60.0,
    ),
    ZooCase(
        "worker_transfer",
        "slow",
        "num_workers=2 over a tokenized corpus in memory: each batch, a dict of four small "
        "tensors, costs the main process more to receive than a worker takes to make it",
        60.0,
    ),
    ZooCase(
        "slow_worker",
        "slow",
        "one DataLoader worker hashing text features in pure Python: the loop waits inside "
        "receiving each batch, but the worker is at capacity (more workers, not the hand-over)",
        60.0,
    ),
    ZooCase(
        "head_not_optimized",
        "slow",
        "a new classification head swapped in after the optimizer was built: it gets gradients "
        "and never trains",
        60.0,
    ),
    ZooCase(
        "oversubscribed",
        "slow",
        "a CPU training job whose torch threads are sized for 4x the CPUs it may use (a "
        "container shows the host's cores): the loop's thread waits for a CPU",
        60.0,
    ),
    ZooCase(
        "anomaly_detection",
        "slow",
        "torch.autograd.set_detect_anomaly(True), left in from a NaN hunt: every forward op keeps "
        "its Python stack, every gradient is checked for NaN",
        60.0,
    ),
    ZooCase(
        "profiler_left_on",
        "slow",
        "a torch.profiler.profile() block with no schedule left around the training loop: "
        "every op of every step recorded and kept in memory",
        60.0,
    ),
    ZooCase(
        "recompiles",
        "slow",
        "torch.compile(dynamic=False) on batches padded to their longest text: a new graph each "
        "new length, until Dynamo gives up and the model runs uncompiled",
        60.0,
    ),
    ZooCase(
        "graph_breaks",
        "slow",
        "a compiled MLP that rescales its activations by a .item() it reads in forward: the "
        "graph breaks there, every step runs two graphs with Python between them",
        60.0,
    ),
    ZooCase(
        "waiting_worker",
        "slow",
        "two DataLoader workers whose __getitem__ waits on a remote store's round trip: busy all "
        "the time at a few % of a CPU (more workers than CPUs, or threads, not a cheaper getitem)",
        60.0,
    ),
    ZooCase(
        "iterable_unsplit",
        "slow",
        "an IterableDataset of shards read by 2 workers that never call get_worker_info: each "
        "yields every shard, so every sample comes twice an epoch",
        60.0,
    ),
    ZooCase(
        "sampler_overhead",
        "slow",
        "P x K batch sampler re-infers every candidate's modality by decoding it, every batch (seed 004)",
        60.0,
    ),
    ZooCase(
        "worker_startup",
        "slow",
        "short epochs, persistent_workers=False, each worker re-parses a JSON index in worker_init_fn",
        60.0,
    ),
    ZooCase(
        "cpu_stall",
        "slow",
        "every 30 steps a pure-Python optimal_sequence_search relabels all videos in the loop (seed 000)",
        60.0,
    ),
    ZooCase(
        "checkpoint_stall",
        "slow",
        "torch.save of full model (frozen 25 MB table) + optimizer, twice every 20 steps (seed 002)",
        60.0,
    ),
    ZooCase(
        "eval_stall",
        "slow",
        "model.eval() + no_grad pass over a 2560-sample validation set every 20 steps (seed 002)",
        60.0,
    ),
    ZooCase(
        "logging_overhead",
        "slow",
        "prints tensor reprs and per-layer norms, ~27 lines, on every step of a tiny model (seeds 002/004)",
        60.0,
    ),
    ZooCase(
        "loop_overhead",
        "slow",
        "per-step per-parameter grad stats via .item(), histograms and Python metrics (seed 004)",
        60.0,
    ),
    ZooCase(
        "subprocess_per_step",
        "slow",
        "runs `ps` through subprocess.run after every step to log its own memory: the loop "
        "waits for a child process each step",
        60.0,
    ),
    ZooCase(
        "numpy_in_forward",
        "slow",
        "a custom autograd.Function fake-quantizes activations in numpy (percentiles, rounding) "
        "inside the model's forward, every step",
        60.0,
    ),
    ZooCase(
        "worker_cow_growth",
        "slow",
        "a catalogue of 300,000 dicts read by 2 forked persistent workers: copy-on-write turns "
        "their shared pages private, each worker's USS climbs",
        90.0,
    ),
    ZooCase(
        "debug_log_stall",
        "slow",
        "a DEBUG file handler formats a whole attention tensor into a log record every 10 steps",
        60.0,
    ),
    ZooCase(
        "hard_negative_mining",
        "slow",
        "re-mines hard negatives in pure Python every 15 steps (~0.25 s): in bursts, not in "
        "every step",
        60.0,
    ),
    ZooCase(
        "memory_growth",
        "slow",
        "unbounded dict cache of decoded frame pairs in each of 2 persistent workers (seed 003)",
        60.0,
    ),
    ZooCase(
        "healthy_compute",
        "healthy",
        "compute-bound CNN on an in-memory TensorDataset; one print per epoch",
        60.0,
    ),
    ZooCase(
        "healthy_stream",
        "healthy",
        "the same shards, split between the 2 workers by get_worker_info",
        60.0,
    ),
    ZooCase(
        "healthy_loader",
        "healthy",
        "2 persistent workers with light augmentation keep well ahead of the model",
        60.0,
    ),
    ZooCase(
        "healthy_epochs",
        "healthy",
        "the fixed seed-004 loop: cached-metadata PK sampler, log every 20 steps, 6 short epochs",
        60.0,
    ),
    ZooCase(
        "heavy_augment",
        "slow",
        "rotation, blur, gamma, noise and cutout in numpy in __getitem__, num_workers=0, on a "
        "CNN whose threads fill the CPUs: a worker would take its CPU from the step",
        90.0,
    ),
    ZooCase(
        "light_augment",
        "slow",
        "numpy crop, flip and colour jitter in __getitem__, num_workers=0, a model on one "
        "intra-op thread: a CPU is free for a worker",
        60.0,
    ),
    ZooCase(
        "collate_tokenize",
        "slow",
        "text classification: pure-Python NFKC + greedy WordPiece + padding in the collate_fn, "
        "num_workers=0; __getitem__ only returns a dict",
        60.0,
    ),
    ZooCase(
        "viterbi_stall",
        "slow",
        "a Trainer callback's on_step_end Viterbi-decodes held-out sentences in pure Python "
        "every 25 steps",
        60.0,
    ),
    ZooCase(
        "genexpr_stall",
        "slow",
        "IterableDataset stream; every 20 steps pseudo_label_search labels samples by nearest "
        "prototype with sum(a*b for ...) over Python lists",
        60.0,
    ),
    ZooCase(
        "blocking_upload",
        "slow",
        "every 10 steps train_one_epoch POSTs metrics synchronously to a server that takes "
        "250 ms to answer",
        60.0,
    ),
    ZooCase(
        "eval_no_grad",
        "slow",
        "char-level GRU LM; a full validation loader under torch.no_grad() every 20 steps, "
        "with no model.eval()/train()",
        60.0,
    ),
    ZooCase(
        "ci_smoke",
        "healthy",
        "a small MLP on an in-memory dataset: trainprof ci's self-check; --stall-ms adds the "
        "per-step wait a --baseline gate must catch",
        60.0,
    ),
    ZooCase(
        "manual_slicing",
        "healthy",
        "no DataLoader: randperm each epoch, then x[i : i + bs] slices; a tabular ResNet",
        60.0,
    ),
    ZooCase(
        "manual_update",
        "healthy",
        "no torch.optim, no DataLoader: tensor slices, backward() and a hand-written SGD update; "
        "each backward() counts as the step",
        60.0,
    ),
    ZooCase(
        "functional_model",
        "healthy",
        "a two-tower model as plain tensors and functions (x @ w), an InfoNCE loss by hand: its "
        "forward runs in the user's own lines, before backward(), and is not loop overhead",
        60.0,
    ),
    ZooCase(
        "activation_checkpointing",
        "healthy",
        "torch.utils.checkpoint recomputes each block's forward inside backward, and an EMA "
        "update runs under @torch.no_grad(): the recompute is backward time",
        60.0,
    ),
    ZooCase(
        "compile_cold",
        "healthy",
        "torch.compile on a small MLP with a cold Inductor cache: seconds of compiling before "
        "the first step are warm-up, not a hang",
        120.0,
    ),
    ZooCase(
        "crash_ragged",
        "crash",
        "a few 96-snippet videos among 64-snippet ones break default_collate in a worker (seed 000)",
        60.0,
    ),
    ZooCase(
        "crash_ragged_short",
        "crash",
        "clips shorter than the crop window; the worker's collate says only 'Trying to resize "
        "storage that is not resizable'",
        60.0,
    ),
    ZooCase(
        "crash_worker_keyerror",
        "crash",
        "a plain KeyError in a worker's __getitem__: a speaker of the second shard is not in "
        "the label map built from the first",
        60.0,
    ),
    ZooCase(
        "crash_main_valueerror",
        "crash",
        "an uncaught ValueError (math domain error) in the loop's own warm-up schedule, mid-run",
        60.0,
    ),
    ZooCase(
        "crash_shape",
        "crash",
        "torch.cat(..., dim=2) on 2-D pseudo-labels right after the first batch (seed 000)",
        60.0,
    ),
    ZooCase(
        "crash_host_alloc",
        "crash",
        "a (N, 1) - (N,) broadcast in a hand-written loss, silent at batch 256, asks for "
        "233 TiB when the validation scores 8 million rows at once",
        60.0,
    ),
    ZooCase(
        "crash_worker_killed",
        "crash",
        "DataLoader worker 1 is SIGKILLed mid-epoch (stand-in for the OOM killer)",
        60.0,
    ),
    ZooCase(
        "hang_fd_limit",
        "hang",
        "soft RLIMIT_NOFILE=128, file_descriptor sharing, one tensor per object: the loader hangs",
        30.0,
    ),
    ZooCase(
        "hang_worker_blocked",
        "hang",
        "after 20 steps both DataLoader workers wait forever in __getitem__ for a shard whose "
        "download failed (Event.wait)",
        40.0,
    ),
    ZooCase(
        "gpu_fp32",
        "gpu",
        "GPU only: a convnet trained in pure fp32, TF32 off, on a Tensor-Core GPU (seed 001)",
        120.0,
    ),
    ZooCase(
        "gpu_healthy",
        "gpu",
        "GPU only: a bf16 convnet that keeps the GPU busy; the tutorial's per-step "
        "running_loss += loss.item() costs nothing there",
        120.0,
    ),
    ZooCase(
        "gpu_sync_heavy",
        "gpu",
        "GPU only: p.grad.norm().item() for each of ~200 parameter tensors after every "
        "optimizer step",
        120.0,
    ),
    ZooCase(
        "gpu_input_bound",
        "gpu",
        "GPU only: decompress + crop + jitter every image in __getitem__ with num_workers=0 "
        "while a bf16 convnet waits",
        120.0,
    ),
    ZooCase(
        "gpu_launch_bound",
        "gpu",
        "GPU only: 48 tiny Linear blocks at batch 8 and a foreach=False AdamW: thousands of "
        "microsecond kernels a step",
        120.0,
    ),
    ZooCase(
        "gpu_forgot_device",
        "gpu",
        "GPU machine, CPU training: the model and its batches are never moved to the GPU, "
        "which sits idle",
        120.0,
    ),
    ZooCase(
        "gpu_memory_creep",
        "gpu",
        "GPU only: losses.append(loss) and a no_grad-less running validation loss keep "
        "every step's graph on the GPU",
        120.0,
    ),
    # Distributed (run as `trainprof run -- torchrun --nproc-per-node 2 dist_x.py`; gloo, CPU).
    ZooCase(
        "dist_metrics_straggler",
        "dist",
        "rank 0 alone recomputes per-class ROC AUC in Python every step; rank 1 waits in DDP's "
        "all-reduce",
        180.0,
    ),
    ZooCase(
        "dist_data_straggler",
        "dist",
        "rank 1's __getitem__ is slower (its disk); rank 0 waits for it in every all-reduce",
        180.0,
    ),
    ZooCase(
        "dist_rank_fails",
        "dist",
        "rank 1 raises on a corrupt record mid-training; rank 0's gloo error is a consequence",
        180.0,
    ),
    ZooCase(
        "dist_eval_hang",
        "dist",
        "rank 0 alone validates through the DDP-wrapped model (BatchNorm buffers broadcast) while "
        "rank 1 waits in dist.barrier(): both wait for good",
        180.0,
    ),
    ZooCase(
        "dist_accumulation",
        "dist",
        "4 micro-batches per optimizer step under DDP, none inside no_sync(): every backward "
        "all-reduces the gradients (ZOO_NO_SYNC=1: the fixed loop)",
        180.0,
    ),
    ZooCase(
        "dist_same_shuffle",
        "dist",
        "3 epochs over a DistributedSampler(shuffle=True) that never gets set_epoch(): the same "
        "order every epoch (dist_healthy calls it: the control)",
        180.0,
    ),
    ZooCase(
        "dist_healthy",
        "dist",
        "equal shards and work on every rank, metrics reduced as tensors every 50 steps, "
        "set_epoch before each of 2 epochs",
        180.0,
    ),
    ZooCase(
        "worker_pickle",
        "slow",
        "num_workers=2 and a numpy_collate over embeddings in memory: each 2 MiB batch is "
        "pickled through a pipe and unpickled by the main process, which costs more than "
        "making it (num_workers=0, or tensors from the collate; not more workers)",
        60.0,
    ),
    ZooCase(
        "beside_busy_loop",
        "slow",
        "a healthy one-thread MLP job while a neighbour spins two busy loops per CPU it may use: "
        "the loop's thread waits for a CPU most of the time, its profile looks compute-bound",
        90.0,
    ),
    ZooCase(
        "pinned_threads",
        "slow",
        "a job pinned to one CPU (taskset -c 0) that asks torch for os.cpu_count() threads: "
        "they take turns on its one CPU, the loop's thread waits at every matmul",
        90.0,
    ),
    ZooCase(
        "workers_oversubscribed",
        "slow",
        "pytorch/examples imagenet's shape: -j twice the CPUs (4 on 2), each worker decoding "
        "images, beside torch's intra-op threads: the loop never waits for data, but its "
        "thread waits for a CPU",
        60.0,
    ),
    ZooCase(
        "healthy_workers_sized",
        "healthy",
        "the same imagenet-shaped job with -j CPUs-1 and torch.set_num_threads for the CPU "
        "left: no more threads than CPUs",
        60.0,
    ),
    ZooCase(
        "healthy_epoch_eval",
        "healthy",
        "the MNIST example's shape: a small CNN, the test set run once after each epoch "
        "(a few % of the run: a note), compute-bound",
        60.0,
    ),
)

ZOO: dict[str, ZooCase] = {case.name: case for case in _CASES}


def script_path(name: str) -> pathlib.Path:
    """The path of zoo script ``name`` (a file stem from ``ZOO``)."""
    if name not in ZOO:
        raise KeyError(f"no zoo script named {name!r}; known: {', '.join(sorted(ZOO))}")
    return ZOO_DIR / f"{name}.py"
