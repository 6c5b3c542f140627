#!/usr/bin/env bash
# The KernelBench sweep (benchmarks/kernelbench_sweep.py, docs/benchmarks.md §16) on a lent GPU box that has torch but
# no network, no Django, no Postgres, no Redis: the studio's missing packages come as wheels (.whl, built on the dev
# box), and the studio runs embedded (`manage.py serve`: SQLite, the in-process worker) with everything it keeps in
# SWEEP_DIR, which is carried to the box and back so that a sweep longer than one device call goes on where it stopped.
#
#   bash benchmarks/gpu/kernelbench_sweep.sh      # from the repository root; carry .whl, .kb and var/sweep
#
# On a fresh box the sweep goes on from the state kept in the repository: mkdir -p var/sweep && cp
# benchmarks/results/kernelbench_sweep/{sweep.jsonl,sweep_report.json} var/sweep/ (the levels are imported again;
# a problem whose run this studio does not have is submitted again). Copy them back when a call returns.
#
# KB: KernelBench's KernelBench/ folder (level1/ ...) or a whole checkout (default .kb). LEVELS (default "1 2 3"),
# LIMIT (at most this many problems a level), PARALLEL (evaluations queued at once, 2), POLL (seconds, 5), PORT (8000).
# SECONDS: this call's wall-clock budget (default 540, so that a 600 s device call returns): imports and the sweep stop
# in time, their state kept, and the next call resumes. PY (default python3), SITE (where the wheels go, default
# /tmp/kstudio-site; skipped when installed already), SKIP_WHEELS=1 (the interpreter has the studio's packages).
BUDGET=$SECONDS  # bash's SECONDS: the value given in the environment, or 0 when none was given
[ "$BUDGET" -gt 0 ] || BUDGET=540
SECONDS=0  # from here on: seconds since this script started
set -u
PY=${PY:-python3}
KB=${KB:-.kb}
SWEEP_DIR=${SWEEP_DIR:-var/sweep}
SITE=${SITE:-/tmp/kstudio-site}
LEVELS=${LEVELS:-1 2 3}
LIMIT=${LIMIT:-}
PARALLEL=${PARALLEL:-2}
POLL=${POLL:-5}
PORT=${PORT:-8000}
RESERVE=${RESERVE:-30}    # seconds kept at the end: the sweep's exit (10 s at most), stopping the studio, the report
SWEEP_MIN=${SWEEP_MIN:-60}  # the studio is not started for a sweep shorter than this (it takes ~5-20 s to start)

say() { echo "[sweep $(date +%T) +${SECONDS}s] $*"; }
left() { echo $((BUDGET - SECONDS)); }
die() { say "FAILED: $*"; exit 1; }

[ -f manage.py ] || die "run this from the repository root (manage.py not found in $PWD)"
[ -d "$KB" ] || die "no KernelBench at $KB: carry KernelBench's KernelBench/ folder (level1/, level2/, level3/) as .kb"
mkdir -p "$SWEEP_DIR"
SWEEP_DIR=$(cd "$SWEEP_DIR" && pwd)
say "budget ${BUDGET} s; KernelBench $KB; levels $LEVELS${LIMIT:+, at most $LIMIT a level}; studio state in $SWEEP_DIR"

# --- the studio's packages the box lacks, from the carried wheelhouse ------------------------------------------------
if [ "${SKIP_WHEELS:-0}" = 1 ]; then
  say "SKIP_WHEELS=1: using $PY's own packages"
else
  . benchmarks/gpu/box_site.sh
  install_box_site || die "the wheels in .whl could not be installed (above)"
fi
# What the studio imports on this path: the wheels' packages, and those .whl leaves to the box (torch, numpy, httpx,
# psutil, filelock, tqdm, PyYAML: preinstalled there with transformers, accelerate and huggingface_hub).
missing=$($PY -c "
import importlib.util
names = ('django channels daphne celery environ whitenoise axes rest_framework drf_spectacular drf_spectacular_sidecar '
         'rank_bm25 httpx psutil filelock tqdm yaml numpy torch')
print(' '.join(n for n in names.split() if importlib.util.find_spec(n) is None))")
[ -z "$missing" ] || die "$PY cannot import: $missing (torch, numpy, httpx, psutil, filelock, tqdm and PyYAML are the" \
  "box's own; the rest comes from .whl: docs/benchmarks.md §16)"
say "the studio's packages import"

# --- the embedded studio on SQLite in SWEEP_DIR -----------------------------------------------------------------------
# No DATABASE_URL or REDIS_URL: studio/settings.py then runs embedded (SQLite at SQLITE_PATH, the in-memory broker, the
# worker as threads of `manage.py serve`).
unset DATABASE_URL REDIS_URL
export SQLITE_PATH="$SWEEP_DIR/studio.sqlite3"
export KSTUDIO_DEVICE=${KSTUDIO_DEVICE:-cuda}
# The problems' own PyTorch code as their candidates: for this sanity sweep only (studio/settings.py).
export KSTUDIO_EVAL_ALLOW_ANY_TORCH_OP=1
# One worker thread: one evaluation on the device at a time (each plans with the whole GPU's memory); the sweep keeps
# PARALLEL runs queued so that the next starts at once.
export KSTUDIO_EMBEDDED_WORKER_THREADS=${KSTUDIO_EMBEDDED_WORKER_THREADS:-1}
# A step the previous call's studio was stopped in the middle of is taken over this long after it was claimed
# (apps/runs/steps.py; the default, 30 min, is for a worker that may still be alive). Here each step is queued once
# (`serve` queues the unfinished ones again as it starts), so a step still claimed is always a dead worker's.
export KSTUDIO_STEP_LEASE_SECONDS=${KSTUDIO_STEP_LEASE_SECONDS:-120}
export API_THROTTLE_USER=${API_THROTTLE_USER:-100000/hour}  # the sweep polls every run it waits on
export TQDM_MININTERVAL=${TQDM_MININTERVAL:-30}  # the import's progress bar: a line every 30 s, not every file
say "studio: embedded, SQLite $SQLITE_PATH, KSTUDIO_DEVICE=$KSTUDIO_DEVICE, KSTUDIO_EVAL_ALLOW_ANY_TORCH_OP=1"

# --- the database, the sweep's user and its token ---------------------------------------------------------------------
say "migrating the database (log: $SWEEP_DIR/manage.log)"
$PY manage.py migrate --noinput -v0 >> "$SWEEP_DIR/manage.log" 2>&1 \
  || { tail -n 20 "$SWEEP_DIR/manage.log"; die "manage.py migrate failed (its log's end is above)"; }
KSTUDIO_TOKEN=$($PY manage.py shell -v0 -c "
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
user, made = get_user_model().objects.get_or_create(username='sweep')
if made:
    user.set_unusable_password()
    user.save()
print(Token.objects.get_or_create(user=user)[0].key)" 2>> "$SWEEP_DIR/manage.log" | tail -n 1)
[ -n "$KSTUDIO_TOKEN" ] \
  || { tail -n 20 "$SWEEP_DIR/manage.log"; die "could not make the user sweep and its API token"; }
export KSTUDIO_TOKEN  # the sweep reads it from the environment, not from its command line
say "user sweep and its API token ready"

SERVER_PGID=""
stop_studio() {
  [ -n "$SERVER_PGID" ] || return 0
  # SIGKILL to the whole group, as a crashed worker: its sandbox's zygote is in the group, and a gentler signal that
  # reached the zygote first would have the still-running worker thread fail the evaluation in hand ("the sandbox
  # zygote died"). Killed outright, a run keeps its claim and the next call's studio takes it over (the lease above).
  say "stopping the studio (process group $SERVER_PGID; runs in flight keep their claims)"
  kill -KILL -- "-$SERVER_PGID" 2>/dev/null
  for _ in $(seq 20); do kill -0 -- "-$SERVER_PGID" 2>/dev/null || break; sleep 1; done
  SERVER_PGID=""
  say "studio stopped"
}
trap stop_studio EXIT
trap 'say "interrupted"; exit 130' INT TERM

# --- a sweep that goes on imports and sweeps only the problems the state has no end for ---------------------------------
# A fresh box has no studio database: without this it would import every file again (about 6 min for the 250) only to
# skip the ones with a verdict. PENDING_ONLY=0 imports every file; a LIMIT (a dry run) always does.
if [ "${PENDING_ONLY:-1}" = 1 ] && [ -z "$LIMIT" ] && [ -s "$SWEEP_DIR/sweep.jsonl" ]; then
  rm -rf "$SWEEP_DIR/pending"
  count=$($PY benchmarks/kernelbench_sweep.py pending "$KB" "$SWEEP_DIR/sweep.jsonl" "$SWEEP_DIR/pending" $LEVELS) \
    || die "could not list the problems without an end in $SWEEP_DIR/sweep.jsonl"
  say "$count problems of levels $LEVELS have no end in the state yet: only those are imported and swept" \
      "($SWEEP_DIR/pending links to them)"
  KB="$SWEEP_DIR/pending"
fi

# --- the problems: one import per level, each marked done in SWEEP_DIR so that later calls skip it --------------------
import_seconds=0
imported=yes
for level in $LEVELS; do
  marker="$SWEEP_DIR/imported_level$level"
  if [ "$(cat "$marker" 2>/dev/null)" = "limit=${LIMIT:-all}" ]; then
    say "level $level imported already ($marker)"
    continue
  fi
  if ! compgen -G "$KB/level$level/*.py" >/dev/null && ! compgen -G "$KB/KernelBench/level$level/*.py" >/dev/null; then
    say "level $level: nothing to import"
    echo "limit=${LIMIT:-all}" > "$marker"
    continue
  fi
  allowed=$(( $(left) - RESERVE - SWEEP_MIN - 15 ))  # 15: an interrupted import's own exit (10 s at most, then killed)
  if [ "$allowed" -lt 30 ]; then
    say "no time left to import level $level this call: the next call goes on"
    imported=no
    break
  fi
  say "importing level $level with manage.py import_kernelbench (each file checked like an upload;" \
      "at most ${allowed} s; log: $SWEEP_DIR/import_level$level.log)"
  start=$SECONDS
  timeout -s INT -k 10 "$allowed" $PY manage.py import_kernelbench "$KB" --owner sweep --level "$level" \
      ${LIMIT:+--limit "$LIMIT"} >> "$SWEEP_DIR/import_level$level.log" 2>&1
  rc=$?
  import_seconds=$((import_seconds + SECONDS - start))
  if [ $rc = 0 ]; then
    echo "limit=${LIMIT:-all}" > "$marker"
    log="$SWEEP_DIR/import_level$level.log"
    say "level $level: $(tail -n 1 "$log") ($(grep -c '^skipped ' "$log") skip lines in the log, with their reasons)"
  elif [ $rc = 124 ] || [ $rc = 137 ]; then
    say "level $level: the import stopped at its time budget after $((SECONDS - start)) s; files imported so far are" \
        "kept (the next call skips them and goes on)"
    imported=no
    break
  else
    tail -n 20 "$SWEEP_DIR/import_level$level.log"
    die "manage.py import_kernelbench failed for level $level (exit $rc; the log's end is above)"
  fi
done

# --- the studio and the sweep -----------------------------------------------------------------------------------------
sweep_seconds=0
sweep_rc=skipped
if [ $(( $(left) - RESERVE )) -lt "$SWEEP_MIN" ]; then
  say "not enough time left to start the studio and sweep this call ($(left) s): the next call goes on"
else
  say "starting the studio: manage.py serve on 127.0.0.1:$PORT (log: $SWEEP_DIR/server.log)"
  # `serve` queues the runs an earlier call left unfinished again as it starts (its in-memory broker starts empty).
  setsid $PY manage.py serve --host 127.0.0.1 --port "$PORT" > "$SWEEP_DIR/server.log" 2>&1 &
  SERVER_PGID=$!  # setsid's process leads its own group, which stop_studio stops (the sandbox's die with it)
  disown
  url="http://127.0.0.1:$PORT"
  # Up: the worker has reached the broker (its log says so) and the web side answers.
  until grep -q "^Connected to memory://" "$SWEEP_DIR/server.log" && $PY -c "
import sys, urllib.error, urllib.request
try:
    urllib.request.urlopen(sys.argv[1] + '/api/v1/', timeout=2)
except urllib.error.HTTPError:
    pass  # 401/403: it answers
except OSError:
    sys.exit(1)" "$url" 2>/dev/null; do
    if ! kill -0 "$SERVER_PGID" 2>/dev/null; then
      SERVER_PGID=""
      tail -n 30 "$SWEEP_DIR/server.log"
      die "the studio exited before it answered (its log's end is above)"
    fi
    [ $(( $(left) - RESERVE )) -gt 30 ] || die "the studio did not answer on $url in time (see $SWEEP_DIR/server.log)"
    sleep 1
  done
  say "the studio answers on $url; sweeping (at most $(( $(left) - RESERVE )) s; log: $SWEEP_DIR/sweep.log)"
  start=$SECONDS
  timeout -s INT -k 10 $(( $(left) - RESERVE )) $PY benchmarks/kernelbench_sweep.py --kernelbench "$KB" --url "$url" \
      --owner sweep --levels $LEVELS ${LIMIT:+--limit "$LIMIT"} --skip-import --parallel "$PARALLEL" --poll "$POLL" \
      --allow-any-op-sanity --state "$SWEEP_DIR/sweep.jsonl" --report "$SWEEP_DIR/sweep_report.json" \
      --import-log "$SWEEP_DIR"/import_level*.log 2>&1 \
      | tee -a "$SWEEP_DIR/sweep.log"
  sweep_rc=${PIPESTATUS[0]}
  sweep_seconds=$((SECONDS - start))
  case $sweep_rc in
    0) say "the sweep finished its pass in ${sweep_seconds} s" ;;
    124|137) say "the sweep stopped at its time budget after ${sweep_seconds} s: runs in flight resume next call" ;;
    *) say "the sweep failed (exit $sweep_rc, above); its state is kept" ;;
  esac
  stop_studio
fi

# --- the report's counts (written here from the state when the sweep did not finish its pass) -------------------------
say "the report: $SWEEP_DIR/sweep_report.json"
$PY - "$SWEEP_DIR" "$sweep_rc" "$sweep_seconds" "$imported" $LEVELS <<'PY'
import json, sys
from pathlib import Path

from benchmarks.kernelbench_sweep import load_state, report

folder, sweep_rc, seconds, imported, levels = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]), sys.argv[4], \
    [int(n) for n in sys.argv[5:]]
state, path = load_state(folder / "sweep.jsonl"), folder / "sweep_report.json"
if sweep_rc != "0":  # the sweep writes it at the end of a pass; a pass stopped early (or not run) is written here
    previous = float(json.loads(path.read_text()).get("sweep_seconds", 0.0)) if path.exists() else 0.0
    path.write_text(json.dumps(report(state, levels, previous + seconds), indent=2))
result = json.loads(path.read_text())
for level, counts in result["levels"].items():
    print(f"{level}: {counts['problems']} problems with a verdict, {counts['evaluated']} evaluated, "
          f"{counts['capacity']} capacity, {counts['other']} other")
    near = counts["vs_eager"]
    if near["geomean"]:
        print(f"    vs eager (the same code): geometric mean {near['geomean']:.3f}x, {near['inside']} inside "
              f"{near['band'][0]}-{near['band'][1]}x; outside: "
              + (", ".join(f"{n} {o['speedup']:.2f}x {'/'.join(o['flags'])}".rstrip() for n, o in near["outside"].items())
                 or "none"))
ended = ("finished", "failed", "cancelled")
in_flight = sorted(r["name"] for r in state.values() if r.get("run_id") and "status" not in r
                   and r.get("run_status") not in ended)
print(f"in flight (resumed by the next call's studio): {len(in_flight)}"
      + (f": {', '.join(in_flight)}" if in_flight else ""))
# A run that ended before its verification (a failure inside the studio) has no status: report() counts it as other.
unjudged = {r["name"]: f"{r['run_status']}: {(r.get('run_message') or '')[:200]}" for r in state.values()
            if "status" not in r and r.get("run_status") in ended}
print(f"runs that ended without a verdict (among the other above): {len(unjudged)}")
for name, why in sorted(unjudged.items()):
    print(f"    {name}: {why}")
print(f"sweep wall time so far: {result['sweep_seconds']:.0f} s (this call's imports not counted)")
if sweep_rc == "0" and imported == "yes" and not in_flight:
    print("the sweep is complete for these levels"
          + (f" ({len(unjudged)} without a verdict, above)" if unjudged else ""))
else:
    print("the sweep is not complete: run this again with the same SWEEP_DIR carried")
PY
echo "$(date -u +%FT%TZ) budget=$BUDGET import_s=$import_seconds sweep_s=$sweep_seconds sweep_rc=$sweep_rc" \
  "imported=$imported" >> "$SWEEP_DIR/calls.log"
say "done in ${SECONDS} s"
