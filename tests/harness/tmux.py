"""tmux for the tests that run the real TUI in a real terminal: sessions, keys, the screen read back, the demo's walk."""

from __future__ import annotations

import re
import subprocess
import time


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], capture_output=True, text=True, timeout=20).stdout


def new_session(session: str, width: int, height: int, command: str) -> None:
    """A detached session running `command`.  Killing a test's last session makes the tmux server
    exit while the next test may already be asking it for a new one: that request can be lost, so it
    is checked and asked again.  A pane whose program ends stays on screen (remain-on-exit), so a
    failure shows the program's last words instead of an empty screen."""
    for _ in range(5):
        subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", str(width), "-y", str(height), command,
                        ";", "set-option", "-t", session, "remain-on-exit", "on"], capture_output=True, text=True, timeout=20)
        if subprocess.run(["tmux", "has-session", "-t", session], capture_output=True).returncode == 0:
            return
        time.sleep(0.5)
    raise AssertionError(f"tmux could not start session {session}")


def screen(session: str) -> str:
    return tmux("capture-pane", "-p", "-t", session)


def joined(shown: str) -> str:
    """The screen's lines joined, borders stripped: text a narrow terminal wrapped reads whole again."""
    lines = [line.strip(" │┃║|█╭╮╰╯┏┓┗┛━─▌") for line in shown.splitlines()]
    return " ".join(lines) + "\n" + "".join(lines)


def dialog(shown: str, edge: str = "█", title: str = "This changes things on a host") -> str:
    """The text inside the dialog titled `title`, drawn with `edge` (Textual's thick border), the panes beside it left
    out: the columns between its left and right edges, as its title line has them (a sparkline beside it may draw the
    same glyph), joined as `joined` does, so a long line it wrapped reads whole whatever the paths' lengths."""
    import unicodedata

    def cells(line: str) -> list[str]:  # one entry per terminal column (a wide glyph, an emoji, takes two)
        out: list[str] = []
        for char in line:
            out.append(char)
            if unicodedata.east_asian_width(char) in ("W", "F"):
                out.append("\0")  # the second column of a wide glyph
        return out

    lines = ["".join(cells(line)) for line in shown.splitlines()]  # one character per column
    top = next((line for line in lines if title in line), None)
    if top is None:
        return ""
    at = top.index(title)
    left, right = top.rfind(edge, 0, at), top.find(edge, at)
    inner = [line[left + 1:right if right > left else None].replace("\0", "").rstrip() for line in lines if len(line) > left + 1]
    return joined("\n".join(inner))


def wait_screen(session: str, text: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        shown = screen(session)
        if text in shown:
            return shown
        time.sleep(0.2)
    pane = tmux("display-message", "-p", "-t", session, "pane dead: #{pane_dead}, exit status: #{pane_dead_status}").strip()
    raise AssertionError(f"{text!r} never appeared ({pane or 'no such session'}); the screen:\n{screen(session)}")


def walk_demo(session: str, cockpit: list[str], env: dict[str, str], demo_dir, size=(160, 48)) -> str:
    """`cockpit demo` in a real terminal: each step by key, the screen checked at each one, to the
    sweep's charts.  `cockpit` is how the command is started (the checkout's module, or a wheel's
    console script).  Returns the last screen."""
    command = " ".join(["env", "-u", "COLUMNS", "-u", "LINES"] + [f"{k}={v}" for k, v in env.items()]
                       + [*cockpit, "demo", "--dir", str(demo_dir)])
    new_session(session, size[0], size[1], command)
    wait_screen(session, "30000/143771M", timeout=30)  # the old server's memory on GPU 5
    compact = size[0] < 100 or size[1] < 28
    shown = wait_screen(session, "0/8 passed")
    assert "cockpit DEMO" in shown and "GPU 7" in shown and "nothing real is deployed" in shown  # the title is whole

    def key(*keys: str) -> None:
        tmux("send-keys", "-t", session, *keys)

    if compact:  # one pane at a time: the checklist is one key away
        assert "locked" not in shown
        key("c")
    wait_screen(session, "locked")  # the launch step, locked until its gate opens
    key("?")
    help_screen = wait_screen(session, "closes")  # the help's close hint is on screen, whatever the size
    assert "app.toggle_log" in help_screen or compact
    key("Escape")
    time.sleep(0.5)  # (a key right after Escape would read as alt+key)
    if compact:
        key("h")
        wait_screen(session, "GPU 7")

    key("n")  # the training run (a stand-in) finishes into its checkpoint
    wait_screen(session, "1/8 passed", timeout=60)
    key("n")
    wait_screen(session, "This changes things on a host")
    assert "train_eagle3.py --demo" in dialog(screen(session)), screen(session)  # exactly what will be killed
    key("y")
    wait_screen(session, "2/8 passed")
    key("n")
    wait_screen(session, "This changes things on a host")
    assert "old_sglang_server.py" in dialog(screen(session)), screen(session)
    key("y")
    wait_screen(session, "3/8 passed")
    key("n")
    wait_screen(session, "4/8 passed")
    deadline = time.monotonic() + 10
    while "30000/143771M" in screen(session) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "30000/143771M" not in screen(session)  # the stale memory is gone from GPU 5
    key("n")
    wait_screen(session, "This changes things on a host")
    assert "layers.0.* to midlayer.*" in dialog(screen(session)), screen(session)
    key("y")
    wait_screen(session, "5/8 passed")
    key("n")  # the story's crash, refused before launch
    wait_screen(session, "is not an SGLang flag")
    shown = screen(session)
    # the fix whole (wrapped at 80 columns, never cut) and how to apply it
    assert "fix: --speculative-num-steps 16 --speculative-eagle-topk 1 --speculative-num-draft-tokens 17" in joined(shown), shown
    assert "press f" in shown
    key("f")
    wait_screen(session, "This changes things on a host")
    assert "--speculative-num-steps 16" in dialog(screen(session)), screen(session)
    key("y")
    wait_screen(session, "6/8 passed", timeout=30)
    key("n")
    wait_screen(session, "7/8 passed", timeout=60)
    key("n")
    wait_screen(session, "This changes things on a host")
    assert "Relaunch" in screen(session)
    key("y")
    shown = wait_screen(session, "sweep done", timeout=180)
    assert "Decision" in shown and re.search(r"d16 +\d\.\d\d +\d\.\d\d +\d\.\d\d", shown), shown  # each config, three numbers
    assert "gate closed" not in shown  # the sweep's own relaunches do not invalidate the gate it re-verifies
    shown = wait_screen(session, "8/8 passed", timeout=60)  # the recommended config left running, every step passed
    if not compact:
        every_size_keeps_the_floors(session, key)
    key("q")
    return shown


def every_size_keeps_the_floors(session: str, key) -> None:
    """Issue 50: every pane open (runs, server, bench, log), the window resized as a user's tmux does: at each size
    the GPU rows and the checklist's current step still show (a small terminal: the hosts one key away)."""
    for view in ("t", "l", "s", "b"):
        key(view)
        time.sleep(0.4)
    for width, height in ((100, 30), (130, 36), (80, 24), (160, 48)):
        tmux("resize-window", "-t", session, "-x", str(width), "-y", str(height))
        if width < 100:
            time.sleep(0.5)
            key("h")

        def floors(shown: str) -> list[str]:
            missing = []
            if len(re.findall(r"GPU \d ", shown)) < 2:
                missing.append("two GPU rows")
            if "8/8 passed" not in shown:
                missing.append("8/8 passed")
            if width >= 100 and not re.search(r"> \S+ \d\. [\w-]+ @", shown):
                missing.append("the selected step, marked")
            return missing

        # a loaded machine draws the new size's frame late (more than 1 s under CI's four workers): waited for, up to
        # 20 s; the frames themselves are the right size (tests/test_layout.py, no frame at a size the terminal lost)
        deadline = time.monotonic() + 20
        shown = screen(session)
        while floors(shown) and time.monotonic() < deadline:
            time.sleep(0.25)
            shown = screen(session)
        assert not floors(shown), (width, height, floors(shown), shown)
