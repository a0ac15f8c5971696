"""Graph breaks: torch.compile cannot trace a line of the model, and splits it there.

Dynamo compiles the code it can trace into a graph; at a line it cannot (a ``.item()`` whose
value the code branches on, a ``print``, a call into a library it does not know) it ends the
graph, runs that line in Python, and compiles what follows as another graph. The model then
runs as several graphs with Python, and often a host sync, between them: fewer fused kernels,
more launches, a GPU that waits. Nothing fails and nothing is printed; a compiled model that
is barely faster than eager is the usual symptom. The probe reads each break's line (Dynamo
compiles the code after a break as a frame named for it) and Dynamo's reasons; breaks inside
torch or a library are left alone (torch.optim breaks its own graphs on purpose).

Anti-pattern::

    def forward(self, x):
        h = self.encoder(x)
        if h.abs().mean().item() > self.threshold:   # .item(): the graph breaks here
            h = self.refine(h)
        print(f"h: {h.shape}")                       # and here
        return self.head(h)

Best practice::

    def forward(self, x):
        h = self.encoder(x)
        h = torch.where(h.abs().mean() > self.threshold, self.refine(h), h)
        return self.head(h)                          # log from the training loop instead
"""

from __future__ import annotations

from trainprof.analysis.attribution import is_user_file, where
from trainprof.analysis.findings import Finding
from trainprof.analysis.metrics import Metrics
from trainprof.analysis.rules.registry import rule
from trainprof.units import plural

MAX_SITES = 4  # lines named in the evidence


@rule(
    id="graph-breaks",
    examples=("graph_breaks",),
    title="torch.compile graph breaks",
    family="model",
    needs=("compiles",),
)
def check(m: Metrics) -> Finding | None:
    log = m.activity.compiles
    if log is None:
        return None
    # Breaks in torch's own code (torch.optim breaks its graphs on purpose) or a library's are
    # not the job's to fix: only the job's own lines count.
    sites = sorted(f for f in log.breaks if is_user_file(f[1]))
    if not sites:
        return None
    named = ", ".join(str(where(f)) for f in sites[:MAX_SITES])
    more = f" and {len(sites) - MAX_SITES} more" if len(sites) > MAX_SITES else ""
    evidence = [f"the graph breaks at {named}{more}"]
    if log.break_reasons:
        evidence.append("Dynamo's reasons: " + "; ".join(log.break_reasons[:MAX_SITES]))
    evidence.append(
        "the compiled code runs as several graphs with Python between them at each call "
        "(what that costs a step was not measured)"
    )
    return Finding(
        id="graph-breaks",
        severity="warning",
        title=(
            f"torch.compile breaks the model's graph at {plural(len(sites), 'line')}: it runs "
            "in pieces with Python between them"
        ),
        evidence=tuple(evidence),
        fix=tuple(_fixes(" ".join(log.break_reasons))),
        where=where(sites[0]),
    )


def _fixes(reasons: str) -> list[str]:
    fixes = []
    if "item()" in reasons:
        fixes.append(
            "keep values the model branches on as tensors (torch.where(cond, a, b) instead of "
            "an if on .item()), or let Dynamo trace them: "
            "torch._dynamo.config.capture_scalar_outputs = True"
        )
    if "print" in reasons or "logging" in reasons:
        fixes.append(
            "print or log from the training loop (every N steps), not inside the compiled model"
        )
    fixes.append(
        "torch._dynamo.explain(model)(batch) lists every break with its reason; "
        "torch.compile(model, fullgraph=True) makes the first break an error"
    )
    return fixes
