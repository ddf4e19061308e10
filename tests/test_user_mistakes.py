"""Every mistake a user can make at the CLI gets a clear message naming the file, line or flag, a
non-zero exit, and nothing stored (issue 13, item 4)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cockpit.sglang.diagnose import diagnose_argparse
from cockpit.sglang.lint import lint as lint_args
from cockpit.serving.helpschema import load_schema
from cockpit.serving.suggest import suggest

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HOSTS = '[hosts.gpu-server]\nlocal = true\nnvidia_smi = "/nonexistent/nvidia-smi"\n\n'
LAUNCH = ('[[runbook.steps]]\nname = "launch"\nkind = "sglang_launch"\nhost = "gpu-server"\nmodel_path = "/m"\n'
          'draft_tokens = 16\n\n')


def cli(*args, input=None, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=60,
                          input=input, env={**os.environ, **(env or {})}, cwd=cwd,
                          stdin=None if input is not None else subprocess.DEVNULL)


@pytest.mark.parametrize("text, line, fragment", [
    (HOSTS + '[[runbook.steps]]\nname = "clean"\nkind = "gpu_clean"\nhost = "gpu-servr"\n', 8, "did you mean 'gpu-server'"),
    (HOSTS + '[[runbook.steps]]\nname = "clean"\nkind = "gpu_clen"\nhost = "gpu-server"\n', 7, "did you mean 'gpu_clean'"),
    (HOSTS + '[[runbook.steps]]\nname = "clean"\nkind = "gpu_clean"\nhost = "gpu-server"\nmax_used_mib = "256"\n', 9,
     "'max_used_mib' must be int"),
    (HOSTS + '[[runbook.steps]]\nname = "l"\nkind = "sglang_launch"\nhost = "gpu-server"\n', 5, "needs 'model_path'"),
    (HOSTS + '[[runbook.steps]]\nname = "k"\nkind = "kill_stale"\nhost = "gpu-server"\npatern = "x"\n', 9,
     "did you mean 'pattern'"),
    (HOSTS + LAUNCH + '[bench]\nlaunch_step = "lanch"\n', 13, "did you mean 'launch'"),
    (HOSTS + LAUNCH + '[bench]\ndepths = [16, 0, 5]\n', 13, "positive integers"),
    (HOSTS + LAUNCH + '[bench]\nconcurrency = [-1]\n', 13, "positive integers"),
    (HOSTS + LAUNCH + '[bench]\nrepeat = 3\n', 13, "did you mean 'repeats'"),
    (HOSTS + '[bench]\ndepths = [5]\n', 5, "serve_launch step"),
    (HOSTS + '[sglang]\nversion = "0.5.2"\n', 5, "unknown table 'sglang'"),
    (HOSTS + '[runbook]\nnam = "x"\n', 6, "did you mean 'name'"),
    ('colour = "red"\n' + HOSTS, 1, "unknown key 'colour'"),
    (HOSTS + 'colour = "red"\n', 5, "key 'colour': unknown key"),
])
def test_config_check_rejects_what_plan_run_would(tmp_path, text, line, fragment):
    path = tmp_path / "deploy.toml"
    path.write_text(text)
    checked = cli("config", "check", str(path))
    assert checked.returncode == 2, checked.stdout
    assert f"{path}:{line}:" in checked.stderr and fragment in checked.stderr, checked.stderr
    assert "Traceback" not in checked.stderr
    # the same file is refused the same way by the commands that use it
    planned = cli("plan", "run", "--config", str(path))
    assert planned.returncode == 2 and f"{path}:{line}:" in planned.stderr, planned.stderr


def test_config_check_accepts_the_shipped_example(tmp_path):
    example = cli("init", "--example")
    assert example.returncode == 0
    path = tmp_path / "deploy.toml"
    path.write_text(example.stdout)
    checked = cli("config", "check", str(path), "--json")
    assert checked.returncode == 0, checked.stderr
    data = json.loads(checked.stdout)
    assert data["ok"] and data["runbook"]["steps"]


def test_init_refuses_a_bad_answer_at_the_prompt_and_keeps_the_good_ones(tmp_path):
    target = tmp_path / "c.toml"
    answers = "\n".join(["1", "gpu-server", "10.0.0.7", "root", "abc", "2222", "serving", "/models/L", "/ckpt/e",
                         "eight", "8", "16,x", "16,10,5"]) + "\n"
    proc = cli("init", str(target), input=answers)
    assert proc.returncode == 0, proc.stderr
    assert "'abc' is not a whole number; try again" in proc.stderr
    assert "'eight' is not a whole number; try again" in proc.stderr
    assert "'16,x' is not a list of positive whole numbers" in proc.stderr
    text = target.read_text()
    assert 'address = "10.0.0.7"' in text and "port = 2222" in text and "tp = 8" in text and "depths = [16, 10, 5]" in text
    assert "Traceback" not in proc.stderr


def test_init_that_runs_out_of_input_writes_nothing(tmp_path):
    target = tmp_path / "c.toml"
    proc = cli("init", str(target), input="1\ngpu-server\n")
    assert proc.returncode == 2 and "nothing was written" in proc.stderr and not target.exists()


def test_bench_run_where_nothing_listens_fails_fast_and_stores_nothing(tmp_path):
    data = tmp_path / "data"
    for endpoint in ("http://127.0.0.1:9", "127.0.0.1:9"):
        proc = cli("bench", "run", "--endpoint", endpoint, "--requests", "4", env={"XDG_DATA_HOME": str(data)})
        assert proc.returncode == 2 and "nothing listens on 127.0.0.1:9" in proc.stderr, proc.stderr
    assert not data.exists() or not list(data.rglob("*.jsonl"))
    proc = cli("bench", "run", "--endpoint", "https://gpu-server:30000")
    assert proc.returncode == 2 and "https is not supported" in proc.stderr


def test_endpoint_without_a_scheme_is_http_never_port_80():
    from cockpit.hosts.http import normalize_endpoint, split_url

    assert split_url(normalize_endpoint("127.0.0.1:30000")) == ("127.0.0.1", 30000, "")
    assert normalize_endpoint("localhost:8000/") == "http://localhost:8000"
    with pytest.raises(ValueError, match="not a number"):
        normalize_endpoint("localhost:port")


@pytest.mark.parametrize("content, fragment", [
    (b"PK\x03\x04" + bytes(100), "a zip archive: a PyTorch checkpoint"),
    (b"\x80\x02}q\x00(X" + bytes(100), "a Python pickle"),
    (b"hello, this is not a checkpoint\n" * 4, "a text file"),
    (b'{"weight_map": {}}' + b" " * 40, "JSON text"),
])
def test_drafter_commands_on_a_file_that_is_not_safetensors(tmp_path, content, fragment):
    path = tmp_path / "model.safetensors"
    path.write_bytes(content)
    for args in (("drafter", "inspect", str(path)), ("drafter", "fix-keys", str(path), "--dry-run")):
        proc = cli(*args)
        assert proc.returncode == 2 and f"{path}: not a safetensors file; it is {fragment}" in proc.stderr, proc.stderr
    folder = tmp_path / "torch-out"
    folder.mkdir()
    (folder / "pytorch_model.bin").write_bytes(content)
    proc = cli("drafter", "inspect", str(folder))
    assert proc.returncode == 2 and "holds PyTorch weights" in proc.stderr and "cockpit drafter convert" in proc.stderr


@pytest.fixture(scope="module")
def schema():
    return load_schema(FIXTURES / "sglang" / "help_0.5.23.txt")


def test_a_number_is_never_suggested_to_a_path_flag(schema):
    for wrong, value in (("--num-speculative-tokens", "16"), ("--max-model-len", "8192"), ("--speculative-config", "{}"),
                         ("--gpu-memory-utilization", "0.9")):
        for fix in suggest(wrong, value, schema):
            flag = schema.get(fix.text.split(" ")[0])
            if flag is not None and len(fix.replacement or ()) == 2:
                assert flag.value_kind != "path", (wrong, fix.text)
                assert flag.accepts(value), (wrong, fix.text)
    texts = [f.text for f in suggest("--num-speculative-tokens", "16", schema)]
    assert "--speculative-token-map 16" not in texts
    texts = [f.text for f in suggest("--gpu-memory-utilization", "0.9", schema)]
    assert not any(t.startswith(("--base-gpu-id", "--hicache-host-memory-fraction")) for t in texts), texts


@pytest.mark.parametrize("flag, value, choices, meant", [
    ("--speculative-algorithm", "EAGLE-3", ("EAGLE", "EAGLE3", "NEXTN"), "EAGLE3"),
    ("--speculative-algorithm", "mtp", ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"), "NEXTN"),
    ("--dtype", "bf16", ("auto", "half", "float16", "bfloat16", "float", "float32"), "bfloat16"),
    ("--attention-backend", "flash-attn", ("triton", "torch_native", "flashinfer", "fa3", "flashmla"), "fa3"),
])
def test_an_invalid_choice_suggests_what_the_user_meant(flag, value, choices, meant):
    message = f"argument {flag}: invalid choice: '{value}' (choose from {', '.join(repr(c) for c in choices)})"
    [diagnosis] = diagnose_argparse(message, None, 1)
    assert diagnosis.suggestions[0] == meant and diagnosis.replacement == (flag, meant)
    assert f"did you mean '{meant}'?" in diagnosis.message


def test_type_errors_read_as_english(schema):
    [diagnosis] = diagnose_argparse("argument --mem-fraction-static: invalid float value: 'most'", None, 1)
    assert "needs a number" in diagnosis.message and "an float" not in diagnosis.message
    report = lint_args(["--model-path", "/m", "--tp-size", "eight"], schema)
    assert any("needs an integer, got 'eight'" in d.message for d in report.diagnoses)


async def test_first_run_without_a_config_says_what_to_do_next(monkeypatch):
    from cockpit.config import local_only_config
    from cockpit.ui.app import CockpitApp

    app = CockpitApp(local_only_config())
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        texts = [n.message for n in app._notifications]
        assert any("cockpit init" in t and "cockpit demo" in t for t in texts), texts


def test_server_without_a_config_says_what_to_do(tmp_path):
    result = subprocess.run([sys.executable, "-m", "cockpit", "server"], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "none")})
    assert result.returncode == 2 and "no config" in result.stderr and "None" not in result.stderr


def _cockpit(*args, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cockpit", *args], capture_output=True, text=True, timeout=60, input=stdin,
                          env={**os.environ, "COLUMNS": "200"})


def test_newcomer_dead_ends_of_issue_30(tmp_path, fixtures):
    # init --sample names an example: it prints it, it does not start the questions
    sample = _cockpit("init", "--sample", "two-node")
    assert sample.returncode == 0 and "one server over two nodes" in sample.stdout
    # the role prompt takes what it says it takes
    asked = _cockpit("init", str(tmp_path / "c.toml"), stdin="1\ngpu\n\n\n\ninference\n")
    assert "'inference' is not one of: serving, training" in asked.stderr and not (tmp_path / "c.toml").exists()
    # lint-flags without `--`: a hint, not the top-level usage
    lint = _cockpit("lint-flags", "--help-text", str(fixtures / "sglang" / "help_0.5.2.txt"), "--model-path", "/m")
    assert lint.returncode == 2 and "after `--`" in lint.stderr and "usage: cockpit [-h]" not in lint.stderr
    # a version that is none
    banana = _cockpit("drafter", "inspect", str(tmp_path), "--sglang", "banana")
    assert banana.returncode == 2 and "'banana' is not an SGLang version" in banana.stderr


def test_bench_report_with_no_runs_says_how_to_get_one_and_takes_a_demo_config(tmp_path):
    env_home = tmp_path / "home"
    out = subprocess.run([sys.executable, "-m", "cockpit", "bench", "report"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "XDG_DATA_HOME": str(env_home)})
    assert out.returncode == 2 and "cockpit bench run --endpoint" in out.stderr and "demo.toml" in out.stderr
    demo = tmp_path / "demo"
    (demo / "data" / "bench").mkdir(parents=True)
    (demo / "demo.toml").write_text('[storage]\ndir = "."\n')  # as the demo writes it
    out = subprocess.run([sys.executable, "-m", "cockpit", "bench", "report", "-c", str(demo / "demo.toml")], capture_output=True,
                         text=True, timeout=60, env={**os.environ, "XDG_DATA_HOME": str(env_home)})
    assert "unrecognized arguments" not in out.stderr and str(demo / "data" / "bench") in out.stderr


def test_bench_report_on_a_run_file_of_one_endless_line_names_it_and_reads_it_bounded(tmp_path):
    """A benchmark run's first line is its summary (a few kB): a file of one endless line (a binary, a log mistaken
    for a run) is refused naming it after 1 MiB read, not read whole into memory."""
    import tracemalloc

    from cockpit.bench.store import load_run
    from cockpit.errors import CockpitError

    endless = tmp_path / "run.jsonl"
    endless.write_text("x" * (24 << 20))  # 24 MiB, no newline
    tracemalloc.start()
    try:
        with pytest.raises(CockpitError) as said:
            load_run(endless)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(endless) in str(said.value) and "over 1 MiB" in str(said.value)
    assert peak < 8 << 20, f"{peak} bytes held to refuse it"
    out = subprocess.run([sys.executable, "-m", "cockpit", "bench", "report", str(endless)], capture_output=True, text=True,
                         timeout=60, env={**os.environ, "XDG_DATA_HOME": str(tmp_path / "home")})
    assert out.returncode == 2 and str(endless) in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_no_gpu_and_no_server_say_what_to_do(tmp_path):
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "none"), "COCKPIT_NO_NVML": "1", "PATH": "/usr/bin:/bin"}
    status = subprocess.run([sys.executable, "-m", "cockpit", "status", "--once"], capture_output=True, text=True, timeout=60, env=env)
    assert "cockpit init" in status.stdout and "cockpit demo" in status.stdout
    server = subprocess.run([sys.executable, "-m", "cockpit", "server"], capture_output=True, text=True, timeout=60, env=env)
    assert server.returncode == 2 and "--log FILE" in server.stderr and "--url" in server.stderr


def test_words_of_issue_30():
    from cockpit.bench.sweep import finished_sweep_alerts  # noqa: F401 - the alert title is made there
    from cockpit.format import plural, time_left

    assert plural(1, "process", "processes") == "1 process" and plural(3, "repeat") == "3 repeats"
    assert time_left(0.4) == "" and time_left(12, 4, 4) == "" and time_left(150) == "about 2 min left"
    help_text = subprocess.run([sys.executable, "-m", "cockpit", "--help"], capture_output=True, text=True, timeout=30).stdout
    assert "is every GPU of HOST clean?" in help_text


@pytest.mark.parametrize("delay", [0.05, 0.3, 0.8])
def test_ctrl_c_at_start_up_is_quiet(tmp_path, delay):
    """Ctrl-C while the program is still importing or starting: exit 130, never a traceback, never
    ignored.  `delay` counts from when the interpreter has started (the longest of three `python -c pass`
    here, now): before that it is Python's own start-up, which no program can change."""
    import signal
    import time

    def started() -> float:
        begun = time.monotonic()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        return time.monotonic() - begun

    interpreter = max(started() for _ in range(3))
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "status", "--watch"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "XDG_CONFIG_HOME": str(tmp_path)})
    time.sleep(interpreter + delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert b"Traceback" not in err, err.decode()
    assert proc.returncode in (130, -2), (proc.returncode, err.decode())  # -2: before Python started


def test_every_fix_the_cockpit_prints_pastes_as_it_runs():
    """Issue 36 item 6: `fix: --speculative-config {"method": "eagle3", ...}` had no quoting, right under a
    correctly quoted error line.  The fix, in the pane and in parse-log's text, reads back as the same words."""
    import shlex

    from cockpit.diagnosis import Diagnosis
    from cockpit.serving.logread import LogReport, render_log_report
    from cockpit.ui.widgets.server_log import diagnosis_text

    words = ("--speculative-config", '{"method": "eagle3", "model": "/ckpt/my draft", "num_speculative_tokens": 16}')
    fix = Diagnosis("old_speculative_flags", "vLLM 0.10.2 has none of these", "--speculative-model", "/ckpt", (), 3, words)
    for shown in (diagnosis_text([fix]).plain, render_log_report(LogReport(diagnoses=[fix], lines=3))):
        line = next(l for l in shown.splitlines() if l.strip().startswith("fix: "))
        assert tuple(shlex.split(line.strip()[len("fix: "):])) == words, line


def test_init_on_a_jump_box_without_gpus_does_not_name_it_a_gpu_host(tmp_path):
    """Issue 36 item 7: `cockpit init` on a GPU-less jump box added `[hosts.here] local = true`, so `status --once`
    said `here: driver_error` for ever and could never exit 0.  Only a machine with GPUs is one of the hosts."""
    from cockpit.config import parse_config
    from cockpit.init import questionnaire, render_config

    given = iter(["0", "1", "gpu-server", "10.0.0.7", "", "", "serving", "/m", "/d", "8", "16"])
    answers = questionnaire(lambda question, default: next(given), here_has_gpus=False)  # 0 hosts is refused: there is no "here"
    text = render_config(answers)
    assert "[hosts.here]" not in text and [h.name for h in parse_config(text).hosts] == ["gpu-server"]
    with_gpus = render_config(questionnaire(lambda q, d: d if "hosts" not in q else "0", here_has_gpus=True))
    assert [h.name for h in parse_config(with_gpus).hosts] == ["here"]


def test_parse_log_on_endless_or_binary_input_is_bounded_answers_ctrl_c_and_says_binary(tmp_path):
    """Issue 36 item 8: `parse-log --all - < /dev/zero` reached 9 GB, ignored Ctrl-C, and under a 4 GB limit ended
    in a MemoryError traceback; 200 random bytes were `no crash found`, rc 0.  Binary input exits 2 at its first
    bytes; endless text without a newline is read in bounded memory (here under a 1 GiB address-space limit)
    until Ctrl-C, which ends it with 130."""
    import random
    import resource
    import signal
    import time

    from cockpit.serving.logread import looks_binary

    for args in (["parse-log", "--all", "-"], ["parse-log", "-"]):
        with open("/dev/zero", "rb") as zero:  # endless: refused at its first bytes (timeout= is the hang's limit)
            done = subprocess.run([sys.executable, "-m", "cockpit", *args], stdin=zero, capture_output=True, text=True, timeout=60)
        assert done.returncode == 2 and "binary" in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)
    noise = tmp_path / "noise.bin"
    noise.write_bytes(random.Random(36).randbytes(200).replace(b"\x00", b"\x01"))  # no NUL to give it away
    for args in (["parse-log", str(noise)], ["parse-log", "--all", str(noise)]):
        done = _cockpit(*args)
        assert done.returncode == 2 and "binary file" in done.stderr, (args, done.stdout, done.stderr)
    coloured = "\x1b[32m[2026-12-04 18:00:00] INFO\x1b[0m The server is fired up and ready to roll!\r\n" * 20
    assert not looks_binary(coloured.encode()) and not looks_binary("Gerät bereit: café\n".encode("latin-1") * 3)

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    feeder = subprocess.Popen([sys.executable, "-c", "import sys\nwhile True: sys.stdout.buffer.write(b'a' * 65536)"],
                              stdout=subprocess.PIPE)
    reader = subprocess.Popen([sys.executable, "-m", "cockpit", "parse-log", "--all", "-"], stdin=feeder.stdout,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=limited)
    feeder.stdout.close()
    try:
        time.sleep(6)  # about a gigabyte of one line has gone through it by now
        assert reader.poll() is None, reader.stderr.read()
        reader.send_signal(signal.SIGINT)
        _, err = reader.communicate(timeout=20)
        assert reader.returncode == 130 and "Traceback" not in err and "MemoryError" not in err, err
    finally:
        feeder.kill()
        reader.kill()
        feeder.wait()


def test_status_watch_stopped_by_ctrl_c_exits_130(standin_path, tmp_path):
    """Issue 36 item 9: `status --watch` exited 0 on Ctrl-C; a script must see that it was interrupted."""
    import signal
    import time

    (standin_path / "default.json").write_text(json.dumps({"gpus": 2}))
    config = tmp_path / "c.toml"
    config.write_text('[hosts.here]\nlocal = true\ntelemetry = "smi"\n')
    proc = subprocess.Popen([sys.executable, "-m", "cockpit", "status", "--watch", "-c", str(config)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    first = proc.stdout.readline()
    while "GPU" not in first and time.monotonic() < deadline:
        first = proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err == "", (proc.returncode, err)


def test_init_asks_where_a_training_hosts_trainer_runs_and_writes_a_run_the_config_reads(tmp_path):
    """A training host's trainer: its log, or where it runs (a Slurm job, a container, a pod), checked as the config
    checks it (a bad answer asked again with why), written as a [runs] table that loads."""
    from cockpit.config import load_config
    from cockpit.init import questionnaire, render_config
    from cockpit.runs.spec import parse_runs

    for answer, expected in (("slurm:eagle3-train", ("slurm", "eagle3-train")), ("podman:trainer", ("podman", "trainer")),
                             ("pod:ml/eagle3-0", ("pod", "eagle3-0")), ("/data/train.log", None)):
        given = iter(["1", "trainbox", "10.0.0.9", "", "", "training", "docker:", answer])
        answers = questionnaire(lambda question, default: next(given), here_has_gpus=False)
        path = tmp_path / "c.toml"
        path.write_text(render_config(answers))
        runs = parse_runs(load_config(path))
        run = runs["train-trainbox"]
        assert run.host == "trainbox"
        if expected is None:
            assert run.log == "/data/train.log" and run.placement is None
        else:
            assert (run.placement.kind, run.placement.name) == expected
