#!/usr/bin/env bash
# Issue 7 on the GPU box: stage (a), single-turn GRPO, for a few steps on a small random Qwen2 built from a
# config (trainer/presets/h100-small.yaml). The box has no trl/datasets and an older transformers than we pin: carry
# their wheels in .whl/, or one .whl/site.tar.xz of them unpacked into site_box/ (made on the dev box, see docs/benchmarks.md §12).
# Usage on the GPU box: bash benchmarks/gpu/trainer_stage_a.sh
set -u
OUT=${OUT:-/tmp/out}
if [ -f .whl/site.tar.xz ]; then
  # The wheels unpacked here and packed with xz (pyarrow and transformers as wheels are over the 64 MiB a call carries).
  # They go into the interpreter's own site-packages, replacing older copies: datasets fingerprints a table
  # with dill, which pickles by value (and fails on pyarrow's types) any module outside sys.prefix, such as
  # one found through PYTHONPATH.
  tar -xJf .whl/site.tar.xz -C /tmp || exit 1
  SP=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  for pkg in $(ls /tmp/site_box | sed -E 's/-[0-9].*\.dist-info$//' | sort -u); do rm -rf "$SP/$pkg" "$SP/$pkg"-*.dist-info; done
  cp -a /tmp/site_box/. "$SP"/ || exit 1
  export PYTHONPATH=$PWD
elif ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export KSTUDIO_CACHE_DIR=/root/kscache
python3 -c 'import torch, transformers, trl, datasets, pandas; print("torch", torch.__version__, "transformers", transformers.__version__, "trl", trl.__version__, "datasets", datasets.__version__)' || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /tmp/data
python3 -m trainer problems /tmp/data/problems.jsonl examples/*.py --device cuda || exit 1
start=$(date +%s)
python3 -m trainer run --config trainer/presets/h100-small.yaml --data /tmp/data --output $OUT/stage_a > $OUT/stage_a.log 2>&1
echo "trainer exit $? in $(( $(date +%s) - start )) s"
tail -25 $OUT/stage_a.log
cat $OUT/stage_a/metrics.jsonl 2>/dev/null | head -20
rm -rf $OUT/stage_a/final  # the weights stay on the box
