"""serving_test.py: `troupe serve` as a process, for what only a whole server shows:

* SIGTERM while a stream outlives --drain-timeout: the stream ends with an error event and
  [DONE], and the process exits 0 within a couple of seconds of the timeout; the same when
  the signal lands on a thread a library started (OpenBLAS's), not on the waiting one;
* out of file descriptors (soft = hard limit 64, 150 clients): accept failures are retried
  with backoff and logged a few times, not thousands; the server serves once they leave; and
  at start-up the soft limit is raised towards the hard one;
* a fault rate injected on purpose (kill-shard:p=0.01, the README's example) under steady
  load is survived: no 503 ever, /health 200 at the end;
* a shard that can never run: --on-give-up exit leaves with status 3, retry keeps the process
  up with /health 503 naming the policy;
* the start-up line and troupe_kv_blocks_total agree; /metrics says where each shard runs and
  its device's memory; `troupe generate` ends its text with a
  newline before the timing line;
* the bundled model dressed as GPT-OSS (its tokenizer given harmony's special tokens, its
  tokenizer_config GPT-OSS's chat template from the fixture): chat replies carry
  reasoning_content (null: this model never opens a harmony message, so all it says is the
  content), streamed and whole alike; reasoning_effort is taken, checked, and refused for a
  model of another format.

Usage: python serving_test.py PATH/TO/troupe
"""
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.error
import urllib.request

from serve_util import Server, metric

TROUPE = sys.argv.pop(1)


def post(url, body, timeout=60, path="/v1/completions"):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def health(url):
    try:
        with urllib.request.urlopen(url + "/health", timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


class Serving(unittest.TestCase):
    def test_sigterm_ends_streams_after_the_drain_timeout(self):
        # every step 150 ms late: a 100-token stream would take 15 s
        srv = Server(TROUPE, "--drain-timeout", "1", "--inject", "delay:from=engine,to=stage0.rank0,ms=150")
        try:
            s = socket.create_connection(("127.0.0.1", srv.port))
            body = json.dumps({"model": "stories", "prompt": "Once upon a time", "max_tokens": 100,
                               "stream": True, "ignore_eos": True})
            s.sendall(f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n{body}".encode())
            got = s.recv(4096)
            self.assertIn(b"200 OK", got)
            t0 = time.time()
            srv.proc.send_signal(signal.SIGTERM)
            s.settimeout(10)
            data = got
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                if b"0\r\n\r\n" in data[-16:]:
                    break
            text = data.decode(errors="replace")
            self.assertIn('"error"', text, text[-500:] + "\nserver log:\n" + srv.log_text())
            self.assertIn("shutting down", text)
            self.assertIn("data: [DONE]", text)
            rc = srv.proc.wait(timeout=10)
            self.assertEqual(rc, 0, srv.log_text())
            self.assertLess(time.time() - t0, 1 + 3, "exit took too long after the drain timeout")
        finally:
            if srv.proc.poll() is None:
                srv.proc.kill()

    def test_sigterm_to_a_library_thread_still_drains(self):
        # a process-wide SIGTERM goes to any thread not blocking it; threads that libraries
        # start before main (OpenBLAS's pool) do not block it: the server must still drain and
        # exit 0, not die of the default action (a stream cut with no error event)
        with Server(TROUPE) as srv:
            pid = srv.proc.pid
            open_to_it = []
            for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
                if tid == pid:
                    continue  # the main thread waits for the signal on purpose
                with open(f"/proc/{pid}/task/{tid}/status") as f:
                    blocked = next(int(l.split()[1], 16) for l in f if l.startswith("SigBlk:"))
                if not blocked & (1 << (signal.SIGTERM - 1)):
                    open_to_it.append(tid)
            if not open_to_it:
                self.skipTest("every thread but main blocks SIGTERM in this build")
            libc = ctypes.CDLL(None, use_errno=True)
            SYS_tgkill = 234  # x86-64
            self.assertEqual(libc.syscall(SYS_tgkill, pid, open_to_it[0], int(signal.SIGTERM)), 0)
            rc = srv.proc.wait(timeout=20)
            self.assertEqual(rc, 0, srv.log_text())
            self.assertIn("drained; bye", srv.log_text())

    def test_out_of_file_descriptors_backs_off(self):
        with Server(TROUPE, ulimit_files=(64, 64)) as srv:
            socks = []
            for _ in range(150):
                try:
                    socks.append(socket.create_connection(("127.0.0.1", srv.port), timeout=2))
                except OSError:
                    break
            time.sleep(3)  # accept keeps failing meanwhile
            failures = srv.log_text().count("accept failed")
            self.assertGreaterEqual(failures, 1, "the descriptor limit was never hit")
            self.assertLessEqual(failures, 3, "accept failures flood the log")
            for s in socks:
                s.close()
            time.sleep(1)
            self.assertEqual(health(srv.url)[0], 200)
            status, _ = post(srv.url, {"model": "stories", "prompt": "Once", "max_tokens": 4})
            self.assertEqual(status, 200)
        with Server(TROUPE, ulimit_files=(256, None)) as srv:
            limits = open(f"/proc/{srv.proc.pid}/limits").read()
            soft, hard = (int(x) for x in re.search(r"Max open files\s+(\d+)\s+(\d+)", limits).groups())
            self.assertGreaterEqual(soft, min(4096 + 256, hard), limits)
            self.assertGreater(soft, 256, limits)

    def test_injected_fault_rate_is_survived(self):
        with Server(TROUPE, "--tp", "2", "--pp", "2", "--inject", "kill-shard:p=0.01,seed=3") as srv:
            statuses, stop = [], time.time() + 8

            def load():
                while time.time() < stop:
                    statuses.append(post(srv.url, {"model": "stories", "prompt": "Once upon a time",
                                                   "max_tokens": 16, "temperature": 0})[0])

            threads = [threading.Thread(target=load) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.assertGreater(len(statuses), 20)
            self.assertEqual(sorted(set(statuses)), [200], f"{len(statuses)} requests")
            text = urllib.request.urlopen(srv.url + "/metrics").read().decode()
            self.assertGreater(metric(text, "troupe_shard_restarts_total"), 3)
            self.assertEqual(health(srv.url)[0], 200)

    def test_giving_up_exits_or_retries(self):
        srv = Server(TROUPE, "--tp", "2", "--inject", "kill-shard:stage=0,rank=1,p=1.0", "--on-give-up", "exit")
        try:
            post(srv.url, {"model": "stories", "prompt": "Once", "max_tokens": 4}, timeout=30)
            self.assertEqual(srv.proc.wait(timeout=30), 3, srv.log_text())
        finally:
            if srv.proc.poll() is None:
                srv.proc.kill()
        with Server(TROUPE, "--tp", "2", "--inject", "kill-shard:stage=0,rank=1,p=1.0", "--retry-interval", "0.5") as srv:
            status, _ = post(srv.url, {"model": "stories", "prompt": "Once", "max_tokens": 4}, timeout=30)
            self.assertNotEqual(status, 200)
            deadline = time.time() + 20
            while health(srv.url)[0] == 200 and time.time() < deadline:
                time.sleep(0.05)
            time.sleep(1)
            self.assertIsNone(srv.proc.poll(), "the server must stay up")
            code, body = health(srv.url)
            self.assertIn("retry every", body.get("restart_policy", ""), body)

    def test_startup_line_and_metrics_agree(self):
        with Server(TROUPE) as srv:
            deadline = time.time() + 10
            while not any("KV blocks" in l for l in srv.log) and time.time() < deadline:
                time.sleep(0.05)
            line = next(l for l in srv.log if "KV blocks" in l)
            blocks = int(re.search(r"(\d+) KV blocks", line).group(1))
            text = urllib.request.urlopen(srv.url + "/metrics").read().decode()
            self.assertEqual(metric(text, "troupe_kv_blocks_total"), blocks)

    def test_metrics_say_where_each_shard_runs(self):
        with Server(TROUPE, "--tp", "2") as srv:
            text = urllib.request.urlopen(srv.url + "/metrics").read().decode()
            for rank in (0, 1):
                used = re.search(r'troupe_shard_device_memory_bytes\{model_name="[^"]*",shard="stage0.rank%d",device="host \(cpu\)",'
                                 r'state="used"\} (\d+)' % rank, text)
                free = re.search(r'troupe_shard_device_memory_bytes\{model_name="[^"]*",shard="stage0.rank%d",device="[^"]*",'
                                 r'state="free"\} (\d+)' % rank, text)
                self.assertTrue(used and free, text)
                self.assertGreater(int(used.group(1)), 0)
                self.assertGreater(int(free.group(1)), 0)
                resident = re.search(r'troupe_shard_resident_bytes\{model_name="[^"]*",shard="stage0.rank%d"\} (\d+)' % rank, text)
                self.assertTrue(resident and int(resident.group(1)) > 0, text)

    def test_a_harmony_model_answers_with_reasoning_content(self):
        import shutil
        import tempfile

        here = os.path.dirname(os.path.abspath(__file__))
        src = os.path.join(here, "..", "..", "models", "stories260K-hf")
        fixture = json.load(open(os.path.join(here, "..", "fixtures", "chat_templates.json")))
        template = next(f["template"] for f in fixture["families"] if f["family"] == "harmony")
        with tempfile.TemporaryDirectory() as d:
            for name in os.listdir(src):
                shutil.copy(os.path.join(src, name), d)
            with open(os.path.join(d, "tokenizer.json")) as f:
                tok = json.load(f)
            for i, t in enumerate(["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>",
                                   "<|constrain|>"]):
                tok["added_tokens"].append({"id": 500 + i, "content": t, "single_word": False, "lstrip": False,
                                            "rstrip": False, "normalized": False, "special": True})
            with open(os.path.join(d, "tokenizer.json"), "w") as f:
                json.dump(tok, f)
            with open(os.path.join(d, "tokenizer_config.json")) as f:
                cfg = json.load(f)
            cfg["chat_template"] = template
            with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
                json.dump(cfg, f)
            chat = {"model": "stories", "max_tokens": 12, "temperature": 0,
                    "messages": [{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": "Once upon a time"}]}
            with Server(TROUPE, "--model", d) as srv:
                self.assertIn("chat_template=harmony", srv.log_text())
                status, body = post(srv.url, dict(chat, reasoning_effort="low"), path="/v1/chat/completions")
                self.assertEqual(status, 200, body)
                msg = json.loads(body)["choices"][0]["message"]
                self.assertIn("reasoning_content", msg)
                self.assertIsNone(msg["reasoning_content"])
                self.assertTrue(msg["content"])
                status, body = post(srv.url, dict(chat, reasoning_effort="low", stream=True),
                                    path="/v1/chat/completions")
                self.assertEqual(status, 200, body)
                streamed = "".join(json.loads(line[6:])["choices"][0]["delta"].get("content", "")
                                   for line in body.splitlines()
                                   if line.startswith("data: {") and json.loads(line[6:])["choices"])
                self.assertEqual(streamed, msg["content"])
                status, body = post(srv.url, dict(chat, reasoning_effort="extreme"), path="/v1/chat/completions")
                self.assertEqual(status, 400, body)
                self.assertEqual(json.loads(body)["error"]["param"], "reasoning_effort")
                # tools: the template declares them (namespace functions); calls are read from
                # bodies addressed to functions.NAME, so only auto and none are accepted
                tools = [{"type": "function", "function": {"name": "get_time", "description": "The time.",
                                                           "parameters": {"type": "object", "properties": {}}}}]
                status, body = post(srv.url, {"model": "stories", "messages": chat["messages"], "tools": tools},
                                    path="/tokenize")
                self.assertEqual(status, 200, body)
                status, plain = post(srv.url, {"model": "stories", "messages": chat["messages"]}, path="/tokenize")
                self.assertGreater(json.loads(body)["count"], json.loads(plain)["count"])
                status, body = post(srv.url, dict(chat, tools=tools), path="/v1/chat/completions")
                self.assertEqual(status, 200, body)
                status, body = post(srv.url, dict(chat, tools=tools, tool_choice="required"),
                                    path="/v1/chat/completions")
                self.assertEqual(status, 400, body)
                self.assertEqual(json.loads(body)["error"]["param"], "tool_choice")
        with Server(TROUPE) as srv:  # the bundled model has no harmony template
            status, body = post(srv.url, dict(chat, reasoning_effort="low"), path="/v1/chat/completions")
            self.assertEqual(status, 400, body)
            self.assertIn("reasoning_effort", json.loads(body)["error"]["message"])

    def test_generate_chat_renders_the_template(self):
        def prompt_tokens(*args):
            out = subprocess.run([TROUPE, "generate", "--json", *args], stdout=subprocess.PIPE,
                                 stderr=subprocess.DEVNULL, text=True, check=True).stdout
            return json.loads(out)["prompt_tokens"]

        # no template: the plain fallback
        self.assertEqual(prompt_tokens("--chat", "-n", "2", "Hi"), prompt_tokens("-n", "1", "User: Hi\nAssistant:"))
        import shutil
        import tempfile

        here = os.path.dirname(os.path.abspath(__file__))
        fixture = json.load(open(os.path.join(here, "..", "fixtures", "jinja_templates.json")))
        qwen = next(t for t in fixture["templates"] if t["name"] == "Qwen-Qwen2.5-7B-Instruct")
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(here, "..", "..", "models", "stories260K-hf")
            for name in os.listdir(src):
                shutil.copy(os.path.join(src, name), d)
            with open(os.path.join(d, "tokenizer_config.json")) as f:
                cfg = json.load(f)
            cfg["chat_template"] = qwen["template"]
            with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
                json.dump(cfg, f)
            # Qwen2.5's template, as transformers renders it, with no BOS added
            user = fixture["contexts"]["system_user"]["messages"]
            self.assertEqual(
                prompt_tokens("-m", d, "--chat", "--system", user[0]["content"], "-n", "2", user[1]["content"]),
                prompt_tokens("-m", d, "--no-bos", "-n", "1", qwen["renders"]["system_user"]["text"]))

    def test_generate_ends_the_text_with_a_newline(self):
        out = subprocess.run([TROUPE, "generate", "-n", "8", "Once upon a time"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, check=True).stdout
        timing = out.rindex("troupe: ")  # the timing line comes last
        self.assertEqual(out[timing - 1], "\n", repr(out))

    def test_kv_memory_without_a_unit_is_a_fraction_or_whole_bytes(self):
        # '2.0' used to mean 2 bytes (and a KV cache of its floor, one context): refused now
        for text, hint in [("2.0", "2"), ("1.5", "1.5"), ("2", "2")]:
            out = subprocess.run([TROUPE, "serve", "--kv-memory", text, "--port", "0"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, timeout=60)
            self.assertNotEqual(out.returncode, 0, out.stdout)
            self.assertIn(f"did you mean {hint}GiB", out.stdout)
        out = subprocess.run([TROUPE, "serve", "--kv-memory", "nan", "--port", "0"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertNotEqual(out.returncode, 0, out.stdout)
        self.assertNotIn("nanGiB", out.stdout)
        for text in ["1GiB", "0.5", "1073741824"]:  # with a unit, a fraction, whole bytes: served
            with Server(TROUPE, "--kv-memory", text) as srv:
                self.assertIn("gateway: serving", srv.log_text())

    def test_context_shortens_what_one_sequence_holds(self):
        # longer than the model's context: refused before serving
        out = subprocess.run([TROUPE, "serve", "--context", "1000000", "--port", "0"], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, timeout=60)
        self.assertNotEqual(out.returncode, 0, out.stdout)
        self.assertIn("context of 1000000 tokens", out.stdout)
        with Server(TROUPE, "--context", "64") as srv:
            status, body = post(srv.url, {"prompt": "Once upon a time"}, path="/tokenize")
            self.assertEqual(status, 200, body)
            self.assertEqual(json.loads(body)["max_model_len"], 64)
            status, body = post(srv.url, {"model": "stories", "prompt": "Once upon a time " * 30, "max_tokens": 4})
            self.assertEqual(status, 400, body)
            self.assertIn("the context holds 64", body)
            status, body = post(srv.url, {"model": "stories", "prompt": "Once upon a time", "max_tokens": 4})
            self.assertEqual(status, 200, body)


if __name__ == "__main__":
    unittest.main(verbosity=2)
