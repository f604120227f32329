"""Language-server latency over real JSON-RPC, as ratios to `python -c pass` (the machine's own unit of time).

Starts `python -m hpdsl lsp` with the test client (tests/lsp_client.py) and times:
initialize (spawn to response), hover on examples/deepseek_v3.hpf's model,
edit -> diagnostics (a one-character didChange to the publishDiagnostics that
carries its version), and a burst of 1,000 edits (from the last edit to the
answer of the hover sent right after it, and to the diagnostics of the last
version); and, in-process, the re-check of a document importing a generated
2,000-line workspace after a one-line edit. Targets (docs/language-server.md): initialize <= 15x, edit ->
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

# A generated 2,000-line workspace (profiles, families and models over 25 imported files), for the
# in-process re-check time of one document that imports it all (hpdsl/lsp/analysis.py `analyse`).
VECTOR = "attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0"


def _profile(i: int) -> str:
    return (f"profile p{i} {{\n  model_types \"p{i}\"\n  default dense\n"
            f"  kind dense {{\n    ffn dense\n    ops {{ {VECTOR} }}\n  }}\n"
            f"  kind moe from dense {{\n    ffn moe\n  }}\n}}\n")


def _family(i: int) -> str:
    return (f"family f{i} {{\n  factory \"pkg.mod:F{i}\"\n  parallel tp\n  selector fast: bool = false\n"
            f"  variant base \"pkg.mod:Base{i}\" default params(up, down)\n"
            f"  variant fast \"pkg.mod:Fast{i}\" when fast params(up, down)\n"
            f"  layout {{\n    up.weight (ffn_width, hidden) colwise\n    down.weight (hidden, ffn_width) rowwise\n"
            f"  }}\n}}\n")


def _model(i: int, profile: int) -> str:
    return (f"model m{i} : p{profile} {{\n  hidden {256 + 64 * (i % 4)}\n  layers 12\n  heads 8\n  vocab 32000\n"
            f"  ffn_width 1024\n  first_k_dense 2\n  moe {{ experts 8  top_k 2  expert_width 512 }}\n}}\n")


def make_workspace(folder: Path, files: int = 25) -> Path:
    """Write `files` imported files and one open document; return the document's path."""
    imports = []
    for f in range(files):
        parts = [_profile(f), _family(f)] + [_model(f * 10 + j, f) for j in range(6)]
        (folder / f"part{f}.hpf").write_text("\n".join(parts))
        imports.append(f'import "part{f}.hpf"')
    document = folder / "main.hpf"
    document.write_text("\n".join(imports) + "\n\n" + _model(9999, 0))
    return document


def workspace_recheck() -> None:
    """Print the cold analysis and the median re-check after a one-line edit of the generated workspace."""
    from hpdsl.lsp.analysis import analyse

    with tempfile.TemporaryDirectory() as tmp:
        document = make_workspace(Path(tmp))
        lines = sum(len(p.read_text().splitlines()) for p in Path(tmp).glob("*.hpf"))
        text = document.read_text()
        start = time.perf_counter()
        first = analyse(document, text)
        cold = time.perf_counter() - start
        warm = []
        for n in range(10):
            start = time.perf_counter()
            analyse(document, text.replace("layers 12", f"layers {12 + n % 2}"))
            warm.append(time.perf_counter() - start)
        assert not [d for d in first.diagnostics if d.is_error], first.diagnostics[:3]
        models = len(first.registry.models) if first.registry else 0
        print(f"workspace: {lines:,} lines in {len(list(Path(tmp).glob('*.hpf')))} files, {models} models")
        print(f"  first analysis (cold):            {cold * 1000:8.1f} ms")
        print(f"  re-check after one edit (median): {statistics.median(warm) * 1000:8.1f} ms")


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
    workspace_recheck()
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
