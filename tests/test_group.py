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
            from cockpit.serving.engines import engine
            from cockpit.serving.group import watcher as group_watcher

            watcher = group_watcher(engine("vllm" if "vllm" in str(members[0].argv) else "sglang").group, ctx.pool.get, members)
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
    sbatch script run by bash with stand-ins for srun/scontrol/curl (no Slurm here)."""
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
    assert lws.returncode == 0 and "--headless" in lws.stdout and "$(( $LWS_WORKER_INDEX * 4 ))" in lws.stdout
    assert "vllm/vllm-openai" in lws.stdout
    old = tmp_path / "old.toml"
    old.write_text(VLLM_TWO_NODES.format(version="0.8.5"))  # its recorded parser (0.8.5.post1) has no --headless
    too_old = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "slurm", "-c", str(old)], capture_output=True,
                             text=True, timeout=60)
    assert too_old.returncode == 2 and "--headless" in too_old.stderr and "Traceback" not in too_old.stderr


# --- vLLM's own group over SSH: data parallel, gated per node ------------------------------------------------------

def vllm_group_config(sshd, tmp_path, n: int = 2, *, env: dict | None = None, dist_init_addr: str | None = None,
                      version: str | None = None, parallel: str | None = None, extra: list[str] | None = None, tp: int = 4) -> str:
    """Each node a loopback address of the real sshd, its GPUs the stand-in nvidia-smi's, its vLLM the demo's STAND-IN
    (cockpit/demo/vllm_server.py: 0.10.2's --help and lines, or `version`'s recorded --help; a real TCP handshake of
    the headless engines with the head)."""
    from cockpit.demo.world import serving_python

    python = serving_python(tmp_path / "world", sys.executable)
    if version:  # the stand-in replays another recorded version's --help and says it is that version
        wrapper = tmp_path / f"python-vllm-{version}"
        help_gz = Path(__file__).parent / "fixtures" / "vllm" / "versions" / version / "help.txt.gz"
        wrapper.write_text(f"#!/bin/sh\nexport VLLM_STANDIN_VERSION={version} VLLM_STANDIN_HELP={help_gz}\nexec {python} \"$@\"\n")
        wrapper.chmod(0o755)
        python = str(wrapper)
    hosts = "".join(sshd.host_toml(f"node{i}", address=a, python=python) for i, a in enumerate(addresses(n)))
    names = json.dumps([f"node{i}" for i in range(n)])
    draft = write_draft(tmp_path / "draft", "midlayer")
    env_toml = "env = {" + ", ".join(f'{k} = "{v}"' for k, v in (env or {}).items()) + "}\n" if env else ""
    addr = f'dist_init_addr = "{dist_init_addr}"\n' if dist_init_addr else ""
    addr += f'parallel = "{parallel}"\n' if parallel else ""
    addr += f"extra_args = {json.dumps(extra)}\n" if extra else ""
    return sshd.config_toml(hosts) + f"""
[runbook]
name = "vllm-dp-{n}"

[[runbook.steps]]
name = "clean"
kind = "gpu_clean"
hosts = {names}
expect_gpus = 8

[[runbook.steps]]
name = "launch"
kind = "serve_launch"
engine = "vllm"
hosts = {names}
model_path = "/models/Llama-3.3-70B-Instruct"
draft_path = "{draft}"
depth = 3
tp = {tp}
port = {free_port()}
dist_init_port = {free_port()}
log = "{tmp_path}/vllm-group.log"
settle_s = 0.5
{env_toml}{addr}
[[runbook.steps]]
name = "ready"
kind = "serve_ready"
host = "node0"
timeout_s = 30
poll_s = 0.3
"""


async def stop_what_launched(ctx, step: str = "launch") -> None:
    """Whatever the step started, stopped (a failed assertion must not leave a group running after the test)."""
    from cockpit.hosts.procs import stop_process

    result = ctx.runbook.result(step)
    for member in group_of(result.evidence if result is not None else None):
        try:
            transport = ctx.pool.get(member.host)
            if await process_alive(transport, member.pid):
                await stop_process(transport, member.pid)
        except Exception:  # noqa: BLE001 - best effort: the test's own failure is the one to see
            pass


def refused_launch(ctx, folder) -> str:
    """Clean, then launch: the launch refused before any node started (no node's log in `folder`); its message."""
    async def go():
        try:
            _clean, launch = await run_steps(ctx, "clean", "launch")
            return launch
        finally:
            await stop_what_launched(ctx)
            await ctx.close()

    launch = asyncio.run(go())
    assert launch.state is StepState.FAILED, launch.message
    assert not list(folder.glob("vllm-group*.log")), "a node was started"
    return launch.message


def vllm_logs(tmp_path) -> str:
    return "".join(p.read_text() for p in sorted(tmp_path.glob("vllm-group*.log")))


def test_a_vllm_group_starts_head_first_becomes_ready_and_a_dead_node_fails_it(tmp_path, nodes4):
    """Issue 39 class 6: vLLM data parallel over two nodes launched by the cockpit over SSH: the head serves, node 1 runs
    headless engines from its own data-parallel rank (8 GPUs / tp 4 = 2 ranks a node, 4 in all); ready when the head's
    /health answers (its API server starts only after every engine shook hands) and node 1's engines are up; a node
    killed afterwards turns the group failed, naming it."""
    from cockpit.serving.engines import engine
    from cockpit.serving.group import watcher as group_watcher

    ctx = Context.of(parse_config(vllm_group_config(nodes4, tmp_path), str(tmp_path / "c.toml")))

    async def go():
        try:
            clean, launch, ready = await run_steps(ctx, "clean", "launch", "ready")
            assert clean.state is StepState.PASSED, clean.message
            assert launch.state is StepState.PASSED, (launch.message, vllm_logs(tmp_path)[-3000:])
            head, node1 = members = group_of(launch.evidence)
            assert [m.host for m in members] == ["node0", "node1"] and launch.evidence["vllm"] == "0.10.2"

            def flag(words, name):
                return words[words.index(name) + 1]

            assert "--headless" not in head.argv and "--headless" in node1.argv
            for m in members:
                assert (flag(m.argv, "--data-parallel-size"), flag(m.argv, "--data-parallel-size-local")) == ("4", "2")
                assert flag(m.argv, "--data-parallel-address") == "127.0.0.1"
            assert flag(node1.argv, "--data-parallel-start-rank") == "2" and launch.evidence["dp_ranks"] == [2, 2]
            assert ready.state is StepState.PASSED, (ready.message, vllm_logs(tmp_path)[-3000:])
            assert "/health 200" in ready.message
            assert [n["state"] for n in ready.evidence["group_state"]["nodes"]] == ["ready", "ready"]
            log = vllm_logs(tmp_path)
            assert "Launching 2 data parallel engine(s) in headless mode" in log and "Application startup complete" in log
            # node 1 dies: the head does not exit, the group is failed, naming the node
            os.kill(node1.pid, 9)
            watcher = group_watcher(engine("vllm" if "vllm" in str(members[0].argv) else "sglang").group, ctx.pool.get, members)
            for _ in range(50):
                state = await watcher.poll()
                if state.state == "failed":
                    break
                await asyncio.sleep(0.1)
            assert state.state == "failed" and "rank 1 (node1): its process exited while ready" in state.cause
            said = await ctx.runbook.stop_server("launch", lambda _t: asyncio.sleep(0, True))
            assert "stopped pid" in said
            assert not await process_alive(ctx.pool.get("node0"), head.pid)
        finally:
            await stop_what_launched(ctx)
            await ctx.close()

    asyncio.run(go())


def test_a_vllm_node_dirty_at_its_own_start_stops_the_nodes_started_before_it(tmp_path, nodes4):
    """Gated per node: the launch gate passed on both nodes, then (while the plan waited for its confirmation) a process
    took memory on node 1; right before node 1's own start its GPUs are sampled again: refused naming it, and the head
    already started is stopped (no half-up group)."""
    ctx = Context.of(parse_config(vllm_group_config(nodes4, tmp_path), str(tmp_path / "c.toml")))

    async def dirty_then_yes(_text):
        nodes4.scenario({"gpus": 8, "processes": [{"pid": 4242, "gpu": 3, "used_memory": 30000, "name": "python3"}]},
                        address=addresses(2)[1])
        return True

    async def go():
        try:
            [clean] = await run_steps(ctx, "clean")
            assert clean.state is StepState.PASSED, clean.message
            launch = await ctx.runbook.run_step("launch", dirty_then_yes)
            assert launch.state is StepState.FAILED
            assert "rank 1 (node1) is not clean at its start" in launch.message and "30000" in launch.message, launch.message
            assert "the nodes started before it were stopped" in launch.message
            [head] = group_of(launch.evidence)
            assert head.host == "node0" and not await process_alive(ctx.pool.get("node0"), head.pid)
            assert not list(tmp_path.glob("vllm-group-rank1.log"))  # node 1 never started
        finally:
            await stop_what_launched(ctx)
            await ctx.close()

    asyncio.run(go())


def test_a_headless_vllm_node_that_never_hears_from_the_head_is_named_and_the_group_stopped(tmp_path, nodes4):
    """The head's handshake port cannot be reached (a firewall, in the stand-in): node 1 gives up with vLLM's own error;
    readiness fails naming node 1 and the head, and stops every node."""
    config = vllm_group_config(nodes4, tmp_path, env={"VLLM_STANDIN_FIREWALLED": "1", "VLLM_STANDIN_HANDSHAKE_S": "1.5"})
    ctx = Context.of(parse_config(config, str(tmp_path / "c.toml")))

    async def go():
        try:
            clean, launch, ready = await run_steps(ctx, "clean", "launch", "ready")
            assert launch.state is StepState.PASSED, (launch.message, vllm_logs(tmp_path)[-3000:])
            assert ready.state is StepState.FAILED and ready.evidence["stopped"] is True
            assert "rank 1 (node1) never heard from the head (node0:" in ready.message and "within 5 minutes" in ready.message
            assert "--data-parallel-rpc-port" in ready.message
            for member in group_of(launch.evidence):
                assert not await process_alive(ctx.pool.get(member.host), member.pid)
        finally:
            await stop_what_launched(ctx)
            await ctx.close()

    asyncio.run(go())


HEAD = "\x1b[1;36m(APIServer pid=7)\x1b[0;0m INFO 12-06 10:00:00 [{where}] {text}"
ENGINE = "\x1b[1;36m(EngineCore_DP{rank} pid=9)\x1b[0;0m {level} 12-06 10:00:00 [{where}] {text}"


@pytest.mark.parametrize("rank, lines, state, failure", [
    # a headless node: launched, waiting for the head's handshake, loading, its engines up one by one
    (1, ["INFO 12-06 10:00:00 [serve.py:177] Launching 2 data parallel engine(s) in headless mode, with head node address "
            "tcp://10.0.0.1:13345."], "waiting for head", None),
    (1, [ENGINE.format(rank=2, level="INFO", where="default_loader.py:267", text="Loading weights took 41.20 seconds")],
     "loading", None),
    # vLLM logs it once per node (info_once, its first local rank): the first is the node's engines up
    (1, [ENGINE.format(rank=2, level="INFO", where="core.py:214", text="init engine (profile, create kv cache, warmup model) took "
                          "30.1 seconds")], "ready", None),
    # the head: its own engines up is not ready; its API server's start is (every engine shook hands by then)
    (0, [ENGINE.format(rank=0, level="INFO", where="core.py:214", text="init engine (profile, create kv cache, warmup model) took "
                          "30.1 seconds")], "engines up", None),
    (0, ["INFO:     Application startup complete."], "ready", None),
    # failures: the specific cause after vLLM's generic "failed to start"
    (1, [ENGINE.format(rank=2, level="ERROR", where="core.py:726", text="EngineCore failed to start."),
            "RuntimeError: Did not receive response from front-end process within 5 minutes"], "starting", "head_unreachable"),
    (0, [ENGINE.format(rank=0, level="ERROR", where="core.py:726", text="EngineCore failed to start."),
            "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which "
            "is larger than the available KV cache memory (9.50 GiB)."], "starting", "kv_cache"),
    (0, [HEAD.format(where="launcher.py:101", text="RuntimeError: Engine core initialization failed. See root cause above. "
                        "Failed core proc(s): {'EngineCore_DP1': 1}")], "starting", "engine_failed"),
    (1, ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."], "starting", "oom"),
])
def test_a_vllm_node_reads_its_own_lines(rank, lines, state, failure):
    from cockpit.vllm.group import node_state

    node = node_state(rank, "node", lines, alive=True)
    assert (node.state, node.failure) == (state, failure)


def test_a_vllm_group_names_the_root_cause_and_its_fix():
    from cockpit.vllm.group import group_state, node_state

    head = node_state(0, "gpu-a", ["INFO 12-06 [utils.py:1279] Started DP Coordinator process (PID: 8)"], alive=True)
    dead = node_state(1, "gpu-b", [], alive=False)
    late = node_state(2, "gpu-c", ["RuntimeError: Did not receive response from front-end process within 5 minutes"], alive=True)
    assert group_state([head, dead, late]).cause == "rank 1 (gpu-b): its process exited while starting; its log tells why"
    kv = node_state(0, "gpu-a", ["ValueError: To serve at least one request with the model's max seq len (8192), (1.0 GiB KV cache "
                                 "is needed, which is larger than the available KV cache memory (0.5 GiB)."], alive=True)
    said = group_state([kv, late]).cause
    assert said.startswith("the head, rank 0 (gpu-a) ran out of GPU memory") and "--max-model-len" in said


def test_config_check_refuses_data_parallel_flags_a_vllm_group_sets(tmp_path):
    text = VLLM_TWO_NODES.format(version="0.10.2") + 'extra_args = ["--headless", "--data-parallel-size", "4"]\n'
    with pytest.raises(ConfigError, match="must not set --data-parallel-size, --headless"):
        check_config(parse_config(text, str(tmp_path / "c.toml")))
    short = VLLM_TWO_NODES.format(version="0.10.2") + 'extra_args = ["-dpl", "2"]\n'  # vLLM's short name for one of them
    with pytest.raises(ConfigError, match="must not set -dpl"):
        check_config(parse_config(short, str(tmp_path / "c.toml")))
    model = VLLM_TWO_NODES.format(version="0.34.0").replace("tp = 2", "tp = 3") + 'parallel = "model"\n'
    with pytest.raises(ConfigError, match="tensor x pipeline parallel is 3, which the 2 nodes cannot share evenly"):
        check_config(parse_config(model, str(tmp_path / "c.toml")))


def test_one_vllm_model_over_two_nodes_tensor_x_pipeline_parallel(tmp_path, nodes4):
    """parallel = "model": one model over the nodes without Ray (vLLM 0.11 on: --nnodes/--node-rank/--master-addr, the
    others --headless), here tp 8 x pp 2 over two 8-GPU nodes, as vLLM 0.34.0's recorded flags take it; the workers join
    torch.distributed at the head; ready on the head's /health.  The same step on 0.10.2 (no --nnodes) is refused."""
    config = vllm_group_config(nodes4, tmp_path, version="0.34.0", parallel="model", tp=8, extra=["--pipeline-parallel-size", "2"])
    ctx = Context.of(parse_config(config, str(tmp_path / "c.toml")))

    async def go():
        try:
            clean, launch, ready = await run_steps(ctx, "clean", "launch", "ready")
            assert launch.state is StepState.PASSED, (launch.message, vllm_logs(tmp_path)[-3000:])
            head, node1 = group_of(launch.evidence)
            assert launch.evidence["vllm"] == "0.34.0" and launch.evidence["gpus_per_node"] == [8, 8]
            for rank, m in enumerate((head, node1)):
                words = list(m.argv)
                assert words[words.index("--node-rank") + 1] == str(rank) and words[words.index("--nnodes") + 1] == "2"
                assert ("--headless" in words) == (rank == 1) and "--data-parallel-size" not in words
            assert ready.state is StepState.PASSED, (ready.message, vllm_logs(tmp_path)[-3000:])
            assert "headless multiproc executor" in vllm_logs(tmp_path)
            await ctx.runbook.stop_server("launch", lambda _t: asyncio.sleep(0, True))
        finally:
            await stop_what_launched(ctx)
            await ctx.close()

    asyncio.run(go())
    old = vllm_group_config(nodes4, tmp_path / "old", parallel="model", tp=8, extra=["--pipeline-parallel-size", "2"])
    said = refused_launch(Context.of(parse_config(old, str(tmp_path / "old.toml"))), tmp_path / "old")
    assert "vLLM 0.10.2 on node0 has no --nnodes" in said and "Ray" in said, said


def test_a_model_over_nodes_whose_worker_cannot_reach_the_head_is_named(tmp_path, nodes4):
    """torch.distributed's own words: node 1 cannot reach the head's --master-port (c10d's client timeout; the stand-in's
    head listens nowhere, as behind a firewall); the cause names node 1 and the flag to check, and every node is stopped."""
    config = vllm_group_config(nodes4, tmp_path, version="0.34.0", parallel="model", tp=16,
                               env={"VLLM_STANDIN_DIST_TIMEOUT_S": "1.5", "VLLM_STANDIN_FIREWALLED": "1"})
    ctx = Context.of(parse_config(config, str(tmp_path / "c.toml")))

    async def go():
        try:
            _clean, launch, ready = await run_steps(ctx, "clean", "launch", "ready")
            assert launch.state is StepState.PASSED and ready.state is StepState.FAILED, (launch.message, ready.message)
            assert "rank 1 (node1) never heard from the head (node0: " in ready.message, ready.message
            assert "its --master-port open" in ready.message and ready.evidence["stopped"] is True
            node1 = ready.evidence["group_state"]["nodes"][1]
            assert node1["failure"] == "head_unreachable" and "client socket has timed out after 1500ms" in node1["line"]
        finally:
            await stop_what_launched(ctx)
            await ctx.close()

    asyncio.run(go())


def test_one_vllm_model_over_two_nodes_is_handed_to_slurm_with_each_tasks_node_rank(tmp_path):
    """The model form's sbatch script, run by bash with stand-ins for srun/scontrol/curl: every task the same command with
    --nnodes 2, its own --node-rank from its $SLURM_PROCID, the head's address; --headless on task 1 only.  On a version
    with no --nnodes (0.10.2's recorded parser) the hand-off is refused, naming the flags."""
    config = tmp_path / "c.toml"
    config.write_text(VLLM_TWO_NODES.format(version="0.34.0").replace("tp = 2", 'tp = 8\nparallel = "model"\n'
                                                                       'extra_args = ["--pipeline-parallel-size", "2"]'))
    record = tmp_path / "record.sh"
    record.write_text(f'#!/bin/sh\necho "$@" > {tmp_path}/task-$SLURM_PROCID.argv\n')
    record.chmod(0o755)
    result = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "slurm", "--python", str(record),
                             "-c", str(config)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    (tmp_path / "job.sh").write_text(result.stdout)
    ran = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**os.environ, "PATH": f"{slurm_standins(tmp_path)}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "gpu-[a-b]"})
    assert ran.returncode == 0, ran.stderr
    tasks = [(tmp_path / f"task-{i}.argv").read_text().split() for i in range(2)]
    for rank, words in enumerate(tasks):
        assert words[words.index("--node-rank") + 1] == str(rank) and words[words.index("--nnodes") + 1] == "2"
        assert words[words.index("--master-addr") + 1] == "gpu-a" and ("--headless" in words) == (rank == 1)
        assert "--data-parallel-size" not in words and words[words.index("--pipeline-parallel-size") + 1] == "2"
    lws = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "lws", "-c", str(config)],
                         capture_output=True, text=True, timeout=60)
    assert lws.returncode == 0 and "--node-rank $LWS_WORKER_INDEX" in lws.stdout and "one model over 2 nodes" in lws.stdout
    config.write_text(config.read_text().replace('vllm_version = "0.34.0"', 'vllm_version = "0.10.2"'))
    old = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "slurm", "-c", str(config)],
                         capture_output=True, text=True, timeout=60)
    assert old.returncode == 2 and "vLLM 0.10.2 has no --nnodes" in old.stderr and "Traceback" not in old.stderr


def test_a_node_holding_a_share_of_one_model_is_ready_once_it_loaded_it():
    from cockpit.vllm.group import node_state

    launched = ("INFO 12-06 10:00:00 [serve.py:120] Launching vLLM (v0.34.0) headless multiproc executor, with head node address "
                "10.0.0.1:29501 for torch.distributed process group.")
    loaded = [ENGINE.format(rank=r, level="INFO", where="default_loader.py:267", text="Loading weights took 40.1 seconds").replace(
        "EngineCore_DP", "Worker_TP") for r in range(8, 16)]
    assert node_state(1, "b", [launched], True, form="model").state == "waiting for head"
    started = ENGINE.format(rank=8, level="INFO", where="gpu_model_runner.py:2600", text="Starting to load model /m...")
    assert node_state(1, "b", [launched, started], True, form="model").state == "loading"
    # vLLM 0.11-0.34 log `Loading weights took` once per node (info_once, scope local), not once per worker
    assert node_state(1, "b", [launched, started, loaded[0]], True, form="model").state == "ready"
    timed_out = "torch.distributed.DistStoreError: Timed out after 601 seconds waiting for clients. 1/2 clients joined."
    assert node_state(0, "a", [timed_out], True, form="model").failure == "rendezvous_timeout"


# --- one vLLM model over a Ray cluster the cockpit starts: the real Ray ----------------------------------------------

def need_ray() -> None:
    """The real Ray (`pip install ray`): .ci/run installs it, and there a missing Ray fails (COCKPIT_REQUIRE_RAY=1)."""
    try:
        import ray  # noqa: F401
    except ImportError:
        if os.environ.get("COCKPIT_REQUIRE_RAY") == "1":
            pytest.fail("ray is not installed, but COCKPIT_REQUIRE_RAY=1 (.ci/run installs it)")
        pytest.skip("ray is not installed: pip install ray")


@pytest.mark.slow
def test_one_vllm_model_over_a_real_ray_cluster_started_node_by_node(tmp_path, nodes4):
    """parallel = "ray": the real Ray started on two nodes (`ray start --head` on node 0, `ray start --address` on node 1,
    each with its 8 GPUs as Ray resources), the cluster asked through the head's own Ray until it has both nodes and 16
    GPUs, every node's GPUs verified again, then vLLM (the stand-in, joining the real cluster and placing a real
    placement group of 16 GPU bundles, as vLLM does) on the head; ready on its /health; plan stop stops the server and the
    cluster.  tp 16 > one node's 8 GPUs: only a cluster of both can hold it."""
    need_ray()
    config = vllm_group_config(nodes4, tmp_path, version="0.34.0", parallel="ray", tp=16)
    config = config.replace('parallel = "ray"\n', 'parallel = "ray"\nray_args = ["--dashboard-agent-listen-port=0", "--object-store-memory=80000000"]\njoin_timeout_s = 120\n')
    ctx = Context.of(parse_config(config, str(tmp_path / "c.toml")))

    async def go():
        try:
            clean, launch, ready = await run_steps(ctx, "clean", "launch", "ready")
            logs = "".join(p.read_text(errors="replace")[-2000:] for p in sorted(tmp_path.glob("vllm-group*.log")))
            assert launch.state is StepState.PASSED, (launch.message, logs)
            server, worker, head = members = group_of(launch.evidence)
            assert launch.evidence["cluster"] == {"nodes": 2, "gpus": 16.0} and launch.evidence["ray"]
            assert (server.host, worker.host, head.host) == ("node0", "node1", "node0")
            assert "--distributed-executor-backend" in server.argv and "ray" in server.argv
            assert "--head" in head.argv and "--address" in worker.argv
            assert ready.state is StepState.PASSED, (ready.message, logs)
            assert "Placement group ready: 16 GPU bundles on 2 Ray nodes" in (tmp_path / "vllm-group-rank0.log").read_text()
            roles = [n.get("role") for n in ready.evidence["group_state"]["nodes"]]
            assert roles == ["vLLM", "a Ray worker", "the Ray head"]
            said = await ctx.runbook.stop_server("launch", lambda _t: asyncio.sleep(0, True))
            assert said.count("stopped pid") == 3, said
            for member in members:
                assert not await process_alive(ctx.pool.get(member.host), member.pid)
        finally:
            await stop_what_launched(ctx)
            await ctx.close()

    asyncio.run(go())


def test_a_ray_clusters_members_read_their_own_lines():
    """Ray's own words (ray 2.60's `ray start --block`) and vLLM's on the head (its ray_utils.py): a worker joined once
    its runtime started; one whose subprocesses died fails the group, named by its role; a server whose placement group
    cannot be had is named with the GPU sum to check."""
    from types import SimpleNamespace

    from cockpit.vllm.group import MODEL, group_state

    worker = SimpleNamespace(host="node1", argv=("python3", "-m", "ray.scripts.scripts", "start", "--address", "10.0.0.1:6379"))
    head = SimpleNamespace(host="node0", argv=("python3", "-m", "ray.scripts.scripts", "start", "--head", "--port", "6379"))
    server = SimpleNamespace(host="node0", argv=("python3", "-m", "vllm.entrypoints.cli.main", "serve", "/m",
                                                 "--tensor-parallel-size", "16", "--distributed-executor-backend", "ray"))
    started = ["Local node IP: 10.0.0.2", "", "--------------------", "Ray runtime started.", "--------------------"]
    joined = MODEL.node_state(1, worker, started, True)
    assert (joined.state, joined.role) == ("ready", "a Ray worker")
    died = MODEL.node_state(1, worker, [*started, "Some Ray subprocesses exited unexpectedly:", "  raylet [exit code=1]"], True)
    placed = MODEL.node_state(0, server, ["ValueError: Cannot provide a placement group requiring 16 GPUs (placement_group_specs="
                                          "[{'GPU': 1.0}]) within 1800 seconds."], True)
    assert died.failure == "ray_died" and placed.failure == "ray_gpus" and placed.role == "vLLM"
    said = group_state([placed, died, MODEL.node_state(2, head, started, True)]).cause
    assert said.startswith("a Ray worker on node1: some of its Ray processes exited unexpectedly"), said
    said = group_state([placed, joined, MODEL.node_state(2, head, started, True)]).cause
    assert said.startswith("vLLM on node0: the Ray cluster has fewer GPUs than the model needs") and "--num-gpus" in said


def test_a_ray_group_is_refused_before_anything_starts_where_ray_cannot_hold_it(tmp_path, nodes4):
    """Planned from what the nodes say: a node whose Python has no Ray is named with the install; tensor x pipeline
    parallel beyond the nodes' GPUs (24 > 2 x 8) is refused; nothing is started either time."""
    need_ray()
    config = vllm_group_config(nodes4, tmp_path, version="0.34.0", parallel="ray", tp=24)
    said = refused_launch(Context.of(parse_config(config, str(tmp_path / "c.toml"))), tmp_path)
    assert "tensor x pipeline parallel is 24, more than the 16 GPUs" in said, said
    # node 1's interpreter cannot import ray (a module of that name that raises, first on its path)
    no_ray = tmp_path / "no-ray"
    no_ray.mkdir()
    (no_ray / "ray.py").write_text("raise ImportError('No module named ray')\n")
    wrapper = tmp_path / "python-vllm-0.34.0"
    wrapper.write_text(wrapper.read_text().replace("exec ", f"PYTHONPATH={no_ray}:$PYTHONPATH exec ", 1))
    text = vllm_group_config(nodes4, tmp_path / "again", version="0.34.0", parallel="ray", tp=16)
    node1 = text.index("[hosts.node1]")  # only node 1's interpreter is the one without Ray
    text = text[:node1] + text[node1:].replace(str(tmp_path / "again" / "python-vllm-0.34.0"), str(wrapper), 1)
    said = refused_launch(Context.of(parse_config(text, str(tmp_path / "again.toml"))), tmp_path / "again")
    assert "rank 1 (node1): Ray is not importable" in said and "pip install ray" in said, said


def test_vllm_over_a_ray_cluster_is_handed_to_slurm_and_lws(tmp_path):
    """parallel = "ray" handed off: the sbatch script, run by bash with stand-ins for srun/scontrol/curl, starts the Ray
    head on task 0 and a worker on task 1, waits for the cluster (its check is run: here a stand-in that says yes), then
    vLLM with --distributed-executor-backend ray on the head node with RAY_ADDRESS; the LWS leader starts the head, waits,
    serves; each worker joins at the leader's address."""
    config = tmp_path / "c.toml"
    config.write_text(VLLM_TWO_NODES.format(version="0.34.0").replace("tp = 2", 'tp = 16\nparallel = "ray"\ndist_init_port = 6379'))
    record = tmp_path / "record.sh"
    record.write_text(f'#!/bin/sh\necho "task=${{SLURM_PROCID:-batch}} RAY_ADDRESS=${{RAY_ADDRESS:-}} $*" >> {tmp_path}/ran.txt\n')
    record.chmod(0o755)
    result = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "slurm", "--python", str(record),
                             "-c", str(config)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    (tmp_path / "job.sh").write_text(result.stdout)
    ran = subprocess.run(["bash", str(tmp_path / "job.sh")], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                         env={**os.environ, "PATH": f"{slurm_standins(tmp_path)}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "gpu-[a-b]"})
    assert ran.returncode == 0, ran.stderr
    lines = (tmp_path / "ran.txt").read_text().splitlines()
    head = next(line for line in lines if "--head" in line)
    worker = next(line for line in lines if "--address" in line)
    check = next(line for line in lines if line.startswith("task=batch"))  # the batch shell's wait (its code spans lines)
    server = next(line for line in lines if "vllm.entrypoints.cli.main" in line)
    assert head.startswith("task=0 ") and "ray.scripts.scripts start --head --port 6379 --include-dashboard=false --num-gpus 8" in head
    assert worker.startswith("task=1 ") and "--address gpu-a:6379 --num-gpus 8" in worker and "--block" in worker
    assert "-c import sys, ray" in check and " gpu-a:6379 2 16" in lines  # the wait: 2 nodes, 16 GPUs (after its code)
    assert "RAY_ADDRESS=gpu-a:6379" in server and "--distributed-executor-backend ray" in server and "--tensor-parallel-size 16" in server
    lws = subprocess.run([sys.executable, "-m", "cockpit", "plan", "emit", "launch", "--format", "lws", "-c", str(config)],
                         capture_output=True, text=True, timeout=60)
    assert lws.returncode == 0, lws.stderr
    assert "--address\", \"$(LWS_LEADER_ADDRESS):6379\"" in lws.stdout and "RAY_ADDRESS=127.0.0.1:6379 exec" in lws.stdout
    assert "over a Ray cluster of 2 nodes" in lws.stdout


def test_the_server_pane_names_a_ray_clusters_members_by_what_they_are():
    from cockpit.ui.widgets.server_log import group_text

    shown = group_text({"state": "failed", "cause": "a Ray worker on node1: some of its Ray processes exited unexpectedly", "nodes": [
        {"rank": 0, "host": "node0", "state": "loading", "alive": True, "role": "vLLM"},
        {"rank": 1, "host": "node1", "state": "failed", "alive": True, "role": "a Ray worker"},
        {"rank": 2, "host": "node0", "state": "ready", "alive": True, "role": "the Ray head"}]}).plain
    assert "a Ray worker node1: failed" in shown and "the Ray head node0: ready" in shown and "vLLM node0: loading" in shown
    plain = group_text({"state": "ready", "nodes": [{"rank": 1, "host": "b", "state": "ready", "alive": True}]}).plain
    assert "rank 1 b: ready" in plain
