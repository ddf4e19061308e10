"""One lifecycle for every watched thing: a training run, a server, a launch group's node.  The states, what each rests
on, whether it is terminal and whether it is an alarm, and what a viewer that is not root cannot know.  The runs
watcher (runs/watch.py) and the server's end (serving/server.py server_end) say only these words; README's table of
states is this table (tests/test_endings.py holds them equal)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class State:
    name: str
    terminal: bool  # an end: it needs positive evidence in two looks (the one-shot CLI takes its second look itself)
    alarm: bool  # an alert, and the CLI's exit 1
    rests_on: str  # the evidence it is said on
    not_root: str = ""  # what a viewer that is not root cannot know here, and what it says instead


STATES: tuple[State, ...] = (
    State("pending", False, False, "its manager says it waits (a Slurm job in the queue, a container created, a pod pending)"),
    State("starting", False, False, "its process is seen (or its log grows) and no progress line yet"),
    State("running", False, False, "its process is seen, or its log grew within its cadence; progress and an ETA from its log",
          "another user's descriptors cannot be read: its log written within its cadence is the sign of life, and no ETA "
          "once it is silent longer"),
    State("finishing", False, False, "its log says done (`lr 0.0`, its last bar) while its process still runs (a final "
                                     "eval or save); shown as running (finishing); a server: its own shutdown words while "
                                     "its process still runs (stopped, or crashed if a crash came first, once it is gone)"),
    State("stalled", False, True, "its process is seen, its log has not moved for stall_after_min (its CPU time said)"),
    State("idle", False, False, "a server: no request running (its log's last window, /metrics or /server_info); its "
                                "figures said as the last ones, with their age"),
    State("hung", False, True, "a server: requests running and no source shows progress (decode lines, /metrics counters, "
                               "/server_info)"),
    State("stopped", True, False, "the cockpit's own action (plan stop, the process table's kill, a kill step, the sweep's "
                                  "relaunch), recorded when done and tied to this run's or server's process: `stopped by you`; "
                                  "or a server's own words of a graceful shutdown, no crash before them (who stopped it: "
                                  "not the cockpit, the log does not say who)",
          "only the viewer's own kills are in its audit log"),
    State("finished", True, False, "evidence of completion: its completion line (the last epoch saved, `Training "
                                   "completed`), its final checkpoint complete, or its manager's exit 0"),
    State("ended", True, False, "it exited, and nothing says whether it finished (a weak last word and no final "
                                "checkpoint, no total to place its last step against); the CLI exits 1"),
    State("cancelled", True, False, "its manager says cancelled (Slurm's CANCELLED); the CLI exits 1"),
    State("died", True, True, "its process was seen gone in two looks (its pid, its pid file's, its log's writer, a pattern; "
                              "or its manager's non-zero exit) with its log short of its end and no last word",
          "another user's process cannot be seen to go: unknown, and why, unless a pid file or a pattern shows it (`ps` "
          "shows every user's pids)"),
    State("crashed", True, True, "its log's own words: a traceback, CUDA out of memory, an NCCL timeout, a killed rank; a "
                                 "server's crash text"),
    State("oom", True, True, "out of memory as its manager or the kernel says it (OOMKilled, OUT_OF_MEMORY; the kernel "
                             "log naming its pid, or its memory cgroup's oom_kill count rising since it was seen alive); a "
                             "SIGKILL alone is not",
          "the kernel log is root's (dmesg_restrict); the cgroup count is anyone's, for a process it saw alive"),
    State("unknown", False, False, "what could not be seen, said: a host that does not answer, descriptors of another user, "
                                   "one look that found it gone (the next decides), a log written within its cadence and "
                                   "no holder; the CLI exits 2",
          "this is what it says where root would see the process"),
)

BY_NAME = {s.name: s for s in STATES}
TERMINAL = tuple(s.name for s in STATES if s.terminal)
ALARMS = tuple(s.name for s in STATES if s.alarm)


def known(name: str) -> bool:
    return name in BY_NAME


def readme_table() -> str:
    """The states as README shows them (a Markdown table)."""
    rows = ["| state | ends it | alarm | rests on | a viewer that is not root |", "| --- | --- | --- | --- | --- |"]
    for s in STATES:
        rows.append(f"| `{s.name}` | {'yes' if s.terminal else '-'} | {'yes' if s.alarm else '-'} | {s.rests_on} | "
                    f"{s.not_root or 'the same'} |")
    return "\n".join(rows)
