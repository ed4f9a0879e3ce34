"""plan_cli_test.py: `troupe plan` from the command line, as a deployer runs it before
downloading a model: a published config.json alone (Kimi K2, a trillion parameters in FP8),
machines of eight 141 GiB devices. The JSON names a placement that fits and what each device
holds; the text form says the command that serves it; a device too small for any placement
tried is exit 3 with the reason; bad arguments are exit 2 with an error; a target of absurd
size does not fit (no wraparound).
The sizes themselves are checked against the executor in tests/exec/memory_plan_test.cpp.

    python3 plan_cli_test.py path/to/troupe
"""
import json
import os
import subprocess
import sys

TROUPE = sys.argv[1]
HERE = os.path.dirname(os.path.abspath(__file__))
KIMI = os.path.join(HERE, "..", "fixtures", "configs", "kimi-k2")


def plan(*args):
    return subprocess.run([TROUPE, "plan", "-m", KIMI, *args], capture_output=True, text=True,
                          timeout=120)


def main():
    r = plan("--devices", "8x141GiB", "--machines", "2", "--context", "32768", "--kv-dtype",
             "bf16", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["sized_from"] == "config", j["sized_from"]
    assert 1.0e12 < j["parameters"] < 1.05e12, j["parameters"]
    chosen = [c for c in j["candidates"] if c["placement"] == j["chosen"]]
    assert len(chosen) == 1 and chosen[0]["fits"], j["chosen"]
    c = chosen[0]
    usable = j["devices"]["usable_bytes"]
    # every device of the choice holds its weights, arena and the target's KV within its budget
    for s in c["shards"]:
        need = s["weight_bytes"] + s["arena_bytes"] + s["kv_bytes_per_token"] * 32768
        assert need <= usable, (s, usable)
    # a trillion FP8 parameters do not fit on fewer than 8 devices of 127 GiB usable
    assert c["devices"] >= 8, c["devices"]
    # every candidate tried with fewer devices was too small
    assert all(not k["fits"] for k in j["candidates"] if k["devices"] < c["devices"])

    r = plan("--devices", "8x141GiB", "--machines", "2", "--context", "32768")
    assert r.returncode == 0, r.stderr
    assert "<- chosen" in r.stdout and "troupe serve" in r.stdout, r.stdout

    r = plan("--devices", "2x80GiB")
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    assert "no placement" in r.stdout, r.stdout

    for bad in (["--devices", "8x"], ["--devices", "80"], ["--devices", "0x80GiB"],
                ["--devices", "8x0x10GiB"], ["--devices", "8x80GiB", "--kv-dtype", "q8_0"],
                ["--devices", "8x80GiB", "--usable", "nan"],
                ["--devices", "8x80GiB", "--context", "0"], ["--devices", "8x80GiB", "--tp", "0"],
                ["--devices", "8x80GiB", "--step-rows", "-1"], ["--devices", "8x80GiB", "--bogus"]):
        r = plan(*bad)
        assert r.returncode == 2, (bad, r.returncode, r.stdout)
        assert r.stderr.strip(), bad
    # 2^40 tokens of context for 2^30 sequences: saturates, does not fit
    r = plan("--devices", "8x80GiB", "--context", str(1 << 40), "--seqs", str(1 << 30), "--json")
    assert r.returncode == 3, (r.returncode, r.stdout, r.stderr)
    j = json.loads(r.stdout)
    assert all(not c["fits"] and c["most_bytes"] > 0 for c in j["candidates"]), r.stdout
    # far too small devices: said at once, without trying thousands of placements
    r = plan("--devices", "8x1MiB", "--machines", "100000")
    assert r.returncode == 3 and "at least" in r.stdout, (r.returncode, r.stdout)
    print("plan cli: ok")


if __name__ == "__main__":
    main()
