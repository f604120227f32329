"""How fast the language server re-checks a 2,000-line workspace after one edit.

Generates a workspace (profiles, families and models spread over files, about
2,000 lines), opens a document that imports all of it, and times the server's
analysis (hpdsl/lsp/analysis.py `analyse`: parse, check, lower, exactly what a
didChange runs) cold and then after editing one line of the open document, with
the imported files and the standard library unchanged (their parse is reused).
Prints the times beside the 100 ms an editor can wait. Run:

    .venv/bin/python bench/bench_lsp.py
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

from hpdsl.lsp.analysis import analyse

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


def main() -> None:
    """Time a cold analysis and re-checks after one-line edits."""
    with tempfile.TemporaryDirectory() as tmp:
        document = make_workspace(Path(tmp))
        lines = sum(len(p.read_text().splitlines()) for p in Path(tmp).glob("*.hpf"))
        text = document.read_text()
        start = time.perf_counter()
        first = analyse(document, text)
        cold = time.perf_counter() - start
        warm = []
        for n in range(10):
            edited = text.replace("layers 12", f"layers {12 + n % 2}")
            start = time.perf_counter()
            again = analyse(document, edited)
            warm.append(time.perf_counter() - start)
        assert not [d for d in first.diagnostics if d.is_error], first.diagnostics[:3]
        assert again.registry is not None
        median = statistics.median(warm)
        print(f"workspace: {lines:,} lines in {len(list(Path(tmp).glob('*.hpf')))} files, "
              f"{len(first.registry.models) if first.registry else 0} models")
        print(f"  first analysis (cold):           {cold * 1000:8.1f} ms")
        print(f"  re-check after one edit (median): {median * 1000:8.1f} ms  (target 100 ms: "
              f"{median * 1000 / 100:.2f}x of it)")


if __name__ == "__main__":
    main()
