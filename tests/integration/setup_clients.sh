#!/usr/bin/env bash
# setup_clients.sh VENV_DIR KIND: makes a venv with a real client the integration tests run
# against `troupe serve`, from PyPI: KIND lm_eval (lm-evaluation-harness without torch: the
# package with the dependencies its API models and our two local tasks import) or aiperf.
# Safe to run twice. When PyPI cannot be reached or an install fails, writes the reason to
# VENV_DIR/UNAVAILABLE and exits 0: the test then skips with that reason instead of failing.
set -uo pipefail
venv=$1
kind=$2
mark="$venv/UNAVAILABLE"
if [ -f "$venv/READY" ]; then exit 0; fi
rm -rf "$venv"
python3 -m venv "$venv" || { mkdir -p "$venv"; echo "python3 -m venv failed" > "$mark"; exit 0; }
pip=("$venv/bin/pip" install -q --disable-pip-version-check)
case "$kind" in
lm_eval)
  # lm_eval 0.4.13's plain install pulls evaluate, scikit-learn, nltk ...; local-completions and
  # our tasks need only these (sacrebleu is imported at start-up by lm_eval.api.metrics)
  "${pip[@]}" --no-deps "lm_eval==0.4.13" > "$venv/install.log" 2>&1 &&
    "${pip[@]}" datasets transformers jinja2 pyyaml numpy sqlitedict dill more_itertools \
      typing_extensions tqdm pytablewriter word2number requests aiohttp tenacity sacrebleu \
      >> "$venv/install.log" 2>&1
  ;;
aiperf)
  "${pip[@]}" "aiperf==0.13.0" > "$venv/install.log" 2>&1
  ;;
*)
  echo "unknown client kind $kind" > "$mark"
  exit 0
  ;;
esac
if [ $? -ne 0 ]; then
  { echo "pip install of $kind failed (PyPI unreachable?):"; tail -5 "$venv/install.log"; } > "$mark"
  exit 0
fi
touch "$venv/READY"
