"""The HTML report's stylesheet: a light, a dark (``prefers-color-scheme``) and a print variant.

The plots' classes (``s0``…, ``cause-*``, ``k-*`` for ledger buckets, ``f0``… for stack frames)
take their colours from here: ``render.svg`` writes no colour of its own.
"""

STYLE = """
:root { --bg: #ffffff; --fg: #1f2328; --muted: #656d76; --grid: #d8dee4; --panel: #f6f8fa;
  --s0: #0969da; --s1: #8c959f; --s2: #bf8700; --s3: #1a7f37; --s4: #8250df; --s5: #cf222e;
  --cpu: #cf222e; --blocked: #8250df; --compile: #bc4c00; --data: #bf8700; --eval: #1a7f37;
  --save: #0550ae; --warn: #9a6700; --err: #cf222e; --info: #0969da; --ok: #1a7f37; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #0d1117; --fg: #e6edf3; --muted: #8d96a0; --grid: #30363d; --panel: #161b22;
    --s0: #4493f8; --s1: #6e7681; --s2: #d29922; --s3: #3fb950; --s4: #ab7df8; --s5: #f85149;
    --cpu: #f85149; --blocked: #ab7df8; --compile: #db6d28; --data: #d29922; --eval: #3fb950;
    --save: #79c0ff; --warn: #d29922; --err: #f85149; --info: #4493f8; --ok: #3fb950; }
}
html { background: var(--bg); color: var(--fg); }
body { font: 14px/1.45 system-ui, sans-serif; max-width: 1040px; margin: 1.5em auto; padding: 0 1em; }
h1 { font-size: 1.3em; } h2 { font-size: 1.1em; margin-top: 1.6em; }
pre { background: var(--panel); padding: .6em .8em; overflow-x: auto; font-size: 12.5px; }
code, pre { font-family: ui-monospace, monospace; }
.muted { color: var(--muted); fill: var(--muted); }
.sev.error { color: var(--err); } .sev.warning { color: var(--warn); } .sev.info { color: var(--info); }
.ok { color: var(--ok); } .warning { color: var(--warn); }
.finding { margin-bottom: 1em; } .finding p { margin: .2em 0; }
.where code { color: var(--s4); }
ul.evidence { list-style: "• "; } ul.fix { list-style: "→ "; color: var(--ok); }
figure { margin: 1.2em 0; break-inside: avoid; page-break-inside: avoid; }
figcaption { font-weight: 600; margin-bottom: .3em; }
svg.chart { max-width: 100%; height: auto; display: block; }
svg text { fill: var(--fg); font: 11px system-ui, sans-serif; }
svg text.small { font-size: 10px; }
svg .plot { fill: none; stroke: var(--grid); }
svg .grid { stroke: var(--grid); stroke-width: 1; }
svg .ref { stroke: var(--muted); stroke-dasharray: 4 3; }
svg .line { fill: none; stroke-width: 1.6; }
svg .dashed { stroke-dasharray: 6 4; stroke-width: 2; }
svg text.on-bar { fill: #ffffff; } svg text.on-light { fill: #1f2328; }
.s0 { stroke: var(--s0); fill: var(--s0); } .s1 { stroke: var(--s1); fill: var(--s1); }
.s2 { stroke: var(--s2); fill: var(--s2); } .s3 { stroke: var(--s3); fill: var(--s3); }
.s4 { stroke: var(--s4); fill: var(--s4); } .s5 { stroke: var(--s5); fill: var(--s5); }
polyline.line { fill: none; }
.cause-cpu { fill: var(--cpu); stroke: var(--cpu); } .cause-blocked { fill: var(--blocked); stroke: var(--blocked); }
.cause-compile { fill: var(--compile); stroke: var(--compile); } .cause-data { fill: var(--data); stroke: var(--data); }
.cause-eval { fill: var(--eval); stroke: var(--eval); } .cause-checkpoint { fill: var(--save); stroke: var(--save); }
.cause-sync { fill: var(--s4); stroke: var(--s4); }
.cause-wait { fill: var(--blocked); stroke: var(--blocked); }
.k-sampler, .k-worker_start, .k-fetch, .k-collate, .k-pin, .k-transfer, .k-data_wait { fill: var(--data); }
.k-fetch { opacity: .85; } .k-collate { opacity: .7; } .k-pin { opacity: .55; } .k-transfer { opacity: .6; } .k-sampler { opacity: .45; }
.k-worker_start { opacity: .35; }
.k-save { fill: var(--save); } .k-eval { fill: var(--eval); } .k-stall_compute { fill: var(--cpu); }
.k-stall_blocked { fill: var(--blocked); } .k-compile { fill: var(--compile); }
.k-stall_wait { fill: var(--blocked); opacity: .6; }
.k-forward { fill: var(--s0); } .k-backward { fill: var(--s0); opacity: .75; }
.k-optimizer { fill: var(--s0); opacity: .55; } .k-anomaly { fill: var(--s4); opacity: .5; }
.k-sync { fill: var(--s4); }
.k-logging { fill: var(--s4); opacity: .7; } .k-loop { fill: var(--s1); } .k-idle { fill: var(--s1); opacity: .6; }
.k-step { fill: var(--s0); opacity: .6; } .k-unattributed { fill: var(--grid); }
.f0 { fill: #8fb8ed; } .f1 { fill: #f0b27a; } .f2 { fill: #a3d9a5; } .f3 { fill: #d7a8e8; }
.f4 { fill: #f2d479; } .f5 { fill: #b8c4ce; }
footer { margin-top: 2em; color: var(--muted); font-size: 12px; }
@media print {
  :root { --bg: #ffffff; --fg: #000000; --panel: #ffffff; --grid: #cccccc; --muted: #444444; }
  body { max-width: none; margin: 0; font-size: 11pt; }
  pre { white-space: pre-wrap; border: 1px solid #cccccc; font-size: 9pt; }
  details { display: block; } details > summary { list-style: none; }
}
"""
