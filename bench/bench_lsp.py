"""Language-server latency over real JSON-RPC, as ratios to `python -c pass` (the machine's own unit of time).

Starts `python -m hpdsl lsp` with the test client (tests/lsp_client.py) and times:
initialize (spawn to response), hover on examples/deepseek_v3.hpf's model,
edit -> diagnostics (a one-character didChange to the publishDiagnostics that
carries its version), and a burst of 1,000 edits (from the last edit to the
answer of the hover sent right after it, and to the diagnostics of the last
version). Targets (docs/language-server.md): initialize <= 15x, edit ->
diagnostics p95 <= 4x, the burst answered within a second. Run:

    .venv/bin/python bench/bench_lsp.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from lsp_client import Client  # noqa: E402

EXAMPLE = ROOT / "examples/deepseek_v3.hpf"


def baseline(runs: int = 10) -> float:
    """Return the median wall time of `python -c pass`."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def initialize(folder: Path) -> tuple[float, Client]:
    """Start a server and return the time to its initialize response, with the client."""
    start = time.perf_counter()
    client = Client(folder)
    client.request("initialize", {"processId": None, "rootUri": folder.as_uri(), "capabilities": {}})
    return time.perf_counter() - start, client


def _edit(client: Client, uri: str, version: int, line: int, text: str) -> None:
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [
        {"range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}},
         "text": text}]})


def _published(client: Client, uri: str, version: int) -> None:
    client.wait(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                and m["params"]["uri"] == uri and m["params"].get("version") == version)


def session(folder: Path, rounds: int) -> dict[str, list[float]]:
    """Time hover, edit -> diagnostics and a 1,000-edit burst on one server; return the samples."""
    path = folder / EXAMPLE.name
    shutil.copy(EXAMPLE, path)
    text = path.read_text()
    line = next(i for i, t in enumerate(text.split("\n")) if t.startswith("model "))
    uri = path.as_uri()
    _, client = initialize(folder)
    samples: dict[str, list[float]] = {"hover": [], "edit": [], "burst answer": [], "burst diagnostics": []}
    try:
        client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "hpdsl",
                                                                "version": 1, "text": text}})
        _published(client, uri, 1)
        position = {"textDocument": {"uri": uri}, "position": {"line": line, "character": 7}}
        version = 1
        for n in range(rounds):
            start = time.perf_counter()
            client.request("textDocument/hover", position)
            samples["hover"].append(time.perf_counter() - start)
            version += 1
            start = time.perf_counter()
            _edit(client, uri, version, line + 1, "" if n % 2 else "  // edited\n")
            _published(client, uri, version)
            samples["edit"].append(time.perf_counter() - start)
        for _ in range(3):
            for _ in range(1000):
                version += 1
                _edit(client, uri, version, line + 1, "")
            last = time.perf_counter()
            client.request("textDocument/hover", position)
            samples["burst answer"].append(time.perf_counter() - last)
            _published(client, uri, version)
            samples["burst diagnostics"].append(time.perf_counter() - last)
    finally:
        client.close()
    return samples


def p95(values: list[float]) -> float:
    """Return the 95th percentile (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    """Print each latency in milliseconds and as a ratio to `python -c pass`."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    rounds = parser.parse_args().rounds
    unit = baseline()
    with tempfile.TemporaryDirectory() as tmp:
        starts = []
        for _ in range(5):
            took, client = initialize(Path(tmp))
            client.close()
            starts.append(took)
        samples = session(Path(tmp), rounds)
    print(f"python -c pass: {unit * 1000:.1f} ms (the unit)")
    rows = [("initialize (median of 5)", statistics.median(starts), 15.0),
            ("hover, median", statistics.median(samples["hover"]), None),
            ("hover, p95", p95(samples["hover"]), None),
            ("edit -> diagnostics, median", statistics.median(samples["edit"]), None),
            ("edit -> diagnostics, p95", p95(samples["edit"]), 4.0),
            ("1,000 edits: last edit -> hover answered (worst of 3)", max(samples["burst answer"]), None),
            ("1,000 edits: last edit -> its diagnostics (worst of 3)", max(samples["burst diagnostics"]), None)]
    for name, seconds, target in rows:
        ratio = seconds / unit
        verdict = "" if target is None else f"  (target <= {target:g}x: {'met' if ratio <= target else 'NOT met'})"
        print(f"  {name:55s} {seconds * 1000:8.1f} ms  {ratio:6.1f}x{verdict}")
    burst = max(samples["burst answer"])
    print(f"  the burst answered within a second of the last edit: {'yes' if burst < 1.0 else 'NO'}")


if __name__ == "__main__":
    main()
