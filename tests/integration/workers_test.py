"""workers_test.py (label fault): `troupe serve --workers N`, every shard in a worker process.

- TP 2 x PP 2 over 4 worker processes gives the greedy text of one process, for 20 concurrent
  streams (the stage's TP sums cross processes over UCX; stages talk over CAF's network layer).
- SIGKILL of a worker process in the middle of 50 concurrent streams: every stream completes
  with exactly the fault-free text, /health says degraded (with the reason) while the worker is
  started again, and afterwards every KV block is free and no lease is held.
- Expert parallelism (Mixtral, EP 2) and latent attention (DeepSeek-V3, TP 2 x PP 2) across
  worker processes give the tokens of one process, and /metrics shows the workers' expert
  counts: the same per (layer, expert) as one process serving the same request.
- Injected worker faults: kill-worker (the process SIGKILLs itself at a step), partition (it
  stops answering for 2 s), slow-link (everything it sends is late): exact text all the same.
- A worker with the wrong secret is refused (exit 2, the reason logged on both sides) and the
  run still forms when the right one joins.

Usage: python workers_test.py PATH/TO/troupe
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

from serve_util import Server, metric, run_streams

TROUPE = sys.argv.pop(1) if __name__ == "__main__" else None  # netns_test imports this file
PROMPTS = [p + " and the sun was warm" * (i % 3) for i, p in
           enumerate(["Once upon a time", "The little dog", "Lily and Ben went to the park", "Tom had a big red ball.",
                      "One day, a cat", "Sam wanted to fly", "The bird sang"] * 8)][:50]
ARGS = ["--tp", "2", "--pp", "2", "--max-batch-tokens", "128"]


run_all = run_streams  # netns_test imports it from here


def workers_of(pid):
    """The `troupe worker` processes a server launched (its children, from /proc)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if int(fields[1]) == pid and fields[0] != "Z":
            kids.append(int(entry))
    return kids


class Workers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with Server(TROUPE, *ARGS) as one:
            cls.want, errors = run_all(one.url, PROMPTS)
            assert errors == [], errors

    def test_four_worker_processes_give_the_one_process_text(self):
        with Server(TROUPE, *ARGS, "--workers", "4") as srv:
            self.assertEqual(len(workers_of(srv.proc.pid)), 4)
            got, errors = run_all(srv.url, PROMPTS[:20])
            self.assertEqual(errors, [])
            for i in range(20):
                self.assertEqual(got[i], self.want[i], f"request {i}")
        self.assertEqual(srv.proc.returncode, 0)
        time.sleep(0.5)
        self.assertEqual(workers_of(srv.proc.pid), [])
        # the workers stop on the SIGTERM the server sends (they must not inherit its blocked mask)
        self.assertNotIn("did not stop", srv.log_text())

    def test_sigkill_of_a_worker_under_fifty_streams(self):
        with Server(TROUPE, *ARGS, "--workers", "4") as srv:
            pids = workers_of(srv.proc.pid)
            self.assertEqual(len(pids), 4)
            tokens = [0]
            lock = threading.Lock()
            health = []
            killed = threading.Event()

            def on_token():
                with lock:
                    tokens[0] += 1
                    if tokens[0] == 200 and not killed.is_set():
                        os.kill(pids[1], signal.SIGKILL)  # stage 0, TP rank 1
                        killed.set()

            def watch():  # /health while the worker is away
                while not done.is_set():
                    try:
                        urllib.request.urlopen(srv.url + "/health", timeout=5)
                        health.append((200, ""))
                    except urllib.error.HTTPError as e:
                        health.append((e.code, e.read().decode()))
                    except Exception:  # noqa: BLE001
                        pass
                    time.sleep(0.02)

            done = threading.Event()
            watcher = threading.Thread(target=watch)
            watcher.start()
            got, errors = run_all(srv.url, PROMPTS, on_token=on_token)
            done.set()
            watcher.join()
            self.assertTrue(killed.is_set())
            self.assertEqual(errors, [])
            for i, (w, g) in enumerate(zip(self.want, got)):
                self.assertEqual(g, w, f"request {i}")
            degraded = [body for code, body in health if code == 503]
            self.assertTrue(degraded, "health never said degraded")
            self.assertIn("stage0.rank1", degraded[0])
            text = urllib.request.urlopen(srv.url + "/metrics").read().decode()
            self.assertGreaterEqual(metric(text, "troupe_shard_restarts_total"), 1)
            self.assertEqual(metric(text, "troupe_kv_blocks_free"), metric(text, "troupe_kv_blocks_total"))
            self.assertEqual(metric(text, "troupe_kv_leases"), 0)
            self.assertEqual(urllib.request.urlopen(srv.url + "/health").status, 200)
            self.assertEqual(len(workers_of(srv.proc.pid)), 4)  # the successor runs
            self.assertIn("worker rank 1 is gone", srv.log_text())

    def test_injected_worker_faults(self):
        faults = ["--inject", "kill-worker:rank=2,step=15", "--inject", "partition:rank=1,ms=2000,step=30",
                  "--inject", "slow-link:rank=3,ms=1"]
        with Server(TROUPE, *ARGS, "--workers", "4", *faults) as srv:
            t0 = time.time()
            got, errors = run_all(srv.url, PROMPTS[:20])
            took = time.time() - t0
            self.assertEqual(errors, [])
            for i in range(20):
                self.assertEqual(got[i], self.want[i], f"request {i}")
            log = srv.log_text()
            self.assertIn("kill worker 2 at step=15", log)
            self.assertIn("partition: worker 1 stops answering for 2000 ms at step=30", log)
            self.assertGreater(took, 2.0)  # the partition held the pipeline
            text = urllib.request.urlopen(srv.url + "/metrics").read().decode()
            self.assertGreaterEqual(metric(text, "troupe_shard_restarts_total"), 1)
            self.assertEqual(metric(text, "troupe_kv_blocks_free"), metric(text, "troupe_kv_blocks_total"))

    def test_experts_and_latent_attention_across_processes(self):
        fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
        for model, split in [(os.path.join(fixtures, "gguf", "mixtral.gguf"), ["--tp", "2", "--ep", "2"]),
                             (os.path.join(fixtures, "models", "deepseek_v3"), ["--tp", "2", "--pp", "2"])]:
            def run(*extra):
                out = subprocess.run([TROUPE, "generate", "-m", model, "-p", "hello", "-n", "12", "-t", "0",
                                      "-q", "--json", *split, *extra], capture_output=True, text=True, timeout=120)
                self.assertEqual(out.returncode, 0, out.stderr)
                return json.loads(out.stdout)["tokens"]
            self.assertEqual(run("--workers", str(4 if "--pp" in split else 2)), run(), model)

    def test_expert_counts_of_worker_processes_reach_metrics(self):
        model = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "gguf", "mixtral.gguf")

        def counts(*extra):
            with Server(TROUPE, "-m", model, "--tp", "2", "--ep", "2", *extra) as srv:
                body = json.dumps({"model": "stories", "prompt": "hello there", "max_tokens": 6,
                                   "temperature": 0}).encode()
                req = urllib.request.Request(srv.url + "/v1/completions", body,
                                             {"Content-Type": "application/json"})
                urllib.request.urlopen(req, timeout=120).read()
                text = urllib.request.urlopen(srv.url + "/metrics").read().decode()
            out = {}
            for line in text.splitlines():
                m = re.match(r'troupe_expert_tokens_total\{model_name="[^"]*",layer="(\d+)",expert="(\d+)"\} (\d+)', line)
                if m:
                    out[(int(m.group(1)), int(m.group(2)))] = int(m.group(3))
            return out

        one = counts()
        self.assertGreater(sum(one.values()), 0)
        self.assertEqual(counts("--workers", "2"), one)

    def test_a_worker_with_the_wrong_secret_is_refused(self):
        port = 29900 + os.getpid() % 50
        env = dict(os.environ, TROUPE_SECRET="the-right-secret")
        server = {}

        def serve():
            server["srv"] = Server(TROUPE, "--workers", "1", "--no-launch", "--worker-port", str(port), env=env)

        t = threading.Thread(target=serve)
        t.start()
        time.sleep(1.0)
        bad = subprocess.run([TROUPE, "worker", "--rank", "0", "--port", str(port), "--secret", "not-the-secret"],
                             capture_output=True, text=True, timeout=60)
        self.assertEqual(bad.returncode, 2, bad.stderr)
        self.assertIn("authentication failed", bad.stderr)
        good = subprocess.Popen([TROUPE, "worker", "--rank", "0", "--port", str(port)], env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t.join(timeout=120)
        srv = server["srv"]
        try:
            got, errors = run_all(srv.url, PROMPTS[:3])
            self.assertEqual(errors, [])
            for i in range(3):
                self.assertEqual(got[i], self.want[i])
            self.assertIn("refused a worker", srv.log_text())
        finally:
            srv.stop()
            good.wait(timeout=30)


if __name__ == "__main__":
    unittest.main(verbosity=2)
