"""aiperf_test.py: NVIDIA's aiperf benchmark client (`aiperf profile`) against `troupe serve`
with the bundled model: a short streaming run on /v1/completions and one on
/v1/chat/completions (aiperf sends stream_options with continuous usage stats, min_tokens
and ignore_eos there), synthetic prompts of 32 tokens from the local tokenizer, 16 output
tokens. Every request must succeed (aiperf exits 0 even when some fail, so its JSON export
is read), with usage reported by the server.

Exit 77 (ctest: skipped) with the reason when aiperf could not be installed.
Usage: VENV/bin/python aiperf_test.py PATH/TO/troupe
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from serve_util import Server

TROUPE = sys.argv.pop(1)
ROOT = Path(__file__).resolve().parents[2]
VENV = Path(sys.executable).parent.parent

if (VENV / "UNAVAILABLE").exists():
    print("SKIP: aiperf is not installed:", (VENV / "UNAVAILABLE").read_text())
    sys.exit(77)


class Aiperf(unittest.TestCase):
    def run_profile(self, url, endpoint, extra):
        out = Path(tempfile.mkdtemp(prefix="aiperf-"))
        env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
        cmd = [str(VENV / "bin" / "aiperf"), "profile", "--model", "stories", "--url", url,
               "--endpoint-type", endpoint, "--streaming", "--tokenizer", str(ROOT / "models" / "stories260K-hf"),
               "--isl", "32", "--isl-stddev", "0", "--osl", "16", "--osl-stddev", "0", "--request-count", "24",
               "--concurrency", "4", "--random-seed", "0", "--ui-type", "none", "--artifact-dir", str(out), *extra]
        run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        self.assertEqual(run.returncode, 0, run.stdout[-3000:] + run.stderr[-3000:])
        report = json.loads(next(out.rglob("profile_export_aiperf.json")).read_text())
        self.assertEqual(report["request_count"]["avg"], 24, report.get("error_summary"))
        self.assertFalse(report.get("error_request_count"), report.get("error_summary"))
        self.assertFalse(report.get("error_summary"), report.get("error_summary"))
        self.assertGreater(report["time_to_first_token"]["avg"], 0)
        return report

    def test_streaming_completions_and_chat(self):
        with Server(TROUPE) as srv:
            r = self.run_profile(srv.url, "completions", ["--extra-inputs", "ignore_eos:true", "--use-server-token-count"])
            self.assertEqual(r["output_sequence_length"]["avg"], 16)
            self.run_profile(srv.url, "chat", ["--extra-inputs", "ignore_eos:true", "--extra-inputs", "min_tokens:16",
                                               "--per-chunk-usage", "--use-server-token-count"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
