"""Every action of the cockpit, described once: the key bindings, the `?` help and the command palette
are all made from this table (as Harlequin's actions.py).  An action has an id users rebind in
[keymap], its keys, what it does, and whether it changes anything (then it is left out in read-only
mode)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class Action:
    id: str
    keys: str
    action: str
    description: str
    show: bool = True  # in the footer
    key_display: str | None = None
    palette: str | None = None  # the command palette's title (None: not in the palette)
    palette_help: str = ""
    writes: bool = False  # runs a step or changes a host: not in read-only mode
    scope: str = "app"  # "app", or the pane whose bindings it is
    help: str = ""  # the longer description `?` shows (default: the footer's)
    when: str = ""  # in the footer only then (the app's check_action): "large" terminal, a "fix" offered, a "host" in focus, a "runbook",
    # "writable" (not --read-only: the pane's own check_action)
    priority: bool = False  # before the focused widget's and the screen's own bindings (Tab: the screen's focus_next)

    def binding(self) -> Binding:
        return Binding(self.keys, self.action, self.description, show=self.show, key_display=self.key_display, id=self.id,
                       priority=self.priority)

    def bindings(self) -> list[Binding]:
        """Its binding; a key shown only at times (`when`) also gets a twin that is never shown and
        answers the key the rest of the time (the app's check_action lets one or the other run)."""
        made = [self.binding()]
        if self.when:
            made.append(Binding(self.keys, f"{self.action}('hidden')", self.description, show=False, id=self.id))
        return made

    @property
    def shown_keys(self) -> str:
        return self.key_display or self.keys.replace("question_mark", "?").replace(",", " / ")


ACTIONS: tuple[Action, ...] = (
    Action("app.quit", "q", "quit", "quit"),
    Action("app.help", "question_mark,f1", "help", "help", key_display="?", palette="Help", palette_help="the keys of the focused pane"),
    Action("checklist.next", "n", "run_next", "next step", help="run the next step of the checklist", palette="Run the next step",
           palette_help="the first step of the runbook not yet passed", writes=True, when="runbook"),
    Action("server.apply_fix", "f", "apply_fix", "apply fix", help="apply the diagnosed fix to the launch step, and relaunch", palette="Apply the suggested fix",
           palette_help="to the launch step, and relaunch (asks first)", writes=True, when="fix"),
    Action("app.hosts", "h", "focus_hosts", "hosts", show=False, help="the hosts (a small terminal shows one pane at a time)", palette="Show the hosts", palette_help="every host and GPU"),
    Action("checklist.focus", "c", "focus_checklist", "checklist", help="the checklist: show it, or focus it", palette="Show the checklist", palette_help="the runbook's steps", when="large"),
    Action("server.toggle", "s", "toggle_server_log", "server", help="the server log: show and focus it (again, in it: hide it)", palette="Toggle server log",
           palette_help="the launched server's log, health and diagnoses", when="large"),
    Action("bench.toggle", "b", "toggle_bench", "bench", help="benchmarks: the sweep's decision and charts (again, in it: hide it)", palette="Toggle benchmark charts",
           palette_help="the sweep's decision, throughput, acceptance and latency per depth config", when="large"),
    Action("runs.toggle", "t", "toggle_runs", "runs", help="training runs: progress, accuracy, estimated acceptance, checkpoints (again, in it: hide it)",
           palette="Toggle training runs", palette_help="the [runs] of the config: progress, estimate, checkpoints, flags", when="large"),
    Action("procs.toggle", "p", "toggle_procs", "processes", help="the focused host's compute processes as nvitop shows them: "
           "pid, user, GPU, memory, CPU, run time, command (again, in it: hide it)", palette="Toggle the process table",
           palette_help="sort, select, kill through the plan, copy a command line"),
    Action("app.jump", "colon", "jump", "jump", key_display=":", show=False, help="jump to a host, a step, a run or a pane by "
           "a few letters of its name (fuzzy, as k9s's :)", palette="Jump to…", palette_help="a host, a step, a run or a pane"),
    Action("app.toggle_log", "l", "toggle_log", "log", help="the command log: every command run on a host (again, in it: hide it)", palette="Toggle command log",
           palette_help="every command run on a host, with its exit status", when="large"),
    Action("app.hide_pane", "escape", "hide_pane", "hide pane", show=False, key_display="Esc",
           help="leave a zoom, else hide the pane in focus (a small terminal: back to the hosts)"),
    Action("app.next_pane", "tab", "next_pane(1)", "next pane", show=False, key_display="Tab", priority=True,
           help="move to the next open pane (where only one is open, say so)"),
    Action("app.previous_pane", "shift+tab", "next_pane(-1)", "previous pane", show=False, key_display="Shift+Tab", priority=True),
    Action("app.mouse", "m", "toggle_mouse", "mouse on/off", show=False, palette="Mouse on/off",
           palette_help="off: the terminal (tmux) selects text with the mouse; on: clicks and the wheel reach the cockpit",
           help="the mouse: the cockpit's (clicks, wheel) or the terminal's (select text); also --no-mouse, [ui] mouse = false"),
    Action("app.copied", "Y", "show_copied", "show copied", show=False, help="what the last y copied, to select by mouse "
           "(a terminal that ignores OSC 52)", palette="Show what was copied",
           palette_help="the last copy's text, selectable (a terminal that ignores OSC 52)"),
    Action("host.zoom", "z", "zoom", "zoom", help="zoom the focused host (then 0-9: one GPU)", palette="Zoom the focused host", palette_help="show only this host (again to show all)", when="host"),
    Action("host.reconnect", "R", "reconnect", "reconnect now", show=False, palette="Reconnect now",
           palette_help="the focused host (or every host waiting to retry) without waiting for its backoff"),
    Action("bench.next_chart", "right_square_bracket", "chart(1)", "next chart", show=False, key_display="]"),
    Action("bench.previous_chart", "left_square_bracket", "chart(-1)", "previous chart", show=False, key_display="["),
    *(Action(f"host.zoom_gpu_{n}", str(n), f"zoom_gpu({n})", f"zoom GPU {n} (in a zoomed host)", show=False) for n in range(10)),
    Action("host.next", "j,down", "focus_next_host", "next host", show=False),
    Action("host.previous", "k,up", "focus_previous_host", "previous host", show=False),
    Action("checklist.down", "down,j", "move(1)", "next step", show=False, scope="checklist"),
    Action("checklist.up", "up,k", "move(-1)", "previous step", show=False, scope="checklist"),
    Action("checklist.run", "enter,r", "run_selected", "run step", scope="checklist", writes=True),
    Action("bench.down", "down,j", "scroll(1)", "scroll down", show=False, scope="bench", help="scroll the decision"),
    Action("bench.up", "up,k", "scroll(-1)", "scroll up", show=False, scope="bench", help="scroll the decision"),
    Action("runs.down", "down,j", "scroll_down", "scroll down", show=False, scope="runs", help="scroll the runs"),
    Action("runs.up", "up,k", "scroll_up", "scroll up", show=False, scope="runs", help="scroll the runs"),
    Action("runs.measure", "a", "measure", "measure acceptance", scope="runs", writes=True, when="writable",
           help="serve each complete checkpoint of the run shown first through the launch step (its flags; only the draft "
           "changes) and measure the acceptance the engine reports: which to ship (asks first; `cockpit bench checkpoints`)"),
    Action("procs.down", "down,j", "move(1)", "next process", show=False, scope="procs"),
    Action("procs.up", "up,k", "move(-1)", "previous process", show=False, scope="procs"),
    Action("procs.sort", "o", "next_sort", "sort by", scope="procs", help="sort by the next column (pid, user, GPU, GPU memory, "
           "CPU, RSS, run time, command)"),
    Action("procs.reverse", "O", "reverse_sort", "reverse", scope="procs", help="reverse the sort"),
    Action("procs.kill", "K", "kill_selected", "kill", scope="procs", writes=True, when="writable", help="kill the selected process: its plan "
           "(pid, user, GPU memory) first, then SIGTERM and SIGKILL after 10 s; your own processes only unless the host sets "
           "kill_any_user = true"),
    Action("procs.filter", "slash", "filter", "filter", key_display="/", scope="procs",
           help="show only the processes a regular expression matches (anywhere in the row; case-smart); empty: all"),
    Action("procs.clear_filter", "escape", "clear_filter", "clear filter", show=False, key_display="Esc", scope="procs",
           help="clear the filter (with none: as Esc elsewhere, hide the pane)"),
    Action("procs.copy", "y", "copy_selected", "copy command", scope="procs", help="copy the selected process's command line "
           "(OSC 52: works over ssh, and in tmux with set-clipboard on)"),
    Action("logview.search", "slash", "search", "search", key_display="/", scope="logview",
           help="search the log: a regular expression, case-smart (an upper-case letter makes it case-sensitive); matches marked"),
    Action("logview.next", "n", "search_next(1)", "next match", show=False, scope="logview"),
    Action("logview.previous", "N", "search_next(-1)", "previous match", show=False, scope="logview"),
    Action("logview.follow", "G", "follow", "follow", scope="logview", help="follow the log again (scrolling up pauses it, and says so)"),
    Action("logview.wrap", "w", "toggle_wrap", "wrap", scope="logview",
           help="long lines: cut at the pane's edge, wrapped, or whole (read sideways with left/right); w goes round"),
    Action("logview.left", "left", "sideways(-1)", "scroll left", show=False, scope="logview"),
    Action("logview.right", "right", "sideways(1)", "scroll right", show=False, scope="logview"),
    Action("logview.copy", "y", "copy_match", "copy line", show=False, scope="logview",
           help="copy the current match's line (or the last line) through OSC 52"),
    Action("checklist.copy", "y", "copy_selected", "copy", show=False, scope="checklist",
           help="copy the selected step's command line (shell-quoted), else its evidence (JSON), else its path: OSC 52"),
    Action("checklist.raw", "x", "toggle_raw", "raw evidence", show=False, scope="checklist", help="the selected step's evidence as raw JSON, in a scrollable view (esc or x closes it)"),
)
SHOWN_WHEN = {"server.apply_fix": "a fix is offered"}  # in the footer only while it can do something


PANE_HELP = {
    "host": "A host pane: one line per GPU (memory bar, used/total MiB, power draw/limit, utilisation, "
    "temperature, power history), then the host's compute processes. The border shows the host state "
    "and the age of its last sample.",
    "log": "The command log: every command the cockpit ran on a host, with its exit status.",
    "procs": "The processes of the focused host's GPUs, as nvitop shows them: pid, user, GPUs, GPU memory, CPU % "
    "(measured between two polls), resident memory, run time and command line; read while the pane is shown (the GPUs' "
    "own list and one ps over the host's connection). o sorts by the next column, O reverses, / filters the rows, K "
    "kills the selected process through the kill steps' plan and confirmation, y copies its command line.",
    "server": "The server log: the launched server's start-up milestones, health, its log followed from the end, "
    "and the diagnosis of a crash with its fix (f applies it to the launch step and relaunches).",
    "bench": "Benchmarks: a sweep's progress, then its decision (the best depth per concurrency, speedup, "
    "predicted vs measured acceptance); [ and ] show throughput, acceptance, latency and concurrency charts.",
    "runs": "Training runs ([runs.NAME] in the config): state and progress with the time left, loss and accuracy per "
    "TTT position (train or eval, as the log gives it), the acceptance length a topk-1 chain at the serving depth "
    "should reach (with the bonus token, as SGLang and vLLM report it, and without), the newest complete checkpoint with "
    "its key layout and verdict, and every flag with the log line that shows it. Alerts go out when a run "
    "finishes, crashes or stalls, and when a checkpoint is ready ([alerts]). a measures each complete checkpoint's "
    "acceptance by serving it through the launch step; then it is shown beside the estimate, and which to ship by it.",
    "checklist": "The checklist: the runbook's steps in order. A step is blocked until every step before it "
    "passed; the launch step stays locked until its gate opens and re-verifies the GPUs of its host right "
    "before it starts. A step marked ! changes a host (kills processes, rewrites files): it shows exactly what it "
    "will do and asks first. j/k select, enter runs the selected step, n runs the next one.",
}


_WHEN = {a.action: a.when for a in ACTIONS if a.when}


def conditional_actions() -> tuple[str, ...]:
    """The actions shown in the footer only at times (each has a `when`)."""
    return tuple(_WHEN)


def visibility_rule(action: str) -> str:
    """The `when` of the action named `action` ('' for one always shown when it can run)."""
    return _WHEN.get(action, "")


def check_writable(app, action: str, parameters: tuple) -> bool | None:
    """A pane's check_action for its keys shown only where they can change things (not --read-only): the shown
    binding answers then, its hidden twin otherwise (and says why)."""
    if visibility_rule(action) != "writable":
        return True
    writable = not getattr(app, "read_only", False)
    return (not writable) if parameters == ("hidden",) else writable


def bindings(scope: str = "app") -> list[BindingType]:
    return [b for a in ACTIONS if a.scope == scope for b in a.bindings()]


def fallbacks(scope: str = "checklist") -> list[BindingType]:
    """The keys of a pane's actions, bound app-wide too (never shown) so that pressed elsewhere
    they say where they work instead of doing nothing."""
    taken = {key for a in ACTIONS if a.scope == "app" for key in a.keys.split(",")}
    return [Binding(key, f"elsewhere('{a.id}')", a.description, show=False, id=f"{a.id}.elsewhere")
            for a in ACTIONS if a.scope == scope for key in a.keys.split(",") if key not in taken]


def by_id(action_id: str) -> Action:
    return next(a for a in ACTIONS if a.id == action_id)


def ids() -> set[str]:
    return {a.id for a in ACTIONS}


def help_rows(*scopes: str) -> list[tuple[str, str, str]]:
    """(keys, what it does, id) for the `?` help of these scopes; the ten digit keys of a zoomed host in one row."""
    rows: list[tuple[str, str, str]] = []
    for a in ACTIONS:
        if a.scope not in scopes:
            continue
        if a.id.startswith("host.zoom_gpu_"):
            if a.id == "host.zoom_gpu_0":
                rows.append(("0-9", "zoom GPU N (in a zoomed host)", "host.zoom_gpu_N"))
            continue
        rows.append((a.shown_keys, a.help or a.description, a.id))
    return rows


def palette(read_only: bool) -> list[Action]:
    return [a for a in ACTIONS if a.palette and not (read_only and a.writes)]
