"""serve_util.py: start `troupe serve` on a free port for a test, and stop it (SIGTERM).

The server prints "serving MODEL on http://HOST:PORT" to stderr once it is ready.
"""
import os
import re
import signal
import subprocess
import threading
import time


class Server:
    def __init__(self, troupe, *args, timeout=120, ulimit_files=None, env=None):
        cmd = [troupe, "serve", "--port", "0", "--served-model-name", "stories", *args]
        if ulimit_files is not None:  # soft and hard open-file limits; hard None: unchanged
            soft, hard = ulimit_files
            limit = f"ulimit -Sn {soft}" + (f" && ulimit -Hn {hard}" if hard else "")
            cmd = ["bash", "-c", limit + ' && exec "$@"', "troupe"] + cmd
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
        self.log = []
        deadline = time.time() + timeout
        self.port = None
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                if self.proc.poll() is not None:
                    raise RuntimeError("troupe serve exited: " + "".join(self.log))
                continue
            self.log.append(line)
            m = re.search(r"on http://[^:]+:(\d+)", line)
            if m and "serving" in line:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.stop()
            raise RuntimeError("troupe serve did not start: " + "".join(self.log))
        self.url = f"http://127.0.0.1:{self.port}"
        # keep reading stderr so the server never blocks on a full pipe; tests read self.log
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def log_text(self):
        if self.proc.poll() is not None:
            self._reader.join(timeout=10)  # the server has exited: read its last lines too
        return "".join(self.log)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                rc = -9
            return rc
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def run_streams(url, prompts, max_tokens=24, on_token=None):
    """Every prompt as its own greedy streaming completion at once (one thread each, the
    `openai` client); returns ([(text, finish_reason)], [errors]). on_token() runs per chunk."""
    import openai  # only the tests that stream need the client

    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0, timeout=300)
    texts = [None] * len(prompts)
    errors = []

    def one(i):
        try:
            stream = client.completions.create(model="stories", prompt=prompts[i], max_tokens=max_tokens,
                                               temperature=0, stream=True, extra_body={"ignore_eos": True})
            text, finish = "", None
            for chunk in stream:
                text += chunk.choices[0].text
                finish = chunk.choices[0].finish_reason or finish
                if on_token:
                    on_token()
            texts[i] = (text, finish)
        except Exception as e:  # noqa: BLE001 - reported to the caller
            errors.append(f"{i}: {e!r}")

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return texts, errors


def metric(text, name):
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None
