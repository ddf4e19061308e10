import json

import pytest

from cockpit.cli import main
from cockpit.config import load_config, parse_config
from cockpit.errors import ConfigError

GOOD = """
[hosts.gpu-server]
address = "10.1.230.174"   # an IP, a DNS name or an ~/.ssh/config alias
user = "root"              # optional: else ~/.ssh/config, else the local user
port = 22                  # optional
connect_timeout = 10       # seconds, optional
roles = ["serving"]

[hosts.trainer]
address = "trainer-alias"
jump_host = "gpu-server"
roles = ["training"]

[hosts.here]
local = true
"""


def test_issue_example_parses_as_written():
    config = parse_config(GOOD, "c.toml")
    server = config.host("gpu-server")
    assert (server.address, server.user, server.port, server.connect_timeout, server.roles) == ("10.1.230.174", "root", 22, 10.0, ("serving",))
    assert config.host("trainer").jump_host == "gpu-server"
    assert config.host("trainer").connect_timeout == 10.0  # the default
    assert config.host("here").local


@pytest.mark.parametrize(
    "text, line, key, fragment",
    [
        ('[hosts.a]\naddress = "x"\nport = "22"\n', 3, "port", "must be an integer"),
        ('[hosts.a]\naddress = "x"\nprot = 22\n', 3, "prot", "did you mean 'port'"),
        ('[hosts.a]\nuser = "root"\n', 1, None, "needs 'address'"),
        ('[hosts.a]\naddress = "x"\nport = 70000\n', 3, "port", "between 1 and 65535"),
        ('[hosts.a]\naddress = "x"\nroles = "serving"\n', 3, "roles", "must be a list"),
        ('[hosts.a]\naddress = "x"\nconnect_timeout = 0\n', 3, "connect_timeout", "at least"),
        ('[hosts.a]\naddress = "-oProxyCommand=evil"\n', 2, "address", "not a host address"),
        ('[hosts.a]\naddress = "x"\ntelemetry = "nvml"\n', 3, "telemetry", "local"),
        ('[hosts.a]\naddress = "x"\njump_host = "b"\n[hosts.b]\naddress = "y"\njump_host = "a"\n', 3, "jump_host", "loop"),
        ('[hosts.a]\naddress = "x\n', 2, None, "not valid TOML"),
        ('[telemetry]\ninterval_ms = 10\n', 2, "interval_ms", "at least 100"),
    ],
)
def test_errors_name_file_line_and_key(text, line, key, fragment):
    with pytest.raises(ConfigError) as info:
        parse_config(text, "deploy.toml")
    err = info.value
    assert err.path == "deploy.toml"
    assert err.line == line
    assert err.key == key
    assert fragment in str(err)
    assert str(err).startswith(f"deploy.toml:{line}:")


def test_unknown_host_suggests_close_name():
    config = parse_config(GOOD, "c.toml")
    with pytest.raises(ConfigError, match="did you mean 'gpu-server'"):
        config.host("gpu-srever")


def test_no_config_watches_this_machine(monkeypatch, tmp_path):
    config = load_config(None)
    assert len(config.hosts) == 1 and config.hosts[0].local


def test_config_check_cli(tmp_path, capsys):
    good = tmp_path / "good.toml"
    good.write_text(GOOD)
    assert main(["config", "check", str(good)]) == 0
    assert "3 hosts" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text('[hosts.a]\naddress = "x"\nport = "22"\n')
    assert main(["config", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:3: key 'port'" in err and "Traceback" not in err
    assert main(["config", "check", str(tmp_path / "missing.toml")]) == 2
    assert "no such file" in capsys.readouterr().err
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"[hosts.a]\n\xff\xfe")
    assert main(["config", "check", str(binary)]) == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_sample_configs_are_valid():
    from pathlib import Path

    samples = sorted((Path(__file__).resolve().parent.parent / "sample_configs").glob("*.toml"))
    assert samples, "sample_configs/ holds no config"
    from cockpit.context import check_config

    for sample in samples:
        config = load_config(sample)
        assert config.hosts, sample
        check_config(config)  # whole, as config check and plan run read it (runs, alerts, groups)
    assert {s.name for s in samples} >= {"deployment.toml", "two-node.toml"}


def test_every_declared_setting_is_read_from_its_table_with_its_one_default():
    """A setting is declared once (its default and bound in the dataclass: config.setting) and the
    table readers are driven by those fields: each key set in a file is read back, and an empty
    table gives the declared defaults."""
    import typing
    from dataclasses import fields

    from cockpit.config import HostConfig, PrometheusSettings, SshSettings, TelemetrySettings, UiSettings

    def sample(kind, default):
        return {int: 7777, float: 4242.5, bool: not default, str: "chosen"}[kind]

    tables = {SshSettings: "[ssh]", TelemetrySettings: "[telemetry]", UiSettings: "[ui]",
              PrometheusSettings: '[prometheus]\nurl = "http://p:9090"', HostConfig: '[hosts.h]\naddress = "h.example"'}
    for cls, head in tables.items():
        hints = typing.get_type_hints(cls)
        declared = [f for f in fields(cls) if f.metadata.get("toml")]
        lines, wanted = [head], {}
        for f in declared:
            kind = hints[f.name]
            if typing.get_origin(kind) is tuple:
                continue  # a list: its reader's own shape check
            kind = next((k for k in typing.get_args(kind) if k is not type(None)), kind)
            if kind not in (int, float, str, bool) or f.name in ("theme", "host_label", "token_env", "selector", "sglang_selector", "server_selector",
                                                                  "jump_host"):
                continue  # values with their own checks (a theme that exists, label names, a host of the config)
            value = sample(kind, f.default)
            wanted[f.name] = value
            lines.append(f"{f.metadata.get('key') or f.name} = {json.dumps(value)}")
        config = parse_config("\n".join(lines) + "\n")
        read = {SshSettings: config.ssh, TelemetrySettings: config.telemetry, UiSettings: config.ui,
                PrometheusSettings: config.prometheus, HostConfig: config.hosts[0] if config.hosts else None}[cls]
        assert wanted and {k: getattr(read, k) for k in wanted} == wanted, cls.__name__
    defaults = parse_config("")
    assert defaults.telemetry == TelemetrySettings() and defaults.ssh == SshSettings() and defaults.ui == UiSettings()


def test_every_engines_version_is_checked_by_one_rule():
    """Issue 38: vLLM's validator took `0.10.2junk`; SGLang's and vLLM's settings and flags now share one check."""
    from cockpit.config import version_problem
    from cockpit.vllm.versions import version_problem as vllm_problem

    for good in ("0.10.2", "0.11.0+cu128", "0.6.6.post1", "0.10.2rc1", "0.4.6.post5", "0.11.1.dev7+g1a2b3c"):
        assert version_problem(good) is None and vllm_problem(good) is None, good
    for bad in ("0.10.2junk", "banana", "10", "0.10.2-", "0.10.2+"):
        assert version_problem(bad) and vllm_problem(bad), bad
