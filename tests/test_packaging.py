"""The promises of the README: the CI script runs the README's test command; the CLI answers."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_readme_test_command():
    """One place holds the test commands (pyproject.toml [tool.cockpit]); README shows them verbatim and
    .ci/run runs the one from there: a README edit cannot silently change what CI runs."""
    import tomllib

    commands = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["cockpit"]
    readme = (ROOT / "README.md").read_text()
    for key in ("test-command", "fast-test-command"):
        assert f"\n    {commands[key]}\n" in readme, f"README.md must show {key} verbatim: {commands[key]}"
    script = (ROOT / ".ci" / "run").read_text()
    assert '["tool"]["cockpit"]["test-command"]' in script and 'bash -c "$test_command"' in script
    assert "openssh-server" in script and "torch==2.13.0" in script


def test_version_and_help():
    out = subprocess.run([sys.executable, "-m", "cockpit", "--version"], capture_output=True, text=True)
    assert out.returncode == 0 and re.match(r"cockpit \d+\.\d+\.\d+", out.stdout)
    out = subprocess.run([sys.executable, "-m", "cockpit", "--help"], capture_output=True, text=True)
    assert out.returncode == 0
    for command in ("status", "verify", "plan", "trust", "config"):
        assert command in out.stdout


def test_core_never_imports_the_ui():
    for path in (ROOT / "cockpit").rglob("*.py"):
        if "ui" in path.relative_to(ROOT / "cockpit").parts or path.name == "cli.py":
            continue
        text = path.read_text()
        assert "cockpit.ui" not in text and "import textual" not in text and "from textual" not in text, path


def test_ci_runs_the_tests_in_a_fresh_venv_without_system_packages():
    script = (ROOT / ".ci" / "run").read_text()
    assert 'python3 -m venv "$venv"' in script and "system-site-packages" not in script
    assert "COCKPIT_REQUIRE_TORCH=1" in script  # the torch tests never skip silently in CI
