"""lm_eval_test.py: the real lm-evaluation-harness (`lm_eval --model local-completions`)
against `troupe serve` with stories260K-hf, on two local tasks made from the transformers
fixture (tests/fixtures/stories260k_hf.json):

* loglikelihood (multiple_choice): each prompt with three one-token continuations, the first
  transformers' greedy next token. lm_eval scores them with echo + logprobs; every
  loglikelihood must equal transformers' log-softmax at the prompt's last position (within
  1e-3), the greedy one must be is_greedy, and acc must be 1.
* generate_until: each prompt's greedy continuation (max 8 tokens, until "\\n"): lm_eval's
  generated text must be transformers' greedy text.

Exit 77 (ctest: skipped) with the reason when lm_eval could not be installed.
Usage: VENV/bin/python lm_eval_test.py PATH/TO/troupe
"""
import glob
import json
import math
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

from serve_util import Server

TROUPE = sys.argv.pop(1)
ROOT = Path(__file__).resolve().parents[2]
TOKENIZER = ROOT / "models" / "stories260K-hf"
FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "stories260k_hf.json").read_text())
UNTIL = "\n"

if (Path(sys.executable).parent.parent / "UNAVAILABLE").exists():
    print("SKIP: lm_eval is not installed:", (Path(sys.executable).parent.parent / "UNAVAILABLE").read_text())
    sys.exit(77)

from transformers import AutoTokenizer  # noqa: E402  (installed with lm_eval)


def log_softmax(logits, i):
    m = max(logits)
    return logits[i] - m - math.log(sum(math.exp(v - m) for v in logits))


def piece_after(tok, ids, t):
    """The text token t adds after ids (so context + piece encodes as ids + [t])."""
    return tok.decode(ids + [t], skip_special_tokens=True)[len(tok.decode(ids, skip_special_tokens=True)):]


class LmEval(unittest.TestCase):
    def test_loglikelihood_and_generate_until(self):
        tok = AutoTokenizer.from_pretrained(str(TOKENIZER))
        work = Path(tempfile.mkdtemp(prefix="lmeval-"))
        mc, gen, expect_ll, expect_gen = [], [], [], []
        for c in FIXTURE["cases"][:6]:
            ids, greedy, logits = c["prompt_tokens"], c["greedy_tokens"], c["last_logits"]
            others = [t["id"] for t in c["top5"] if t["id"] != greedy[0]][1:3]
            cands = [greedy[0]] + others
            choices = [piece_after(tok, ids, t) for t in cands]
            # lm_eval encodes context + choice and takes what follows the context: it must be t
            whole = [[tok.bos_token_id] + tok.encode(c["text"] + ch, add_special_tokens=False) for ch in choices]
            if any(w[:-1] != ids or w[-1] != t for w, t in zip(whole, cands)):
                continue
            mc.append({"question": c["text"], "choices": choices, "answer": 0})
            expect_ll.append([log_softmax(logits, t) for t in cands])
            text = tok.decode(ids + greedy[:8], skip_special_tokens=True)[len(tok.decode(ids, skip_special_tokens=True)):]
            gen.append({"question": c["text"], "answer": text.split(UNTIL)[0]})
            expect_gen.append(text.split(UNTIL)[0])
        self.assertGreaterEqual(len(mc), 4, "too few fixture prompts tokenize the same way in transformers")
        (work / "mc.jsonl").write_text("".join(json.dumps(d) + "\n" for d in mc))
        (work / "gen.jsonl").write_text("".join(json.dumps(d) + "\n" for d in gen))
        (work / "troupe_mc.yaml").write_text(f"""task: troupe_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {work / 'mc.jsonl'}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: choices
doc_to_target: answer
target_delimiter: ""
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
""")
        (work / "troupe_gen.yaml").write_text(f"""task: troupe_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {work / 'gen.jsonl'}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
target_delimiter: ""
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
  do_sample: false
  temperature: 0.0
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
""")
        with Server(TROUPE, "-m", str(TOKENIZER)) as srv:
            args = ",".join([
                "model=stories", f"base_url={srv.url}/v1/completions", "tokenizer_backend=huggingface",
                f"tokenizer={TOKENIZER}", "tokenized_requests=True", "add_bos_token=True", "num_concurrent=2",
                "max_retries=1", "max_length=512", "timeout=60"])
            env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
            lm_eval = str(Path(sys.executable).parent / "lm_eval")
            run = subprocess.run([lm_eval, "--model", "local-completions", "--model_args", args,
                                  "--include_path", str(work), "--tasks", "troupe_mc,troupe_gen",
                                  "--batch_size", "1", "--output_path", str(work / "out"), "--log_samples"],
                                 env=env, capture_output=True, text=True, timeout=600)
            self.assertEqual(run.returncode, 0, run.stdout[-3000:] + run.stderr[-3000:])
        results = json.loads(Path(glob.glob(str(work / "out" / "**" / "results_*.json"), recursive=True)[0]).read_text())
        self.assertEqual(results["results"]["troupe_mc"]["acc,none"], 1.0, results["results"])
        self.assertEqual(results["results"]["troupe_gen"]["exact_match,none"], 1.0, results["results"])
        samples = {}
        for f in glob.glob(str(work / "out" / "**" / "samples_*.jsonl"), recursive=True):
            task = "mc" if "troupe_mc" in f else "gen"
            samples[task] = [json.loads(line) for line in Path(f).read_text().splitlines()]
        for s in samples["mc"]:
            want = expect_ll[s["doc_id"]]
            for k, resp in enumerate(s["resps"]):
                ll, greedy = resp[0]
                self.assertAlmostEqual(float(ll), want[k], delta=1e-3, msg=f"doc {s['doc_id']} choice {k}")
                if k == 0:
                    self.assertTrue(greedy, f"doc {s['doc_id']}: the greedy token is not greedy")
        for s in samples["gen"]:
            self.assertEqual(s["resps"][0][0], expect_gen[s["doc_id"]], f"doc {s['doc_id']}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
