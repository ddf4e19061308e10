"""One launch over several nodes, through a real loopback sshd per node address: each "node" is an
address of the sshd (127.0.0.x), its GPUs replayed by the stand-in nvidia-smi, its SGLang the
stand-in (tests/standin/sglang/multinode.py) that does a real TCP rendezvous at --dist-init-addr with
torch's real error texts.  The group starts, becomes ready and stops; a missing node, a dirty GPU, a
version mismatch and a missing draft refuse or fail naming the node; a rank killed after the start
turns the group failed."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cockpit.config import parse_config
from cockpit.context import Context, check_config
from cockpit.errors import ConfigError
from cockpit.hosts.procs import group_of, process_alive
from cockpit.runbook.model import StepState
from cockpit.sglang.group import group_argv
from harness.sshd import SshdHarness, free_port
from harness.tools import need

from drafter_files import write_draft


def addresses(n: int) -> list[str]:
    return [f"127.0.0.{i + 1}" for i in range(n)]


@pytest.fixture
def nodes4(tmp_path):
    need("sshd")  # skipped with the one line every sshd test gives where sshd cannot be had
    harness = SshdHarness(tmp_path / "sshd", addresses=addresses(4)).start()
    for address in addresses(4):
        harness.scenario({"gpus": 8}, address=address)
    yield harness
    harness.stop()


def config_text(sshd, n: int, tmp_path, *, draft=None, extra_hosts: str = "", gated=True, dist_timeout=4, python=None,
                skip_gate=False) -> str:
    if draft is None:  # a real draft every node reads (the nodes share this machine's disk)
        draft = str(write_draft(tmp_path / "draft", "midlayer"))
    hosts = "".join(sshd.host_toml(f"node{i}", address=a, **({"python": python[i]} if python and python.get(i) else {}))
                    for i, a in enumerate(addresses(n)))
    names = json.dumps([f"node{i}" for i in range(n)])
    port, dist = free_port(), free_port()
    steps = f"""
[runbook]
name = "group-{n}"

[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
hosts = {names}
expect_gpus = 8

[[runbook.steps]]
name = "launch"
kind = "sglang_launch"
hosts = {names}
model_path = "/models/Kimi-K2.5"
draft_path = "{draft}"
depth = 3
tp = {8 * n}
port = {port}
dist_init_port = {dist}
dist_timeout = {dist_timeout}
gated = {str(gated).lower()}
log = "{tmp_path}/sglang-group.log"
settle_s = 0.5
join_timeout_s = 20

[[runbook.steps]]
name = "ready"
kind = "sglang_ready"
host = "node0"
timeout_s = 30
poll_s = 0.3
"""
    return sshd.config_toml(hosts + extra_hosts) + steps


def logs_of(tmp_path) -> str:
    """Every node's log (each node writes its own: sglang-group-rankN.log)."""
    return "".join(p.read_text() for p in sorted(tmp_path.glob("sglang-group*.log")))


async def run_steps(ctx, *names):
    async def yes(_text):
        return True

    results = []
    for name in names:
        results.append(await ctx.runbook.run_step(name, yes))
    return results


@pytest.mark.parametrize("n", [2, 4])
def test_a_group_starts_gated_becomes_ready_and_stops(tmp_path, nodes4, n):
    ctx = Context.of(parse_config(config_text(nodes4, n, tmp_path), str(tmp_path / "c.toml")))

    async def go():
        try:
            clean, launch, ready = await run_steps(ctx, "clean", "launch", "ready")
            assert clean.state is StepState.PASSED, clean.message
            assert launch.state is StepState.PASSED, (launch.message, logs_of(tmp_path)[-3000:])
            members = group_of(launch.evidence)
            assert [m.host for m in members] == [f"node{i}" for i in range(n)] and len({m.pid for m in members}) == n
            # one command per node: only --node-rank differs, --dist-init-addr is rank 0's
            argvs = [m.argv for m in members]
            ranks = [a[a.index("--node-rank") + 1] for a in argvs]
            assert ranks == [str(i) for i in range(n)]
            assert {a[a.index("--dist-init-addr") + 1] for a in argvs} == {f"127.0.0.1:{ctx.runbook.spec.step('launch').params['dist_init_port']}"}
            assert launch.evidence["activated"] is True and "--gated-launch-port" in argvs[0]  # 0.5.23: the gated launch
            log = logs_of(tmp_path)
            assert log.count("Gated launch waiting for activation") == n and "Gated launch activated" in log
            assert ready.state is StepState.PASSED, (ready.message, log[-3000:])
            assert "ready" in ready.message and [node["state"] for node in ready.evidence["group_state"]["nodes"]] == ["ready"] * n
            said = await ctx.runbook.stop_server("launch", lambda _t: asyncio.sleep(0, True))
            assert said.count("stopped pid") == n
            for member in members:
                assert not await process_alive(ctx.pool.get(member.host), member.pid)
        finally:
            await ctx.close()

    asyncio.run(go())


def test_a_dirty_gpu_on_rank_2_refuses_naming_the_node(tmp_path, nodes4):
    nodes4.scenario({"gpus": 8, "processes": [{"pid": 4242, "gpu": 3, "used_memory": 30000, "name": "python3"}]},
                    address="127.0.0.3")
    ctx = Context.of(parse_config(config_text(nodes4, 4, tmp_path), str(tmp_path / "c.toml")))

    async def go():
        try:
            clean = (await run_steps(ctx, "clean"))[0]
            assert clean.state is StepState.FAILED and "node2" in clean.message and "GPU 3" in clean.message
            from cockpit.runbook.engine import GateClosed

            with pytest.raises(GateClosed) as refused:
                await run_steps(ctx, "launch")
            assert any("node2" in r for r in refused.value.reasons)
            assert logs_of(tmp_path) == ""  # nothing started anywhere
        finally:
            await ctx.close()

    asyncio.run(go())


def test_a_version_mismatch_refuses_naming_the_node(tmp_path, nodes4):
    old = tmp_path / "python-old"
    old.write_text("#!/bin/sh\nSGLANG_STANDIN_VERSION=0.5.10 exec python3 \"$@\"\n")
    old.chmod(0o755)
    ctx = Context.of(parse_config(config_text(nodes4, 2, tmp_path, python={1: str(old)}), str(tmp_path / "c.toml")))

    async def go():
        try:
            clean, launch = await run_steps(ctx, "clean", "launch")
            assert launch.state is StepState.FAILED
            assert "SGLang differs across the group" in launch.message and "node1 runs 0.5.10" in launch.message
            assert logs_of(tmp_path) == ""
        finally:
            await ctx.close()

    asyncio.run(go())


def test_a_draft_missing_refuses_naming_the_node(tmp_path, nodes4):
    """Every node loads the draft from its own path: it is read there (header-only, over SFTP) before
    anything starts.  (The test's nodes share one disk, so the path is missing on all of them: rank 0
    is named first.)"""
    ctx = Context.of(parse_config(config_text(nodes4, 2, tmp_path, draft=str(tmp_path / "nowhere")), str(tmp_path / "c.toml")))

    async def go():
        try:
            clean, launch = await run_steps(ctx, "clean", "launch")
            assert launch.state is StepState.FAILED and "rank 0 (node0)" in launch.message and "nowhere" in launch.message
            assert logs_of(tmp_path) == ""
        finally:
            await ctx.close()

    asyncio.run(go())


def test_an_unreachable_node_refuses_naming_it(tmp_path, nodes4):
    """node1's address has no sshd: its GPUs cannot be verified, so the group does not start."""
    text = config_text(nodes4, 2, tmp_path).replace('address = "127.0.0.2"', 'address = "127.0.0.99"')
    ctx = Context.of(parse_config(text, str(tmp_path / "c.toml")))

    async def go():
        try:
            clean = (await run_steps(ctx, "clean"))[0]
            assert clean.state is StepState.FAILED and "could not verify node1" in clean.message
            from cockpit.runbook.engine import GateClosed

            with pytest.raises(GateClosed) as refused:
                await run_steps(ctx, "launch")
            assert any("node1" in r for r in refused.value.reasons) and logs_of(tmp_path) == ""
        finally:
            await ctx.close()

    asyncio.run(go())


def test_a_missing_node_fails_the_rendezvous_and_is_named(tmp_path, nodes4):
    """Rank 1 never reaches the rendezvous (stuck before it, as a node on a hung filesystem is): rank 0
    times out with torch's text, the group says which node never joined, and no rank is left running."""
    ctx = Context.of(parse_config(config_text(nodes4, 2, tmp_path, gated=False, dist_timeout=2), str(tmp_path / "c.toml")))
    ctx.runbook.spec.step("launch").params["env"] = {"SGLANG_STANDIN_NO_JOIN": "1"}

    async def go():
        try:
            clean, launch = await run_steps(ctx, "clean", "launch")
            if launch.state is StepState.PASSED:  # still waiting at the end of settle_s: the ready step sees it fail
                ready = (await run_steps(ctx, "ready"))[0]
                result = ready
            else:
                result = launch
            assert result.state is StepState.FAILED, result.message
            assert "rank 1 (node1) never joined" in result.message and "clients joined" in result.message
            for member in group_of(launch.evidence):
                assert not await process_alive(ctx.pool.get(member.host), member.pid)  # no half-up group left
        finally:
            await ctx.close()

    asyncio.run(go())


def test_a_rank_killed_after_start_turns_the_group_failed(tmp_path, nodes4):
    text = config_text(nodes4, 2, tmp_path, gated=False)
    (tmp_path / "c.toml").write_text(text)
    ctx = Context.of(parse_config(text, str(tmp_path / "c.toml")))

    async def go():
        try:
            clean, launch, ready = await run_steps(ctx, "clean", "launch", "ready")
            assert ready.state is StepState.PASSED, (ready.message, logs_of(tmp_path)[-2000:])
            members = group_of(launch.evidence)
            os.kill(members[1].pid, 9)
            from cockpit.sglang.grouplaunch import GroupWatcher

            watcher = GroupWatcher(ctx.pool.get, members)
            deadline = time.monotonic() + 15
            while True:
                state = await watcher.poll()
                if state.state == "failed" or time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.3)
            assert state.state == "failed" and "rank 1 (node1)" in state.cause and "exited" in state.cause
            assert await process_alive(ctx.pool.get("node0"), members[0].pid)  # rank 0 does not exit by itself...
            shown = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "cockpit", "server", "launch", "--json", "-c",
                                                             str(tmp_path / "c.toml")], capture_output=True, text=True, timeout=60)
            assert shown.returncode == 1, shown.stderr
            out = json.loads(shown.stdout)
            assert out["group"]["state"] == "failed" and "group_failed" in [f["kind"] for f in out["flags"]]
            said = await ctx.runbook.stop_server("launch", lambda _t: asyncio.sleep(0, True))
            assert "stopped pid" in said and not await process_alive(ctx.pool.get("node0"), members[0].pid)  # ...the cockpit stops it
        finally:
            await ctx.close()

    asyncio.run(go())


@pytest.mark.parametrize("steps, message", [
    ('hosts = ["node0", "node0"]', "'node0' is in the group twice"),
    ('hosts = ["node0", "nodeX"]', "no host named 'nodeX'"),
    ('hosts = ["node0", "node1"]\nnnodes = 3', "nnodes is 3 but the group has 2 hosts"),
    ('hosts = ["node0", "node1"]\ndist_init_addr = "10.9.9.9:20000"', "is not rank 0's address"),
    ('hosts = ["node0", "node1"]\ndist_init_addr = "127.0.0.1"', "must be host:port"),
    ('host = "node0"\nhosts = ["node0", "node1"]', "not both"),
    ('hosts = ["node0", "node1"]\ntp = 9', "must be divisible by the 2 nodes"),
    ('hosts = ["node0", "node1"]\nextra_args = ["--node-rank", "1"]', "the group sets them per node"),
])
def test_config_check_refuses_bad_groups(tmp_path, steps, message):
    text = ('[hosts.node0]\naddress = "127.0.0.1"\n\n[hosts.node1]\naddress = "127.0.0.2"\n\n[runbook]\nname = "g"\n\n'
            f'[[runbook.steps]]\nname = "launch"\nkind = "sglang_launch"\n{steps}\nmodel_path = "/m"\n')
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as refused:
        check_config(parse_config(text, str(path)))
    assert message in str(refused.value)
    result = subprocess.run([sys.executable, "-m", "cockpit", "config", "check", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_group_argv_replaces_group_flags_and_keeps_the_rest():
    base = ["python3", "-m", "sglang.launch_server", "--model-path", "M", "--nnodes", "9", "--node-rank=4", "--tp", "16"]
    argv = group_argv(base, 2, 1, "10.0.0.1:20000", gated_port=21000, dist_timeout=300)
    assert argv == ["python3", "-m", "sglang.launch_server", "--model-path", "M", "--tp", "16", "--nnodes", "2", "--node-rank", "1",
                    "--dist-init-addr", "10.0.0.1:20000", "--dist-timeout", "300", "--gated-launch-port", "21000"]


def slurm_standins(tmp_path: Path) -> Path:
    """Stand-ins for Slurm's scontrol and srun and for curl (no Slurm here): srun starts the command once per task, each
    with its SLURM_PROCID, as Slurm does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text("#!/bin/sh\nprintf 'gpu-a\\ngpu-b\\n'\n")
    (bin_dir / "curl").write_text("#!/bin/sh\nexit 0\n")
    (bin_dir / "srun").write_text('#!/bin/bash\nn=1\nwhile [[ "$1" == --* ]]; do case "$1" in --ntasks=*) n="${1#--ntasks=}";; esac; '
                                  'shift; done\nfor ((i=0; i<n; i++)); do SLURM_PROCID=$i "$@" & done\nwait\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    return bin_dir


def test_plan_emit_slurm_gives_each_task_its_own_rank(tmp_path):
    """The sbatch script run by bash with stand-ins for srun/scontrol/curl (no Slurm here): each task
    gets its own --node-rank from its own $SLURM_PROCID, the same command otherwise."""
    sample = Path(__file__).resolve().parent.parent / "cockpit" / "sample_configs" / "two-node.toml"
    record = tmp_path / "record.sh"
    record.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/task-$SLURM_PROCID.argv\n')
    record.chmod(0o755)
    result = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "slurm", "--python", str(record),
                             "-c", str(sample)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    script = result.stdout
    assert "SLURM_NODEID" not in script and "#SBATCH --nodes=2" in script and "--gres=gpu:8" in script
    bin_dir = slurm_standins(tmp_path)
    (tmp_path / "job.sh").write_text(script)
    ran = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "gpu-[a-b]"})
    assert ran.returncode == 0, ran.stderr
    tasks = [(tmp_path / f"task-{i}.argv").read_text().split() for i in range(2)]
    assert [t[t.index("--node-rank") + 1] for t in tasks] == ["0", "1"]
    assert all(t[t.index("--dist-init-addr") + 1] == "gpu-a:20000" for t in tasks)
    assert tasks[0][:tasks[0].index("--node-rank")] == tasks[1][:tasks[1].index("--node-rank")]  # the same command otherwise
    assert "ready on gpu-a:30000" in ran.stdout


def test_plan_emit_lws_and_a_single_host_step(tmp_path):
    import re

    sample = Path(__file__).resolve().parent.parent / "cockpit" / "sample_configs" / "two-node.toml"
    result = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "lws", "-c", str(sample)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    commands = [json.loads(m) for m in re.findall(r"command: (\[.*\])", result.stdout)]
    assert len(commands) == 2 and all("$(LWS_WORKER_INDEX)" in c and "$(LWS_LEADER_ADDRESS):20000" in c for c in commands)
    assert "size: 2" in result.stdout and "path: /health_generate" in result.stdout
    single = tmp_path / "one.toml"
    single.write_text('[hosts.h]\naddress = "10.0.0.1"\n\n[runbook]\nname = "x"\n\n[[runbook.steps]]\nname = "launch"\n'
                      'kind = "sglang_launch"\nhost = "h"\nmodel_path = "/m"\n')
    refused = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "slurm", "-c", str(single)],
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "launches on one host" in refused.stderr and "Traceback" not in refused.stderr


def test_a_sweep_relaunches_the_whole_group_per_config(tmp_path, nodes4):
    """The depth sweep against a group: each config relaunches every node (the old group stopped),
    benchmarks rank 0, and leaves the recommended config running on both nodes."""
    scenario = json.dumps(json.dumps({"load_s": 0.05, "warmup_s": 0.1, "ttft_ms": 5, "itl_ms": 2}))
    text = config_text(nodes4, 2, tmp_path, gated=False).replace('settle_s = 0.5', f'settle_s = 0.5\nenv = {{ SGLANG_STANDIN = {scenario} }}')
    text += ('\n[[runbook.steps]]\nname = "sweep"\nkind = "bench_sweep"\nhost = "node0"\n\n[bench]\nlaunch_step = "launch"\n'
             'depths = [2, 3]\nconcurrency = [1]\nrequests = 2\nmax_tokens = 8\nrepeats = 1\nbaseline = false\nafter = "recommended"\n')
    ctx = Context.of(parse_config(text, str(tmp_path / "c.toml")))

    async def go():
        try:
            results = await run_steps(ctx, "clean", "launch", "ready")
            assert all(r.state is StepState.PASSED for r in results), [r.message for r in results]
            first = {m.pid for m in group_of(results[1].evidence)}
            sweep = (await run_steps(ctx, "sweep"))[0]
            assert sweep.state is StepState.PASSED, (sweep.message, sweep.evidence.get("failures"))
            rows = sweep.evidence["rows"]
            assert sorted(r["steps"] for r in rows) == [2, 3] and all(r["failed"] == 0 for r in rows)
            now = group_of(ctx.runbook.result("launch").evidence)
            assert len(now) == 2 and not first & {m.pid for m in now}  # a new group: both nodes relaunched
            for member in now:
                assert await process_alive(ctx.pool.get(member.host), member.pid)
            for pid in first:
                assert not await process_alive(ctx.pool.get("node0"), pid)  # the old ranks are gone (one machine here)
            await ctx.runbook.stop_server("launch", lambda _t: asyncio.sleep(0, True))
        finally:
            await ctx.close()

    asyncio.run(go())


def test_a_busy_rendezvous_port_on_rank_0_refuses(tmp_path, nodes4):
    import socket

    text = config_text(nodes4, 2, tmp_path)
    ctx = Context.of(parse_config(text, str(tmp_path / "c.toml")))
    port = ctx.runbook.spec.step("launch").params["dist_init_port"]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", port))
        busy.listen()

        async def go():
            try:
                clean, launch = await run_steps(ctx, "clean", "launch")
                assert launch.state is StepState.FAILED and f"rendezvous port {port} on node0 is in use" in launch.message
                assert logs_of(tmp_path) == ""
            finally:
                await ctx.close()

        asyncio.run(go())


VLLM_TWO_NODES = """[hosts.gpu-a]
address = "10.0.0.1"
[hosts.gpu-b]
address = "10.0.0.2"

[runbook]
name = "vllm-dp"

[[runbook.steps]]
name = "launch"
kind = "serve_launch"
engine = "vllm"
vllm_version = "{version}"
hosts = ["gpu-a", "gpu-b"]
model_path = "/models/Llama-3.3-70B-Instruct"
draft_path = "/ckpt/eagle3"
depth = 3
tp = 2
"""


def test_vllm_over_two_nodes_is_handed_to_slurm_as_data_parallel_with_headless_workers(tmp_path):
    """Issue 39 class 6 (the hand-off): node 0 serves, node 1 runs headless engines from its own data-parallel rank; the
    sbatch script run by bash with stand-ins for srun/scontrol/curl (no Slurm here).  The cockpit's own launch of a vLLM
    group over SSH is not built, and `plan run` says so naming the hand-off."""
    config = tmp_path / "c.toml"
    config.write_text(VLLM_TWO_NODES.format(version="0.10.2"))
    record = tmp_path / "record.sh"
    record.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/task-$SLURM_PROCID.argv\n')
    record.chmod(0o755)
    result = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "slurm", "--python", str(record),
                             "-c", str(config)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    bin_dir = slurm_standins(tmp_path)
    (tmp_path / "job.sh").write_text(result.stdout)
    ran = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "gpu-[a-b]"})
    assert ran.returncode == 0, ran.stderr
    head, worker = [(tmp_path / f"task-{i}.argv").read_text().split() for i in range(2)]

    def flag(words, name):
        return words[words.index(name) + 1]

    assert "--headless" not in head and "--headless" in worker
    for words in (head, worker):
        assert (flag(words, "--data-parallel-size"), flag(words, "--data-parallel-size-local")) == ("8", "4")  # 8 GPUs / TP 2
        assert flag(words, "--data-parallel-address") == "gpu-a" and flag(words, "--tensor-parallel-size") == "2"
        assert "--speculative-config" in words
    assert "--data-parallel-start-rank" not in head and flag(worker, "--data-parallel-start-rank") == "4"
    lws = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "lws", "-c", str(config)],
                         capture_output=True, text=True, timeout=60)
    assert lws.returncode == 0 and "--headless" in lws.stdout and "$(( LWS_WORKER_INDEX * 4 ))" in lws.stdout
    assert "vllm/vllm-openai" in lws.stdout
    refused = subprocess.run([sys.executable, "-m", "cockpit", "plan", "run", "launch", "--yes", "--force", "launch", "--reason", "t",
                              "-c", str(config)], capture_output=True, text=True, timeout=120)
    assert refused.returncode != 0 and "plan emit launch --format slurm|lws" in refused.stdout + refused.stderr
    old = tmp_path / "old.toml"
    old.write_text(VLLM_TWO_NODES.format(version="0.8.5"))  # its recorded parser (0.8.5.post1) has no --headless
    too_old = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "slurm", "-c", str(old)], capture_output=True,
                             text=True, timeout=60)
    assert too_old.returncode == 2 and "--headless" in too_old.stderr and "Traceback" not in too_old.stderr
