# record_lib.sh: what tests/gpu/record_vllm.sh and tests/gpu/record_sglang.sh share on the GPU machine (sourced, not run):
# the budget and the step log, packing what comes back, the payload's unpacking, and around each server: the arrival time
# of every log line (TAG-serve.arrivals: "EPOCH_S<TAB>line"), the cockpit's own watch one look a second
# (tests/gpu/watch_real_server.py -> TAG-watch.jsonl), waiting for /health and stopping a server's whole session.
# Before sourcing: P (the carried payload folder), ENGINE (vllm or sglang); after it, each script defines serve().
set -u
REPO=$(pwd)
OUT=${OUT:-/tmp/out}; R=/tmp/rec; S=/tmp/site; M=/tmp/m
BUDGET=${BUDGET:-540}                         # seconds the script may use in all
PORT=8000
# A fresh /tmp/rec each time: a warm machine keeps the last recording's, and its markers (TAG.done) ended the next one's
# arrival capture at once (empty *.arrivals) while the watch and the traffic appended to its files.
rm -rf "$R"; mkdir -p "$OUT" "$R"; T0=$(date +%s)
el() { echo $(( $(date +%s) - T0 )); }
say() { echo "[t+$(el)s] $*" | tee -a "$R/steps.log"; }
left() { echo $(( BUDGET - $(el) )); }
want() { [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $1 "* ]]; }  # ONLY="E C": just those scenarios

finish() {  # finish [EXIT] : the summary, the logs and one archive into $OUT
  say "packing"
  grep -h -E "${SUMMARY_RE:-Error|Traceback}" "$R"/*-serve.log 2>/dev/null | cut -c1-300 | head -80 > "$R/summary.txt"
  cp "$R/steps.log" "$R/summary.txt" "$OUT/" 2>/dev/null; cat "$R/summary.txt"
  [ -f "$R/A-serve.log" ] && head -c 15000000 "$R/A-serve.log" > "$OUT/A-serve.log"
  sleep 2; cat "$R"/*-watch.jsonl > "$OUT/watch.jsonl" 2>/dev/null
  tar -C /tmp -czf "$OUT/$ENGINE-eagle3-rec.tar.gz" rec 2>/dev/null
  ls -la "$OUT"; exit "${1:-0}"
}

unxz() { xz -dc "$1" 2>/dev/null || python3 -c "import lzma,shutil,sys;shutil.copyfileobj(lzma.open(sys.argv[1]),sys.stdout.buffer)" "$1"; }

unpack() {  # unpack : the payload's checksums, then its site-py.tar.xz into $S (kept on a warm machine that has it)
  say "verify payload"; (cd "$P" && sha256sum -c --quiet MANIFEST.sha256) || { say "payload checksum FAILED"; finish 3; }
  MH=$(sha256sum "$P/MANIFEST.sha256" | cut -c1-16)
  if [ "$(cat "$S/.complete" 2>/dev/null)" != "$MH" ]; then
    rm -rf "$S"; mkdir -p "$S"
    unxz "$P/site-py.tar.xz" | tar -x -C "$S" || { say "untar failed"; finish 4; }
    UNPACKED=1
  else
    UNPACKED=0
  fi
}
unpacked() { echo "$MH" > "$S/.complete"; say "unpacked: $(du -sh $S | cut -f1)"; }

record_env() {  # record_env : the machine and the versions, into env.txt
  { nvidia-smi; df -h /tmp /dev/shm; python3 -c "import sys,torch,transformers,triton;print(sys.version);print('torch',torch.__version__,'cuda',torch.version.cuda,'transformers',transformers.__version__,'triton',triton.__version__)"
    python3 -m pip list --format=freeze 2>/dev/null || uv pip list 2>/dev/null; } > "$R/env.txt" 2>&1
}

follow() {  # follow TAG PID : each line's arrival time, and the cockpit's own watch, until $R/TAG.done and the server is gone
  local tag=$1 pid=$2
  setsid python3 -c '
import sys, time, os
path, out = sys.argv[1], open(sys.argv[2], "w")
done = sys.argv[3]
while not os.path.exists(path): time.sleep(0.05)
f = open(path, "rb"); buf = b""; idle = 0
while idle < 40 or not os.path.exists(done):  # until its scenario is done: a start-up compiles for minutes
    chunk = f.read(65536)
    if not chunk:
        idle += 1; time.sleep(0.05); continue
    idle = 0; buf += chunk
    while b"\n" in buf:
        line, buf = buf.split(b"\n", 1)
        out.write("%.3f\t%s\n" % (time.time(), line.decode("utf-8", "replace"))); out.flush()
' "$R/$tag-serve.log" "$R/$tag-serve.arrivals" "$R/$tag.done" < /dev/null > /dev/null 2>&1 &
  setsid python3 "$REPO/tests/gpu/watch_real_server.py" --engine "$ENGINE" --log "$R/$tag-serve.log" \
     --url http://127.0.0.1:$PORT --pid "$pid" --out "$R/$tag-watch.jsonl" --until-file "$R/$tag.done" \
     --stopped-file "$R/$tag.stopped.json" --seconds 420 < /dev/null > "$R/$tag-watch.err" 2>&1 &
}
wait_ready() {  # wait_ready PID SECONDS -> 0 when /health answers 200, 1 on exit or timeout
  local pid=$1 lim=$2 t=0
  while [ $t -lt "$lim" ]; do
    kill -0 "$pid" 2>/dev/null || return 1
    python3 -c "import urllib.request,sys;sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$PORT/health',timeout=2).status==200 else 1)" 2>/dev/null && return 0
    sleep 1; t=$((t+1))
  done; return 1
}
stop() {  # stop PID SIGNAL SECONDS : signal the server's whole session, wait, then SIGKILL it
  local pid=$1 sig=$2 lim=$3 t=0
  kill -"$sig" -- -"$pid" 2>/dev/null
  while kill -0 "$pid" 2>/dev/null && [ $t -lt "$lim" ]; do sleep 1; t=$((t+1)); done
  kill -KILL -- -"$pid" 2>/dev/null; sleep 1
}
stop_as_the_cockpit() {  # stop_as_the_cockpit TAG PID : as `cockpit plan stop` does: its record first, then SIGINT
  local tag=$1 pid=$2 t=0
  printf '{"at": %s, "by": "you", "pids": [%s], "signal": "SIGINT"}' "$(date +%s.%N)" "$pid" > "$R/$tag.stopped.json"
  kill -INT -- -"$pid"; while kill -0 "$pid" 2>/dev/null && [ $t -lt 30 ]; do sleep 1; t=$((t+1)); done
}

# ---- the scenarios both engines record (each engine's script defines serve() and ENGINE_PROC first) ----------------------
scenario_a() {  # A: cold start, traffic, idle, then SIGKILL of the engine's own process (ENGINE_PROC: its name among the
                # server's children, grep -i), what the requests in flight and the server say after
  want A || return 0
  say "A: cold start"; PA=$(serve A)
  local lim=$(( $(left) - 120 )); [ $lim -gt 300 ] && lim=300
  if wait_ready "$PA" $lim; then
    say "A: ready"; ps -o pid,ppid,args --ppid "$PA" > "$R/A-children.txt" 2>&1
    nvidia-smi > "$R/A-smi-ready.txt" 2>&1
    python3 "$P/kit/traffic.py" --out "$R/A" --seconds 25 > "$R/A-traffic.log" 2>&1
    nvidia-smi > "$R/A-smi-after-traffic.txt" 2>&1
    say "A: traffic done"; sleep 14; say "A: idle 14 s after the traffic's settle"
    local ec; ec=$(ps -o pid=,args= --ppid "$PA" | grep -i -- "$ENGINE_PROC" | awk '{print $1}' | head -1)
    say "A: SIGKILL $ENGINE_PROC pid=${ec:-none}"; date +%s.%N > "$R/A.killed_at"; [ -n "$ec" ] && kill -KILL "$ec"
    sleep 3; python3 "$P/kit/traffic.py" --out "$R/A-after-crash" --seconds 2 --workers 1 --settle 0 > /dev/null 2>&1
    stop "$PA" TERM 15
  else
    say "A: server did not become ready"; stop "$PA" TERM 5
  fi
  touch "$R/A.done"; say "A: done"
}
scenario_b() {  # B: warm start (the compile cache), traffic, stopped as `cockpit plan stop` stops it
  want B && [ "$(left)" -gt 150 ] || return 0
  say "B: warm start"; PB=$(serve B)
  if wait_ready "$PB" $(( $(left) - 60 )); then
    say "B: ready"; python3 "$P/kit/traffic.py" --out "$R/B" --seconds 6 --workers 2 --settle 0 > /dev/null 2>&1
    sleep 3; stop_as_the_cockpit B "$PB"
  fi
  stop "$PB" TERM 5; touch "$R/B.done"; sleep 3; say "B: done"
}
scenario_e() {  # E: a draft whose hidden size does not fit the target (a draft of another model's width)
  want E && [ "$(left)" -gt 100 ] || return 0
  python3 "$P/kit/make_tiny_eagle3.py" /tmp/m-narrow --hidden 128 > "$R/make_model_narrow.log" 2>&1
  say "E: start with a draft of hidden size 128 for a target of 256"; PE=$(DRAFT=/tmp/m-narrow/draft serve E)
  local t=0; while kill -0 "$PE" 2>/dev/null && [ $t -lt 120 ] && [ "$(left)" -gt 20 ]; do sleep 1; t=$((t+1)); done
  stop "$PE" TERM 3; touch "$R/E.done"; say "E: done (waited ${t} s)"
}
failing_start() {  # failing_start TAG NEED_S SHARE WHAT ARGS... : a start that fails (KV-cache memory), waited for while
                   # it lives, with 1/SHARE of what is left of the budget
  local tag=$1 need=$2 share=$3 what=$4; shift 4
  want "$tag" && [ "$(left)" -gt "$need" ] || return 0
  say "$tag: failing start ($what)"; local pid; pid=$(serve "$tag" "$@")
  local t=0; while kill -0 "$pid" 2>/dev/null && [ $t -lt $(( ($(left) - 20) / share )) ]; do sleep 1; t=$((t+1)); done
  stop "$pid" TERM 3; touch "$R/$tag.done"; say "$tag: done"
}
