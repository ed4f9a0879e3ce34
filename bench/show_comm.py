#!/usr/bin/env python3
"""show_comm.py: medians over the rounds of bench/run_comm.sh's JSON lines, as a table."""
import json
import statistics
import sys
from collections import defaultdict

rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
groups = defaultdict(list)
for r in rows:
    key = (r["engine"], r["what"], r.get("ranks", 2), r.get("floats", r.get("bytes", "")))
    value = r.get("GBps", r.get("half_rtt_us", r.get("mean_us")))
    groups[key].append((value, r.get("min_us")))
print(f"{'engine':<18} {'measure':<15} {'ranks':>5} {'size':>8} {'median':>9} {'unit':<10} {'best min':>8}")
for (engine, what, ranks, size), vals in sorted(groups.items()):
    unit = "GB/s" if what == "p2p_bandwidth" else ("us half-RTT" if what == "p2p_latency" else "us mean")
    med = statistics.median(v for v, _ in vals)
    mins = [m for _, m in vals if m is not None]
    best = f"{min(mins):8.2f}" if mins else ""
    print(f"{engine:<18} {what:<15} {ranks:>5} {size:>8} {med:9.3f} {unit:<10} {best}")
