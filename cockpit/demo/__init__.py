"""`cockpit demo`: the whole deployment of the story on this machine, no GPU and no network beyond
loopback.  Everything here is labelled DEMO where it shows: GPU telemetry replays nvidia-smi output
recorded on a real H200 (data/), the SGLang server stands in for SGLang 0.5.2 (its parser
rebuilt from the flags recorded from that wheel: argparse's own `--help` and crash) with SGLang's start-up lines, and streams tokens on a loopback port.  The stale
processes it kills are real processes it started itself."""
