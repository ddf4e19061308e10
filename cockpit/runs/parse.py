"""What a training log says, for every SpecForge era (runs-facts a.1-a.7): progress from tqdm bars
(with their postfix), per-position accuracy from the `Train/Eval Epoch [e/N], position i` lines
(E1/E2), the `Eval - Step` lines (E3) and the `step N: {...}` dicts (E4), milestones, and the
signatures of a run going wrong.  Unknown lines are ignored, never an error; a garbled line is
just a line that matches nothing.

`TrainingLog.feed` takes complete lines; `peek` the line being written (tqdm's current bar: it only
moves the progress, it is never recorded twice).
"""

from __future__ import annotations

import ast
import math
import re
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, TypeGuard

from cockpit.crashtexts import CUDA_OOM, NCCL_TIMEOUT

_TQDM = re.compile(
    r"(?P<desc>Training Epoch (?P<epoch>\d+)|Evaluating Epoch \d+|Training):\s+(?P<pct>\d+)%\|[^|]*\|\s*(?P<n>\d+)/(?P<tot>\d+)"
    r" \[(?P<el>[\d:]+)<(?P<rem>[\d:?]+),\s+(?P<rate>[\d.?]+)(?P<unit>s/it|it/s|s/step|step/s)(?:, (?P<post>[^\]]*))?\]")
_EPOCH_LINE = re.compile(r"^(?P<src>Train|Eval|Test) Epoch \[(?P<e>\d+)/(?P<n>\d+)\], position (?P<i>\d+),\s+(?P<what>Acc|pLoss): (?P<v>\S+)$")
_STEP_LINE = re.compile(r"^Eval - Step (?P<step>\d+) \[\d+/\d+\], position (?P<i>\d+),\s+(?P<what>Acc|Acceptance Rate|pLoss): (?P<v>\S+)$")
_DICT_LINE = re.compile(r"^step (?P<step>\d+): (?P<body>\{.*\})\s*$")
_TOTAL = re.compile(r"Auto-calculated total_steps: (?P<total>\d+) \(num_epochs=(?P<epochs>\d+) \* steps_per_epoch=(?P<per>\d+)\)")
_SAVED = re.compile(r"Saved model configuration to (?P<path>\S+)")
_EXPORTED = re.compile(r"exported sglang draft to (?P<path>\S+)")
_COMPLETED = re.compile(r"Training completed at step (?P<step>\d+)")
_STARTING = re.compile(r"Starting training from epoch")
_RANK_PREFIX = re.compile(r"^\[rank\d+\]:\s?")
# SpecForge's args table (E2/E3 `print_args_with_dots`, rank 0, a plain print): a header, then one `key ···· value`
# line per argument, the dots filling to 50 columns (none when key and value are long)
_ARGS_HEADER = re.compile(r"-{3,}\s*【args】\s*-{3,}")
_ARGS_ROW = re.compile(r"^(?P<key>[a-z_][a-z0-9_]*)(?: +·+ | {2,})(?P<value>\S.*?)\s*$")
_ARGS_TOTALS = {"num_epochs": "num_epochs", "epochs": "num_epochs", "total_steps": "total_steps", "max_num_steps": "total_steps",
                "max_steps": "total_steps"}
_EXCEPTION = re.compile(r"^(?P<name>[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure|Failed))(?::\s*(?P<text>.*))?$")
_OOM = re.compile(CUDA_OOM)
_NCCL = re.compile(NCCL_TIMEOUT)
_KILLED = re.compile(r"exitcode\s*:\s*-9\b|Signals\.SIGKILL|died with <Signals\.SIG(?:KILL|SEGV|ABRT)")
_BARE_FLOAT = re.compile(r"(?<![\w'\"])(-?inf|nan)(?![\w'\"])")

RATE_SAMPLES = 40  # the log's printed rates the ETA's median and spread come from
WATCHED_WINDOW_S = 600.0  # steps seen over the last 10 minutes of watching...
WATCHED_MIN_SPAN_S = 60.0  # ...once they span at least a minute, beat the log's own rates
FLAT_AFTER = 50  # training-bar updates in a row at loss=0.00, acc=0.00 before it is flagged (a bar starts at 0)
FLAT_AFTER_DICTS = 3  # E4 log records in a row with loss and acc exactly 0
STALL_AFTER_S = 600.0


MAX_SAVED = 1000  # checkpoint saves remembered from the log
MAX_PENDING = 64  # epochs (or steps) whose accuracies by position are being gathered
MAX_FLAGS = 32  # flags kept per run

@dataclass(frozen=True)
class Flag:
    kind: str  # flat_zero, nan, stalled, oom, nccl_timeout, traceback, killed_rank, crashed, missing, ...
    line: str  # the log line that shows it ("" when no single line does: a stall)
    message: str

    def to_json(self) -> dict:
        return {"kind": self.kind, "line": self.line, "message": self.message}


CRASH_KINDS = frozenset({"oom", "nccl_timeout", "traceback", "killed_rank", "crashed"})


def _number(text: str) -> float | None:
    text = text.strip().rstrip(",")
    try:
        return float(text)
    except ValueError:
        return None


def _duration(text: str) -> float | None:
    """tqdm's [H:]MM:SS; None for '?'."""
    if "?" in text:
        return None
    seconds = 0.0
    for part in text.split(":"):
        if not part.isdigit():
            return None
        seconds = seconds * 60 + int(part)
    return seconds


def _finite(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and math.isfinite(value)


def literal_dict(body: str) -> dict | None:
    """A printed Python dict, `nan`/`inf` included (ast.literal_eval rejects them bare)."""
    try:
        value = ast.literal_eval(body)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        try:
            value = ast.literal_eval(_BARE_FLOAT.sub(lambda m: f"'{m.group(1)}'", body))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if not isinstance(value, dict):
        return None
    out = {}
    for key, item in value.items():
        if isinstance(item, str) and item in ("nan", "inf", "-inf"):
            item = float(item)
        if isinstance(item, list):
            item = [float(x) if isinstance(x, str) and x in ("nan", "inf", "-inf") else x for x in item]
        out[str(key)] = item
    return out


@dataclass
class Point:
    step: int
    loss: float | None
    acc: float | None


@dataclass
class TrainingLog:
    clock: Callable[[], float] = time.time
    stall_after_s: float = STALL_AFTER_S
    total_hint: int | None = None  # [runs.X] total_steps, for eras whose log never says it (E4)
    step: int | None = None
    total: int | None = None
    epoch: int | None = None
    num_epochs: int | None = None
    per_epoch: int | None = None
    eta_s: float | None = None
    eta_range: tuple | None = None  # (low, high) seconds: the spread of the rates behind eta_s
    rate: float | None = None  # steps per second, smoothed (what eta_s is worked out from)
    eta_scope: str = "run"  # "epoch" while the number of epochs is unknown: the time left in this one
    rate_source: str = ""  # "watched" (steps seen over wall time) or "log" (the median of the rates it prints)
    loss: float | None = None
    acc: float | None = None
    postfix: dict = field(default_factory=dict)
    per_position: dict = field(default_factory=dict)  # "train"/"eval" -> list of accuracy by position
    per_position_step: dict = field(default_factory=dict)  # "train"/"eval" -> the step (or epoch) it is from
    eval_loss: float | None = None
    history: deque = field(default_factory=lambda: deque(maxlen=2000))
    flags: list = field(default_factory=list)
    notes: list = field(default_factory=list)
    saved: deque = field(default_factory=lambda: deque(maxlen=MAX_SAVED))  # checkpoint dirs the log says were written (the last ones)
    finished: str | None = None  # why the run is known to have finished
    phase: str = ""  # "training", "evaluating"
    last_progress_at: float | None = None
    _progress_key: tuple | None = None
    _flat: int = 0
    _flat_dicts: int = 0
    _in_traceback: bool = False
    _crash_seq: int = -1
    _progress_seq: int = -1
    _seq: int = 0
    _last_epoch_line: tuple | None = None  # (src, epoch, of) of the last per-epoch line
    _pending_epoch: dict = field(default_factory=dict)  # (src, epoch) -> {position: acc}
    _dict_steps: set = field(default_factory=set)
    lines_seen: int = 0
    tb_step: int | None = None  # the last training step TensorBoard recorded (optimizer steps)
    optimizer_steps: int | None = None  # the run's own "Auto-calculated total_steps" (optimizer steps)
    last_line: str = ""  # the last line with text: what a run that died without a word said last
    bar_at: tuple | None = None  # (n, total) of the training bar's last update: mid-epoch or at its end
    bar_rate: float | None = None  # the training bar's last printed rate (it/s): tqdm writes at least every iteration
    args: dict = field(default_factory=dict)  # the run's own args table (SpecForge E2/E3): the totals it states
    _in_args: bool = False
    _rates: deque = field(default_factory=lambda: deque(maxlen=RATE_SAMPLES))  # rates the log printed (steps/s)
    _seen: deque = field(default_factory=lambda: deque(maxlen=4096))  # (wall time read, step)

    # --- feeding -------------------------------------------------------------------------------

    def feed(self, lines, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        for line in lines:
            self.lines_seen += 1
            self._seq += 1
            self._line(line, now)

    def peek(self, partial: str, now: float | None = None) -> None:
        """The line being written: a bar's progress only."""
        if partial and "%|" in partial:
            self._bar(partial, self.clock() if now is None else now, record=False)

    def reset(self) -> None:
        """A new file under the same name (a restarted run): forget what the old one said."""
        fresh = TrainingLog(self.clock, self.stall_after_s, self.total_hint)
        self.__dict__.update(fresh.__dict__)

    def learn_totals(self, num_epochs: int | None, total_steps: int | None) -> None:
        """What the run's own command line or config file states (a log of the E4 era never says its
        total; E1/E2 say the epochs only once the first epoch ends)."""
        if total_steps and not self.total_hint:
            self.total_hint = total_steps
            if self.total is None:
                self.total = total_steps
        if num_epochs and not self.num_epochs:
            self.num_epochs = num_epochs
            if self.per_epoch and self.total is None:
                self.total = num_epochs * self.per_epoch

    @property
    def mid_run(self) -> str | None:
        """Where the log stands when it shows the run short of its end (a bar mid-epoch, a step short of the total):
        a trainer gone here stopped before its end.  None when the log cannot place it against an end."""
        if self.finished or self.bar_complete:
            return None
        if self.phase == "training" and self.bar_at is not None and self.bar_at[0] < self.bar_at[1]:
            return f"its training bar stood at {self.bar_at[0]}/{self.bar_at[1]}"
        if self.step is not None and self.total and self.step < self.total:
            return f"step {self.step} of {self.total}"
        return None

    def cadence_s(self) -> float | None:
        """How often the log is written while the run moves, from its own words: a training bar's rate (tqdm writes
        at most every 0.1 s, at least once an iteration).  None when the log does not say (E4's records)."""
        if self.bar_rate and self.phase == "training":
            return max(0.1, 1.0 / self.bar_rate)
        return None

    @property
    def bar_complete(self) -> bool:
        """The training bar stands at the run's last step (a run whose last word is its 100 % bar)."""
        return (self.step is not None and self.total is not None and self.total > 0 and self.step >= self.total
                and self.phase == "training")

    # --- per line ------------------------------------------------------------------------------

    def _line(self, line: str, now: float) -> None:
        if not line.strip():
            return
        self.last_line = line.strip()[:300]
        if "%|" in line:
            # several bar updates may share a line (a nested bar's \n): take each
            end = 0
            for match in _TQDM.finditer(line):
                self._bar_match(match, line, now, record=True)
                end = match.end()
            # a record printed on stdout right after a bar's \r update on stderr shares its line
            if end and (m := _DICT_LINE.match(_RANK_PREFIX.sub("", line[end:]).strip())):
                self._dict(int(m.group("step")), m.group("body"), m.group(0), now)
            return
        text = _RANK_PREFIX.sub("", line).rstrip()
        if _ARGS_HEADER.search(text):
            self._in_args = True
            return
        if self._in_args:
            if (m := _ARGS_ROW.match(text)) and len(self.args) < 400:
                self._arg(m.group("key"), m.group("value"))
                return
            self._in_args = False
        if self._crash(line, text):
            return
        if text.startswith("step ") and (m := _DICT_LINE.match(text)):
            self._dict(int(m.group("step")), m.group("body"), text, now)
        elif (m := _EPOCH_LINE.match(text)):
            self._epoch_line(m, text)
        elif (m := _STEP_LINE.match(text)):
            self._step_line(m)
        elif (m := _TOTAL.search(text)):
            self.num_epochs, self.per_epoch = int(m.group("epochs")), None
            self.optimizer_steps = int(m.group("total"))
            self.notes.append(f"{m.group('total')} optimizer steps ({m.group('epochs')} epochs x {m.group('per')})")
        elif (m := _SAVED.search(text)):
            self.saved.append(m.group("path"))
            if self.num_epochs and self._last_epoch_line and self._last_epoch_line[1] == self._last_epoch_line[2] == self.num_epochs:
                self.finished = f"the last epoch ({self.num_epochs}/{self.num_epochs}) was saved: {m.group('path')}"
        elif (m := _EXPORTED.search(text)):
            self.saved.append(m.group("path"))
        elif (m := _COMPLETED.search(text)):
            self.finished = text.strip()
        elif _STARTING.search(text):
            self.finished = None
            self._progress(("start",), now)

    def _arg(self, key: str, value: str) -> None:
        """One row of the args table: the totals it states are the run's own (`num_epochs ···· 2`)."""
        self.args[key] = value[:200]
        what = _ARGS_TOTALS.get(key)
        if what is None or not value.isdigit() or int(value) <= 0:
            return
        if what == "num_epochs":
            self.learn_totals(int(value), None)
        else:
            self.learn_totals(None, int(value))

    def _crash(self, line: str, text: str) -> bool:
        if "Traceback (most recent call last)" in text:
            self._in_traceback = True
            return True
        kind = None
        if _OOM.search(text):
            kind, message = "oom", "CUDA out of memory"
        elif _NCCL.search(text):
            kind, message = "nccl_timeout", "an NCCL collective timed out (a rank died or hung)"
        elif _KILLED.search(text):
            kind, message = "killed_rank", "a rank was killed (SIGKILL: the OOM killer, or a scheduler)"
        elif "ChildFailedError" in text and self._in_traceback:
            kind, message = "crashed", "torchrun: a training process failed"
        elif self._in_traceback and not text.startswith((" ", "\t")) and (m := _EXCEPTION.match(text)):
            self._in_traceback = False
            kind, message = "traceback", f"crashed: {m.group('name').rsplit('.', 1)[-1]}" + (f": {m.group('text')}" if m.group("text") else "")
        if kind is None:
            return False
        self._crash_seq = self._seq
        if not any(f.kind == kind and f.line == line.strip() for f in self.flags):
            if kind in ("crashed",) and any(f.kind in CRASH_KINDS for f in self.flags):
                return True  # torchrun's summary of a crash already named
            if len(self.flags) < MAX_FLAGS:  # the first ones say what happened; a flood of them adds nothing
                self.flags.append(Flag(kind, line.strip()[:500], message))
        return True

    def _bar(self, line: str, now: float, record: bool) -> None:
        for match in _TQDM.finditer(line):
            self._bar_match(match, line, now, record)

    def _bar_match(self, m: re.Match, line: str, now: float, record: bool) -> None:
        n, tot = int(m.group("n")), int(m.group("tot"))
        desc = m.group("desc")
        rate = _number(m.group("rate")) if "?" not in m.group("rate") else None
        if rate and m.group("unit").startswith("s/"):
            rate = 1.0 / rate if rate else None
        remaining = _duration(m.group("rem"))
        if desc.startswith("Evaluating"):
            self.phase = "evaluating"
            self._progress((desc, n), now)
            return
        self.phase = "training"
        self.bar_at = (n, tot)
        if rate:
            self.bar_rate = rate
        if m.group("epoch") is not None:
            self.epoch, self.per_epoch = int(m.group("epoch")), tot
            self.step = self.epoch * tot + n
            self.total = self.num_epochs * tot if self.num_epochs else (self.total_hint or None)
        else:
            self.step, self.total = n, tot
        if record and rate:
            self._rates.append(rate)
        self._eta(now, fallback=remaining if m.group("epoch") is None else None)
        if self._progress((desc, n), now):
            self.finished = None if n < tot or (self.total and self.step < self.total) else self.finished
        post = m.group("post")
        if post:
            values = {}
            for part in post.split(", "):
                key, sep, value = part.partition("=")
                if sep:
                    values[key.strip()] = value.strip()
            self.postfix = values
            loss, acc = _number(values.get("loss", "")), _number(values.get("acc", ""))
            if "loss" in values:
                self.loss = loss
            if "acc" in values:
                self.acc = acc
            if record:
                self._check_values(line.strip(), {"loss": loss, "acc": acc}, values)
                if loss == 0 and acc == 0:
                    self._flat += 1
                    if self._flat == FLAT_AFTER:
                        self._flag("flat_zero", line.strip(), f"loss=0.00 and acc=0.00 for {FLAT_AFTER} updates in a row: the "
                                   "draft is not learning (empty loss masks? check the data's chat template and preformatting)")
                elif loss is not None:
                    self._flat = 0
                if self.step is not None:
                    self._point(self.step, loss, acc)

    def _eta(self, now: float, fallback: float | None = None) -> None:
        """The time left from a smoothed rate: the steps seen advancing over the last minutes of
        watching when there are enough (true wall time, evaluations and saves included), else the
        median of the last rates the log printed (one 20-step window jumps; forty do not).  The
        spread is the ETA at the rates' quartiles."""
        if self.step is not None and (not self._seen or self._seen[-1][1] != self.step):
            if self._seen and self.step < self._seen[-1][1]:
                self._seen.clear()  # a restarted count
            self._seen.append((now, self.step))
        while self._seen and now - self._seen[0][0] > WATCHED_WINDOW_S and len(self._seen) > 2:
            self._seen.popleft()
        rates = sorted(self._rates)
        watched = None
        if len(self._seen) >= 2:
            (t0, s0), (t1, s1) = self._seen[0], self._seen[-1]
            if t1 - t0 >= WATCHED_MIN_SPAN_S and s1 > s0:
                watched = (s1 - s0) / (t1 - t0)
        if watched:
            self.rate, self.rate_source = watched, "watched"
        elif rates:
            self.rate, self.rate_source = rates[len(rates) // 2], "log"
        else:
            self.rate, self.rate_source = None, ""
        left, self.eta_scope = None, "run"
        if self.total and self.step is not None:
            left = self.total - self.step
        elif self.per_epoch and self.epoch is not None and self.step is not None:
            left, self.eta_scope = (self.epoch + 1) * self.per_epoch - self.step, "epoch"  # how many epochs: unknown yet
        if left is None or not self.rate:
            self.eta_s, self.eta_range = (fallback if left is not None else None), None
            return
        left = max(0, left)
        self.eta_s = left / self.rate
        self.eta_range = None
        if len(rates) >= 4:
            low, high = rates[len(rates) // 4], rates[(3 * len(rates)) // 4]
            scale = self.rate / rates[len(rates) // 2]  # the quartiles around whichever rate is used
            if low > 0 and high > 0:
                self.eta_range = (left / (high * scale), left / (low * scale))

    def _progress(self, key: tuple, now: float) -> bool:
        if key == self._progress_key:
            return False
        self._progress_key = key
        self.last_progress_at = now
        self._progress_seq = self._seq
        return True

    def _point(self, step: int, loss, acc) -> None:
        if self.history and self.history[-1].step == step:
            self.history[-1] = Point(step, loss, acc)
        else:
            self.history.append(Point(step, loss, acc))

    def _flag(self, kind: str, line: str, message: str) -> None:
        if not any(f.kind == kind for f in self.flags):
            self.flags.append(Flag(kind, line[:500], message))

    def _check_values(self, line: str, values: dict, raw: dict | None = None) -> None:
        bad = [k for k, v in values.items() if v is not None and not math.isfinite(v)]
        if raw:
            bad += [k for k, v in raw.items() if k not in values and v.lower() in ("nan", "inf", "-inf")]
        if bad:
            self._flag("nan", line, f"{', '.join(sorted(set(bad)))} is NaN or infinite: the training diverged")

    def _epoch_line(self, m: re.Match, text: str) -> None:
        src = "train" if m.group("src") == "Train" else "eval"
        epoch, of = int(m.group("e")), int(m.group("n"))
        self.num_epochs = of
        self._last_epoch_line = (src, epoch, of)
        value = _number(m.group("v"))
        if m.group("what") == "pLoss":
            if value is not None and not math.isfinite(value):
                self._check_values(text, {"pLoss": value})
            return
        if value is None:
            return
        if not math.isfinite(value):
            self._check_values(text, {"Acc": value})
            return
        accs = self._pending(src, epoch)
        accs[int(m.group("i"))] = value
        self._set_positions(src, [accs[i] for i in sorted(accs)], f"epoch {epoch}/{of}")
        train, evaluated = self._pending_epoch.get(("train", epoch)), self._pending_epoch.get(("eval", epoch))
        if src == "eval" and train and evaluated and len(evaluated) == len(train) and evaluated == train:
            note = "the 'Eval' numbers equal the train numbers (SpecForge v0.1.0 printed the train lists as eval): shown as train"
            if note not in self.notes:
                self.notes.append(note)
            self.per_position.pop("eval", None)

    def epoch_accuracies(self) -> dict[int, tuple[str, list[float]]]:
        """Each epoch's accuracies by position as its log printed them, by the epoch number it printed ([K/N], from 1;
        eval where it printed eval, else train): what a checkpoint of that epoch was judged on (the latest MAX_PENDING)."""
        found: dict[int, tuple[str, list[float]]] = {}
        for (src, when), accs in self._pending_epoch.items():
            if not isinstance(when, int) or not accs:
                continue
            if src == "eval" or when not in found:
                if src == "eval" and "eval" not in self.per_position and found.get(when, ("",))[0] == "train":
                    continue  # SpecForge v0.1.0's "eval" lists were the train ones (dropped: see notes)
                found[when] = (src, [accs[i] for i in sorted(accs)])
        return found

    def _step_line(self, m: re.Match) -> None:
        # E3 prints "Eval - Step" for train records too: which one it is cannot be told, so "train"
        if m.group("what") != "Acc":
            return
        value = _number(m.group("v"))
        if value is None or not math.isfinite(value):
            return
        step = int(m.group("step"))
        accs = self._pending("train", f"step {step}")
        accs[int(m.group("i"))] = value
        self._set_positions("train", [accs[i] for i in sorted(accs)], f"step {step}")

    def _pending(self, src: str, when) -> dict:
        """The accuracies by position of one epoch (or step) being read: only the latest few are kept (a
        run of a million steps printing them per step must not hold them all)."""
        accs = self._pending_epoch.setdefault((src, when), {})
        while len(self._pending_epoch) > MAX_PENDING:
            del self._pending_epoch[next(iter(self._pending_epoch))]
        return accs

    def _set_positions(self, src: str, values: list[float], when: str) -> None:
        self.per_position[src] = values
        self.per_position_step[src] = when

    def _dict(self, step: int, body: str, line: str, now: float) -> None:
        values = literal_dict(body)
        if values is None:
            return  # a cut or garbled record: nothing it says can be trusted
        values = {k[len("train/"):] if k.startswith("train/") else k: v for k, v in values.items()}
        is_eval = any(k.startswith("eval/") for k in values)
        key = (step, is_eval)
        if key in self._dict_steps:
            return  # every rank prints the same reduced line
        self._dict_steps.add(key)
        if len(self._dict_steps) > 100_000:
            self._dict_steps.clear()
        numbers = {k: v for k, v in values.items() if isinstance(v, (int, float))}
        self._check_values(line, {k: v for k, v in numbers.items()
                                  if k in ("loss", "acc", "eval/avg_loss", "eval/avg_acc") or k.startswith(("ploss", "acc_", "eval/ploss"))})
        if is_eval:
            per = values.get("eval/per_position_acc")
            if isinstance(per, list) and per and all(_finite(x) for x in per):
                self._set_positions("eval", [float(x) for x in per], f"step {step}")
            else:
                indexed = sorted((int(k.rsplit("/", 1)[1]), v) for k, v in numbers.items()
                                 if k.startswith("eval/per_position_acc/") and k.rsplit("/", 1)[1].isdigit())
                if indexed and all(_finite(v) for _, v in indexed):
                    self._set_positions("eval", [float(v) for _, v in indexed], f"step {step}")
            if _finite(values.get("eval/avg_loss")):
                self.eval_loss = float(values["eval/avg_loss"])
            return
        accs = sorted((int(k[4:]), v) for k, v in numbers.items() if k.startswith("acc_") and k[4:].isdigit())
        if accs and all(_finite(v) for _, v in accs):
            self._set_positions("train", [float(v) for _, v in accs], f"step {step}")
        self.step = step
        self.phase = "training"
        if self.total_hint:
            self.total = self.total_hint
        if "loss" in numbers:
            self.loss = float(numbers["loss"])
        if "acc" in numbers:
            self.acc = float(numbers["acc"])
        per_hour = numbers.get("perf/optimizer_steps_per_hour")
        if _finite(per_hour) and per_hour > 0:
            self._rates.append(per_hour / 3600.0)
        self._eta(now)
        if self._progress(("step", step), now):
            self.finished = None
        self._point(step, self.loss, self.acc)
        if numbers.get("loss") == 0 and numbers.get("acc") == 0:
            self._flat_dicts += 1
            if self._flat_dicts == FLAT_AFTER_DICTS:
                self._flag("flat_zero", line, f"loss and acc exactly 0 for {FLAT_AFTER_DICTS} log records in a row: the draft is not learning")
        else:
            self._flat_dicts = 0
        if numbers.get("lr") == 0 and step > 0:
            self.finished = f"the learning-rate schedule ended at step {step} (lr 0.0)"
        elif self.total and step >= self.total:
            self.finished = f"step {step} of {self.total}"

    def feed_scalars(self, scalars, now: float | None = None) -> None:
        """TensorBoard scalars (runs/tfevents.py): per-position accuracy by tag, for the eras whose
        console no longer prints it.  Tags: `train/acc_i`, `eval/acc_i`, `eval/epoch_acc_i`,
        `train/epoch_acc_i`, `eval/per_position_acc/i`, `train/loss`, `eval/avg_loss`."""
        now = self.clock() if now is None else now
        groups: dict[tuple[str, int], dict[int, float]] = {}
        for scalar in scalars:
            tag, value = scalar.tag, scalar.value
            if not math.isfinite(value) and tag.split("/")[-1].startswith(("loss", "acc", "ploss", "avg_")):
                self._flag("nan", f"TensorBoard {tag} at step {scalar.step}: {value}", f"{tag} is NaN or infinite: the training diverged")
                continue
            source, _, name = tag.partition("/")
            if source not in ("train", "eval"):
                continue
            index = None
            for prefix in ("acc_", "epoch_acc_"):
                if name.startswith(prefix) and name[len(prefix):].isdigit():
                    index = int(name[len(prefix):])
            if name.startswith("per_position_acc/") and name.rsplit("/", 1)[1].isdigit():
                index = int(name.rsplit("/", 1)[1])
            if index is not None:
                groups.setdefault((source, scalar.step), {})[index] = value
            elif tag == "train/loss":
                self.loss = value
            elif tag == "eval/avg_loss":
                self.eval_loss = value
            if source == "train" and self.step is None and scalar.step:
                self.tb_step = scalar.step
        for (source, step), values in sorted(groups.items(), key=lambda item: item[0][1]):
            self._set_positions(source, [values[i] for i in sorted(values)], f"step {step} (TensorBoard)")

    # --- what it adds up to --------------------------------------------------------------------

    @property
    def crashed(self) -> bool:
        return self._crash_seq >= 0 and self._crash_seq >= self._progress_seq

    def state(self, now: float | None = None) -> str:
        now = self.clock() if now is None else now
        if self.crashed:
            return "crashed"
        if self.finished:
            return "finished"
        if self.stalled(now):
            return "stalled"
        if self.last_progress_at is not None:
            return "running"
        return "unknown"

    def stalled(self, now: float) -> bool:
        if self.last_progress_at is None or self.finished or self.crashed:
            return False
        return now - self.last_progress_at > self.stall_after_s

    def current_flags(self, now: float | None = None) -> list[Flag]:
        now = self.clock() if now is None else now
        flags = list(self.flags)
        if self.stalled(now) and self.last_progress_at is not None:
            minutes = (now - self.last_progress_at) / 60
            flags.append(Flag("stalled", "", f"no progress for {minutes:.0f} min (step {self.step}); a hung rank or collective?"))
        return flags

    def positions(self) -> tuple[list[float], str | None]:
        """The per-position accuracy an estimate should use: eval when the log has it, else train."""
        for source in ("eval", "train"):
            if self.per_position.get(source):
                return self.per_position[source], source
        return [], None
