"""A recording that came back from the GPU machine (record_vllm.sh / record_sglang.sh: $OUT/ENGINE-eagle3-rec.tar.gz)
made into a committed fixture folder under tests/fixtures/gpu-engines/, the same way every time:

    python tests/gpu/fixture_from_recording.py REC.tar.gz DEST [--since EPOCH_S] [--drop C ...] [--keep 300]

- the scenario folders `A/`, `B/` (the kit's traffic.py output) become `A-traffic/`, `B-traffic/`, and each
  `traffic.jsonl` its first KEEP records, `traffic-first300.jsonl` (a crashed server answers thousands of requests in
  a tight loop: the first ones say what it answered), with a count of every status beside it (`traffic-statuses.json`);
- `--since`: records (`"t"` in JSON lines: the watch's looks, the traffic) older than this are dropped.  A warm machine
  that recorded twice kept the first recording's files in /tmp/rec, and the watch and the traffic append: the second
  recording's files began with the first's (record_lib.sh starts from an empty /tmp/rec since);
- `--drop TAG`: a scenario's files left out (the same: files of the other recording);
- the step log from its last `verify payload` on (the run that made these files), the markers (`*.done`) and empty
  error files left out, and nothing else changed: the logs and arrivals are byte for byte what the machine wrote."""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path


def _records(path: Path, since: float) -> list[str]:
    kept = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            t = json.loads(line).get("t")
        except ValueError:
            t = None
        if t is None or t >= since:
            kept.append(line)
    return kept


def make(archive: Path, dest: Path, since: float = 0.0, drop: tuple[str, ...] = (), keep: int = 300) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        rec = Path(tmp) / "rec"
        dest.mkdir(parents=True, exist_ok=True)
        written = []
        for src in sorted(rec.rglob("*")):
            rel = src.relative_to(rec)
            top = rel.parts[0]
            tag = top.split("-", 1)[0].split(".", 1)[0]
            if src.is_dir() or tag in drop or src.suffix == ".done" or (src.suffix == ".err" and not src.stat().st_size):
                continue
            if src.name == "summary.txt":
                continue
            folder = f"{top}-traffic" if len(rel.parts) > 1 and top in ("A", "B") else top
            out = dest / folder / Path(*rel.parts[1:]) if len(rel.parts) > 1 else dest / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            if src.name == "traffic.jsonl":
                records = _records(src, since)
                statuses = collections.Counter(str(json.loads(r).get("status")) for r in records)
                out = out.with_name(f"traffic-first{keep}.jsonl")
                out.write_text("".join(r + "\n" for r in records[:keep]))
                (out.parent / "traffic-statuses.json").write_text(json.dumps(
                    {"records": len(records), "by_status": dict(sorted(statuses.items()))}, indent=1) + "\n")
            elif src.name.endswith("-watch.jsonl"):
                out.write_text("".join(r + "\n" for r in _records(src, since)))
            elif src.name == "steps.log":
                lines = src.read_text().splitlines()
                starts = [i for i, line in enumerate(lines) if line.endswith("] verify payload")]
                out.write_text("".join(line + "\n" for line in lines[starts[-1] if starts else 0:]))
            else:
                shutil.copyfile(src, out)
            written.append(str(out.relative_to(dest)))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("archive", type=Path)
    parser.add_argument("dest", type=Path)
    parser.add_argument("--since", type=float, default=0.0)
    parser.add_argument("--drop", action="append", default=[])
    parser.add_argument("--keep", type=int, default=300)
    args = parser.parse_args(argv)
    for name in make(args.archive, args.dest, args.since, tuple(args.drop), args.keep):
        print(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
