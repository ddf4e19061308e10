"""The real TUI in a pseudo-terminal for the soaks and benchmarks: started, its output read and thrown away,
sampled from outside (RSS, CPU of the whole process, threads, open files), asked to quit."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time


class PtyTui:
    def __init__(self, args: list[str], size: tuple[int, int] = (160, 48), env: dict[str, str] | None = None):
        import psutil

        pid, fd = pty.fork()
        if pid == 0:
            os.environ.update({"TERM": "xterm-256color", **(env or {})})
            os.environ.pop("COLUMNS", None)
            os.environ.pop("LINES", None)
            os.execvp(sys.executable, [sys.executable, "-m", "cockpit", *args])
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", size[1], size[0], 0, 0))
        self.pid, self.fd = pid, fd
        self.proc = psutil.Process(pid)
        self.tail = bytearray()
        self._last = self.proc.cpu_times()
        self._last_at = time.monotonic()

    def drain(self, seconds: float) -> None:
        """Read (and drop) what it draws for `seconds`; raises if it exited."""
        import psutil

        until = time.monotonic() + seconds
        while time.monotonic() < until:
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    self.tail[:] = (self.tail + os.read(self.fd, 65536))[-4000:]
                except OSError:
                    return
        if self.proc.status() == psutil.STATUS_ZOMBIE:
            raise RuntimeError("the cockpit exited: " + self.tail.decode(errors="replace")[-1500:])

    def sample(self) -> dict:
        """RSS, the CPU share since the last sample (user + system of the whole process), threads and files."""
        now, at = self.proc.cpu_times(), time.monotonic()
        cpu = (now.user - self._last.user) + (now.system - self._last.system)
        share = 100 * cpu / max(1e-9, at - self._last_at)
        self._last, self._last_at = now, at
        return {"rss_mib": self.proc.memory_info().rss / 2**20, "cpu_pct": share, "threads": self.proc.num_threads(),
                "fds": self.proc.num_fds()}

    def stop(self) -> None:
        os.write(self.fd, b"q")
        self.drain(2)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(self.pid, 0)
