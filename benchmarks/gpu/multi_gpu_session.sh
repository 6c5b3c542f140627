#!/usr/bin/env bash
# Issue 25 on a two-GPU box (the lent nvidia-h200-x2 kind), one step per device call (each fits the 10-minute
# call limit). Results go to $OUT. Usage on the GPU box: OUT=/some/dir bash benchmarks/gpu/multi_gpu_session.sh STEP...
#   sandbox         tests/agent/engine/sandbox/test_bwrap.py: a job with CUDA_VISIBLE_DEVICES=0 cannot open GPU 1's node (and
#                   the reverse); needs bwrap on PATH or carried as .whl/bwrap (Debian 12's bubblewrap binary)
#   batch[:NAMES]   benchmarks/multi_gpu.py: one gpu worker per GPU on a private Postgres and Redis, the batch with
#                   both workers, then with one (NAMES: comma-separated examples; default four of them)
#   ddp             stage (a) (grpo_single, trainer/presets/h100-small.yaml) under accelerate on one GPU, then DDP on
#                   two (trainer/accelerate/multi-gpu.yaml), with each GPU's memory sampled by nvidia-smi
# On the dev box, before the calls: bash benchmarks/gpu/multi_gpu_session.sh pack
#   writes .whl/services.tar.xz (Debian's Postgres server and redis-server with the libraries they need) and
#   .whl/studio/*.whl (the studio's Python dependencies for the box's Python 3.12, torch and the trainer's stack
#   excluded); `ddp` needs the trainer's .whl/site.tar.xz made as in docs/benchmarks.md section 12.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export KSTUDIO_CACHE_DIR=${KSTUDIO_CACHE_DIR:-/root/kscache}
PY=${PY:-python3}

site() {  # $1: the modules the step needs. The box's own CUDA torch stays.
  export PYTHONPATH=$PWD
  if [ -f .whl/site.tar.xz ] && ! $PY -c 'import trl, datasets' 2>/dev/null; then
    # The trainer's stack (docs/benchmarks.md section 12), into the interpreter's own site-packages (datasets' dill
    # pickles modules outside sys.prefix by value, which fails on pyarrow's types).
    tar -xJf .whl/site.tar.xz -C /tmp && cp -a /tmp/site_box/. "$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"/ || exit 1
  fi
  if ls .whl/studio/*.whl >/dev/null 2>&1 && ! $PY -c 'import django, celery' 2>/dev/null; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/studio/*.whl || exit 1
    export PYTHONPATH=$PWD:/tmp/site
  fi
  $PY -c "import torch, $1; print('torch', torch.__version__, 'and $1 importable')" \
    || { echo "missing on this box: carry .whl (pack step on the dev box; .whl/site.tar.xz as in docs/benchmarks.md section 12)"; exit 1; }
}

services() {  # Postgres server binaries and redis-server: the box's own, else the carried ones
  if command -v redis-server >/dev/null && { command -v pg_ctl >/dev/null || ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; }; then
    return
  fi
  [ -f .whl/services.tar.xz ] || { echo "no Postgres/redis-server here and no .whl/services.tar.xz (pack step)"; exit 1; }
  mkdir -p /tmp/svc && tar -xJf .whl/services.tar.xz -C /tmp/svc || exit 1
  export PATH=/tmp/svc/usr/lib/postgresql/15/bin:/tmp/svc/usr/bin:$PATH LD_LIBRARY_PATH=/tmp/svc/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  chmod -R a+rX /tmp/svc  # initdb runs as an unprivileged user
}

command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=index,name,pci.bus_id,uuid,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
for step in "$@"; do
  echo "== $step $(date +%T)"
  started=$(date +%s)
  case $step in
    pack)
      mkdir -p .whl/studio /tmp/pack/lib
      # Postgres 15 keeps its share/ and lib/ at fixed places relative to bin/: keep the /usr layout.
      libs=$(ldd /usr/lib/postgresql/15/bin/postgres /usr/lib/postgresql/15/bin/initdb "$(readlink -f /usr/bin/redis-server)" \
             | awk '/=>/ {print $3}' | grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv|ld-linux[^/]*)\.so' | sort -u)
      cp -L $libs /tmp/pack/lib/ && cp -L /usr/bin/redis-server /tmp/pack/redis-server || exit 1
      tar -cJf .whl/services.tar.xz --transform 's|^tmp/pack/redis-server|usr/bin/redis-server|;s|^tmp/pack/lib|lib|' \
        /usr/lib/postgresql/15/bin /usr/lib/postgresql/15/lib /usr/share/postgresql/15 /tmp/pack/redis-server /tmp/pack/lib 2>/dev/null
      # The dev venv's distributions as Python 3.12 wheels, but for torch and what the box's torch brings, the trainer's
      # stack (the studio's workers never import it; the ddp step uses .whl/site.tar.xz) and test-only packages.
      TORCH_HAS='numpy|sympy|mpmath|networkx|jinja2|markupsafe|filelock|fsspec|typing.extensions|setuptools'
      TRAINER='pyarrow|pandas|datasets|transformers|trl|accelerate|tokenizers|safetensors|hf.xet|huggingface.hub|multiprocess|dill|xxhash|regex|openai|tzdata'
      DEV='pytest.*|selenium|schemathesis|hypothesis|websockets?|websocket.client|pillow|trio.*|outcome|wsproto|pyrate.limiter|harfile|junit.xml|jsonschema.*|starlette.*|graphql.*|pygments'
      .venv/bin/python -m pip freeze --exclude-editable | grep -viE "^(torch|triton|nvidia-|kernel-studio|$TORCH_HAS|$TRAINER|$DEV)=" > /tmp/pack/reqs.txt
      .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform any \
        -d .whl/studio -r /tmp/pack/reqs.txt || exit 1
      du -sh .whl/services.tar.xz .whl/studio ;;
    sandbox)
      site pytest
      [ -x .whl/bwrap ] && export PATH=$PWD/.whl:$PATH
      $PY -m pytest -p no:cacheprovider -v -rs --timeout 300 tests/agent/engine/sandbox/test_bwrap.py 2>&1 | tee "$OUT/sandbox.txt" | tail -20 ;;
    batch*)
      site django,celery,redis,psycopg,channels; services
      names=${step#batch}; names=${names#:}; names=${names:-swiglu,softmax_rows,layer_norm,relu_scale_bias}
      # Both phases in one call: each phase is cancelled (and recorded as timed out) past 240 s.
      $PY benchmarks/multi_gpu.py --device cuda --only "$names" --max-turns 3 --timeout 240 --out "$OUT/multi_gpu.json" \
        2> "$OUT/multi_gpu.log" | tee "$OUT/multi_gpu.md"
      tail -30 "$OUT/multi_gpu.log" ;;
    ddp)
      site trl,datasets,accelerate,transformers
      mkdir -p /tmp/data
      $PY -m trainer problems /tmp/data/problems.jsonl examples/*.py --device cuda > "$OUT/problems.log" 2>&1 || { tail "$OUT/problems.log"; exit 1; }
      for n in 1 2; do
        if [ $n = 1 ]; then cfg=trainer/accelerate/single-gpu.yaml; gpus=0; else cfg=trainer/accelerate/multi-gpu.yaml; gpus=0,1; fi
        nvidia-smi --query-gpu=timestamp,index,memory.used,utilization.gpu --format=csv,noheader -lms 500 > "$OUT/ddp$n.smi.csv" &
        smi=$!
        t0=$(date +%s)
        CUDA_VISIBLE_DEVICES=$gpus timeout 250 $PY -m accelerate.commands.launch --config_file $cfg --num_processes $n \
          --num_machines 1 -m trainer run --config trainer/presets/h100-small.yaml --data /tmp/data --output "$OUT/ddp$n" \
          > "$OUT/ddp$n.log" 2>&1
        echo "$n GPU(s): exit $? in $(( $(date +%s) - t0 )) s"
        kill $smi
        rm -rf "$OUT/ddp$n/final"  # the weights stay on the box
        cat "$OUT/ddp$n/metrics.jsonl" 2>/dev/null | $PY -c 'import json,sys
for line in sys.stdin:
    r = json.loads(line)
    if "step_seconds" in r: print("step", r.get("step"), "s", round(r["step_seconds"], 2), "peak GB (rank 0)", round(r.get("peak_memory_gb", 0), 2))'
        $PY -c 'import csv,sys,collections
peak = collections.defaultdict(int)
for row in csv.reader(open(sys.argv[1])):
    if len(row) >= 3: peak[row[1].strip()] = max(peak[row[1].strip()], int(row[2].split()[0]))
print("nvidia-smi peak memory used per GPU (MiB):", dict(peak))' "$OUT/ddp$n.smi.csv"
        tail -5 "$OUT/ddp$n.log"
      done ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
  echo "step $step: $(( $(date +%s) - started )) s"
done
