"""http_fault_test.py (label fault): 100 concurrent streaming requests over HTTP to
`troupe serve --tp 2 --pp 2 --inject ...` with at least 10 shard kills. Every stream must
complete with exactly the text of the fault-free server (no chunk repeated or lost), and
afterwards every KV block is free and no lease is held (from /metrics).

Usage: python http_fault_test.py PATH/TO/troupe
"""
import sys
import unittest
import urllib.request

from serve_util import Server, metric, run_streams

TROUPE = sys.argv.pop(1)
MODEL = None  # bundled default
PROMPTS = [p + " and the sun was warm" * (i % 4) for i, p in
           enumerate(["Once upon a time", "The little dog", "Lily and Ben went to the park", "Tom had a big red ball.",
                      "One day, a cat", "Sam wanted to fly"] * 17)][:100]
ARGS = ["--tp", "2", "--pp", "2", "--max-batch-tokens", "128"]


def run_all(url):
    return run_streams(url, PROMPTS)


class HttpFaults(unittest.TestCase):
    def test_hundred_streams_survive_ten_kills(self):
        with Server(TROUPE, *ARGS) as clean:
            want, errors = run_all(clean.url)
            self.assertEqual(errors, [])
        kills = []
        shards = [(0, 0), (1, 1), (0, 1), (1, 0)]
        for k in range(12):
            s, r = shards[k % 4]
            kills += ["--inject", f"kill-shard:stage={s},rank={r},step={4 + 5 * k}"]
        with Server(TROUPE, *ARGS, *kills) as faulty:
            got, errors = run_all(faulty.url)
            self.assertEqual(errors, [])
            for i, (w, g) in enumerate(zip(want, got)):
                self.assertEqual(g, w, f"request {i}")
            text = urllib.request.urlopen(faulty.url + "/metrics").read().decode()
            self.assertGreaterEqual(metric(text, "troupe_shard_restarts_total"), 10)
            self.assertEqual(metric(text, "troupe_kv_blocks_free"), metric(text, "troupe_kv_blocks_total"))
            self.assertEqual(metric(text, "troupe_kv_leases"), 0)
            health = urllib.request.urlopen(faulty.url + "/health")
            self.assertEqual(health.status, 200)


if __name__ == "__main__":
    unittest.main(verbosity=2)
