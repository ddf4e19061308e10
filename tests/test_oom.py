"""The kernel's word on an OOM kill (cockpit/hosts/oom.py): which counter each cgroup layout gives, and which kernel-log
lines count (the pid's, written since it was last seen alive).  The real kernel's kills are the endings matrix's
(tests/test_endings_matrix.py: a trainer outgrowing a real memory cgroup)."""

from __future__ import annotations

import itertools

from cockpit.hosts.oom import V1_ROOT, candidates, killed_in_log, oom_kills

V1 = "12:memory:/cockpit/train\n11:cpu,cpuacct:/cockpit/train\n0::/user.slice\n"
V2 = "0::/system.slice/train.scope\n"
ROOT = "4:memory:/\n0::/\n"


def test_each_cgroup_layout_names_its_counter():
    assert candidates(V1)[0] == ("/cockpit/train", f"{V1_ROOT}/cockpit/train/memory.oom_control")
    assert [c for _, c in candidates(V2)] == ["/sys/fs/cgroup/system.slice/train.scope/memory.events",
                                               "/sys/fs/cgroup/unified/system.slice/train.scope/memory.events"]
    assert candidates(ROOT) == []  # the root group counts the machine's kills, not this process's
    assert candidates("4:memory:/../../etc\n") == [] and candidates("garbage") == []


def test_the_counter_is_read_from_either_file():
    assert oom_kills("oom_kill_disable 0\nunder_oom 0\noom_kill 3\n") == 3
    assert oom_kills("low 0\nhigh 0\nmax 7\noom 2\noom_kill 1\noom_group_kill 0\n") == 1
    assert oom_kills("oom_kill_disable 0\n") is None


def test_a_kernel_line_counts_only_for_the_pid_and_only_since_it_was_seen():
    lines = {"memcg": "Memory cgroup out of memory: Killed process {pid} (python) total-vm:210840kB, anon-rss:195968kB",
             "global": "Out of memory: Killed process {pid} (python3) total-vm:1kB",
             "oomkill": "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,task=python,pid={pid},uid=0"}
    uptime = 5000.0
    for (kind, line), age, pid in itertools.product(lines.items(), (1.0, 30.0, 400.0), (41, 42)):
        text = f"{uptime:.2f} 100.0\n[ {uptime - age - 2:.6f}] something else\n[ {uptime - age:.6f}] {line.format(pid=pid)}\n"
        found = killed_in_log(text, frozenset({42}), within_s=60.0)
        if pid == 42 and age <= 60.0:
            assert found is not None and str(pid) in found, (kind, age, pid)
        else:
            assert found is None, (kind, age, pid)
    assert killed_in_log("not an uptime\n[ 1.0] Killed process 42 (x)\n", frozenset({42}), 60.0) is None
