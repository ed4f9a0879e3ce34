#!/usr/bin/env bash
# slim_tree.sh: the device call sends the working tree (tracked files included) and refuses one
# over 64 MiB; the repository's tracked files are ~63 MiB, most of them test fixtures the GPU
# check never reads. `on` takes those out of the index (the files stay on disk, ignored through
# .git/info/exclude) so the call fits; `off` puts them back. Nothing is committed either way.
#   bash bench/gpu/slim_tree.sh on      # before the device call (bench/gpu/check.sh)
#   bash bench/gpu/slim_tree.sh off     # after it, before any commit
set -euo pipefail
cd "$(dirname "$0")/../.."
paths=(tests/fixtures/gguf tests/fixtures/llama_kquant tests/fixtures/jinja_templates.json
  bench/results)
mark="# slim_tree.sh"
case "${1:-}" in
on)
  git rm -r --cached -q "${paths[@]}"
  for p in "${paths[@]}"; do echo "/$p $mark" >>.git/info/exclude; done
  ;;
off)
  git reset -q -- "${paths[@]}"
  grep -v "$mark" .git/info/exclude >.git/info/exclude.tmp || true
  mv .git/info/exclude.tmp .git/info/exclude
  ;;
*)
  echo "usage: slim_tree.sh on|off" >&2
  exit 2
  ;;
esac
git ls-files -z | xargs -0 stat -c %s | awk '{s += $1} END {printf "tracked: %.1f MiB\n", s / 1048576}'
