"""netns_test.py (label fault): worker processes that share no network with each other.

Four `troupe worker` processes, each in its own network namespace joined to the
coordinator's by a veth pair on one bridge, with UCX_TLS=tcp (namespaces do not isolate shared
memory, so UCX would otherwise still take it): TP 2 x PP 2 gives the greedy text of one
process. Then one worker's link is taken down for 2 s in the middle of 20 streams: every stream
completes with exactly that text. Skips (exit 77) with the reason where namespaces cannot be
made (not root, no `ip`).

Usage: python netns_test.py PATH/TO/troupe
"""
import os
import shutil
import subprocess
import sys
import threading
import time
import unittest

from serve_util import Server
from workers_test import ARGS, PROMPTS, run_all

TROUPE = sys.argv.pop(1)
TAG = f"trp{os.getpid() % 10000}"
BRIDGE = f"{TAG}br"
NETS = [f"{TAG}n{i}" for i in range(4)]
HOST_IP = "10.231.0.1"


def sh(*cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def setup_network():
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    sh("ip", "addr", "add", HOST_IP + "/24", "dev", BRIDGE)
    sh("ip", "link", "set", BRIDGE, "up")
    for i, ns in enumerate(NETS):
        sh("ip", "netns", "add", ns)
        outside, inside = f"{TAG}h{i}", f"{TAG}c{i}"
        sh("ip", "link", "add", outside, "type", "veth", "peer", "name", inside)
        sh("ip", "link", "set", inside, "netns", ns)
        sh("ip", "link", "set", outside, "master", BRIDGE)
        sh("ip", "link", "set", outside, "up")
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"10.231.0.{10 + i}/24", "dev", inside)
        sh("ip", "netns", "exec", ns, "ip", "link", "set", inside, "up")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")


def teardown_network():
    for i, ns in enumerate(NETS):
        sh("ip", "netns", "del", ns, check=False)
        sh("ip", "link", "del", f"{TAG}h{i}", check=False)
    sh("ip", "link", "del", BRIDGE, check=False)


def can_make_namespaces():
    if os.geteuid() != 0 or not shutil.which("ip"):
        return "needs root and iproute2"
    probe = sh("ip", "netns", "add", TAG + "probe", check=False)
    if probe.returncode != 0:
        return "ip netns add failed: " + probe.stderr.strip()
    sh("ip", "netns", "del", TAG + "probe", check=False)
    return None


class NetworkNamespaces(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with Server(TROUPE, *ARGS) as one:
            cls.want, errors = run_all(one.url, PROMPTS[:20])
            assert errors == [], errors
        setup_network()

    @classmethod
    def tearDownClass(cls):
        teardown_network()

    def start(self, port):
        env = dict(os.environ, TROUPE_SECRET="netns-test-secret", UCX_TLS="tcp")
        box = {}
        t = threading.Thread(target=lambda: box.setdefault("srv", Server(
            TROUPE, *ARGS, "--workers", "4", "--no-launch", "--worker-host", HOST_IP, "--worker-port", str(port),
            env=env)))
        t.start()
        time.sleep(0.5)
        workers = [subprocess.Popen(["ip", "netns", "exec", ns, TROUPE, "worker", "--rank", str(i),
                                     "--coordinator", HOST_IP, "--port", str(port)], env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                   for i, ns in enumerate(NETS)]
        t.join(timeout=120)
        self.assertIn("srv", box, "the server did not come up")
        return box["srv"], workers

    def stop(self, srv, workers):
        srv.stop()
        for w in workers:
            try:
                w.wait(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()

    def test_every_worker_in_its_own_namespace_over_tcp(self):
        srv, workers = self.start(29810 + os.getpid() % 50)
        try:
            got, errors = run_all(srv.url, PROMPTS[:20])
            self.assertEqual(errors, [])
            for i in range(20):
                self.assertEqual(got[i], self.want[i], f"request {i}")
        finally:
            self.stop(srv, workers)

    def test_a_link_down_for_two_seconds(self):
        srv, workers = self.start(29870 + os.getpid() % 50)
        try:
            tokens = [0]
            lock = threading.Lock()
            cut = threading.Event()

            def on_token():
                with lock:
                    tokens[0] += 1
                    if tokens[0] == 60 and not cut.is_set():
                        cut.set()
                        threading.Thread(target=flap).start()

            def flap():
                sh("ip", "link", "set", f"{TAG}h1", "down")
                time.sleep(2)
                sh("ip", "link", "set", f"{TAG}h1", "up")

            t0 = time.time()
            got, errors = run_all(srv.url, PROMPTS[:20], on_token=on_token)
            self.assertGreater(time.time() - t0, 2.0)  # the pipeline waited for the link
            self.assertTrue(cut.is_set())
            self.assertEqual(errors, [])
            for i in range(20):
                self.assertEqual(got[i], self.want[i], f"request {i}")
        finally:
            self.stop(srv, workers)


if __name__ == "__main__":
    why = can_make_namespaces()
    if why:
        print("skipped:", why)
        sys.exit(77)
    unittest.main(verbosity=2)
