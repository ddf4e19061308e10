"""Files the installed program reads, shipped inside the package (importlib.resources): the sample
configs and prompts, the themes, the demo's recordings.  Nothing is looked up beside a checkout."""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable

SAMPLE_CONFIG = "deployment.toml"
SAMPLE_PROMPTS = "prompts.jsonl"


def _folder(name: str) -> Traversable:
    return resources.files("cockpit").joinpath(name)


def sample(name: str) -> Traversable:
    """A file of the package's sample_configs/ (annotated configs, the sample prompts)."""
    return _folder("sample_configs").joinpath(name)


def samples() -> list[Traversable]:
    return sorted((f for f in _folder("sample_configs").iterdir() if f.is_file()), key=lambda f: f.name)


def theme_files() -> list[Traversable]:
    """The themes shipped with the cockpit (TOML files)."""
    return sorted((f for f in _folder("themes").iterdir() if f.name.endswith(".toml")), key=lambda f: f.name)


def demo_data(name: str) -> Traversable:
    """A recording the demo replays (nvidia-smi output, SGLang's --help)."""
    return resources.files("cockpit.demo").joinpath("data", name)
