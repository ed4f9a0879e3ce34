"""show_decode.py: one line per `troupe bench --json` object on stdin (used by run_decode.sh)."""
import json
import sys

for line in sys.stdin:
    j = json.loads(line)
    print(f"{j['model']} t={j['threads']}: decode {j['decode_tok_s']:.1f} tok/s ({j['decode_us_per_token']:.1f} us) = "
          f"{j['decode_pct_of_bound']:.1f}% of bound; prefill {j['prefill_gflop_s']:.1f} GFLOP/s = "
          f"{j['prefill_pct_of_peak']:.1f}% of peak")
