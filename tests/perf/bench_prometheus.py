"""Jump-box CPU at 128 hosts x 8 GPUs: GPUs through Prometheus beside GPUs through SSH, in one run.

Run on demand:  python tests/perf/bench_prometheus.py [--hosts 128] [--seconds 20] [--modes headless,ui]

- SSH: 128 loopback sshd addresses (8 sshd processes of 16), the stand-in nvidia-smi streaming at 1 Hz
  behind each (what the cockpit does by default: one SSH connection and one stream per host).
- Prometheus: a real Prometheus (Debian's package) scraping the stand-in DCGM exporter (128 ports, the
  recorded format) every second; the cockpit asks it once a second for every GPU of every host.
Both at the same refresh (1 Hz), each measured in its own process (headless: the TelemetryHub of
`cockpit status --watch`; ui: the TUI in a 160x48 pseudo-terminal, which shows its fleet view at 128
hosts).  Only the cockpit's own CPU is counted: not sshd, nvidia-smi, Prometheus or the exporter.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent))

import bench_monitor  # noqa: E402
from harness.prometheus import ExporterHarness, PrometheusHarness, free_ports  # noqa: E402
from harness.sshd import SshdHarness  # noqa: E402


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child-headless":
        bench_monitor.child_headless(sys.argv[2], float(sys.argv[3]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--hosts", type=int, default=128)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--modes", default="headless,ui")
    parser.add_argument("--prom-intervals", default="1,5", help="the cockpit's [prometheus] interval_s values to measure "
                        "(1: the same refresh as SSH; 5: the default)")
    args = parser.parse_args()
    modes = args.modes.split(",")
    bench_monitor.__file__ = __file__  # its measure_headless re-runs this script as the child
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        addresses = [f"127.0.{n // 250}.{n % 250 + 1}" for n in range(args.hosts)]
        sshd = SshdHarness(folder / "sshd", addresses=addresses).start()
        ports = dict(zip((f"h{n:03d}" for n in range(args.hosts)), free_ports(args.hosts)))
        exporter = ExporterHarness(folder, {name: {"port": port, "used": [61234] * 4 + [0] * 4} for name, port in ports.items()})
        prometheus = PrometheusHarness(folder / "prom", list(ports.values())).start()
        try:
            prometheus.wait_up(args.hosts, timeout=90)
            ssh_config = folder / "ssh.toml"
            body = "".join(sshd.host_toml(f"h{n:03d}", addresses[n]) for n in range(args.hosts))
            ssh_config.write_text(sshd.config_toml(body, interval_ms=1000).replace("processes_interval_s = 0.5", "processes_interval_s = 5")
                                  .replace("stagger_ms = 0", "stagger_ms = 20"))
            sources = [("ssh", ssh_config)]
            for interval in args.prom_intervals.split(","):
                prom_config = folder / f"prom-{interval}.toml"
                prom_config.write_text(f'[telemetry]\ninterval_ms = 1000\n\n[prometheus]\nurl = "{prometheus.url}"\ninterval_s = {interval}\n\n'
                                       + "".join(f'[hosts.{name}]\ntelemetry = "prometheus"\n\n' for name in ports))
                sources.append((f"prom {interval}s", prom_config))
            print(f"{'mode':<9} {'source':<10} {'% core':>7} {'CPU s':>7} {'host-samples':>12} {'RSS MiB':>8}  SSH/this")
            for mode in modes:
                results = {}
                for source, config in sources:
                    if mode == "headless":
                        result = bench_monitor.measure_headless(config, args.seconds)
                    else:
                        result = bench_monitor.measure_ui(config, args.seconds, args.hosts)
                    results[source] = result
                    pct = 100 * result["cpu_s"] / result["wall_s"]
                    ratio = results["ssh"]["cpu_s"] / result["wall_s"] * result["wall_s"] / max(1e-9, result["cpu_s"])
                    print(f"{mode:<9} {source:<10} {pct:>6.2f}% {result['cpu_s']:>7.2f} {result['samples']:>12.0f} "
                          f"{result['rss'][-1]:>8.0f}  {ratio:.1f}x", flush=True)
        finally:
            prometheus.stop()
            exporter.stop()
            sshd.stop()


if __name__ == "__main__":
    main()
