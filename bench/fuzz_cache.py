"""The `cache` target of bench/fuzz.py: `hpdsl compile` over a tampered cache folder.

Each input makes a fresh cache folder and tampers with it: the entry
(hpdsl/diskcache.py) replaced by random bytes, cut short, its bytes or its values edited with
its hash left as it was, forged with its hash right but its values reshaped (the
payload through fuzz_inputs' JSON mutations), its header edited, a planted
pickle, a FIFO, a symlink (to a copy, /dev/zero, nowhere, itself), a folder, an
oversized file; beside it stale pickles and Lark caches of earlier versions,
other entries, half-written temporary files; the folder's and the entry's
permission bits, and HPDSL_CACHE_DIR itself (a symlink to the folder, a path
below a file, off). Then `hpdsl compile --json` of the standard library runs
in-process, as the CLI runs it (click's runner over the real command).

A finding is a traceback (any exception escaping the command), an exit code or
output other than the uncached run's, a planted pickle that ran, a hang (a
wall-clock bound: a blocked open spends no CPU), stderr other than the one
"not caching" line exactly where others may write into the folder, or a miss
in a writable private folder that is not rewritten with the right entry. The
one entry that may change the output is one whose header and values hold
together (a forged one, its hash right, as only its owner could write it in a
private folder): the output must then be what it says.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import random
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import Any

from fuzz_inputs import json_value, mutate_data, mutate_json_text
from fuzz_targets import LAST, Finding

from hpdsl import diskcache

WALL_SECONDS = 20
"""An input still running after this wall time is a hang (a blocked read costs no CPU time)."""

_FOLDER_MODES = (0o700, 0o700, 0o700, 0o500, 0o750, 0o755, 0o770, 0o707, 0o777, 0o1777, 0o300)
_ENTRY_MODES = (0o600, 0o600, 0o400, 0o000, 0o644, 0o666)
_TEMPLATE = {"ok": True, "summary": {"files": 30, "profiles": 18, "families": 10, "models": 0, "errors": 0,
                                     "warnings": 2},
             "diagnostics": [{"span": ["<hpdsl>/profiles/x.hpf", 1, 1, 1, 2], "code": "syntax-error",
                              "message": "m", "severity": "warning", "hint": "h", "notes": []},
                             {"span": ["y", 2, 3, 2, 9], "code": "syntax-error", "message": "n",
                              "severity": "warning", "hint": None,
                              "notes": [[["y", 1, 1, 1, 2], "first here"]]}]}
"""A well-formed payload with diagnostics, notes and hints for the forged entries to reshape."""


class _Plant:
    """A pickle that creates a file when it is unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


class _Hang(Exception):
    pass


def _invoke(folder: str) -> tuple[int, str, str, BaseException | None]:
    """Run `hpdsl compile --json` with the cache at `folder`; return (exit code, stdout, stderr, exception)."""
    from click.testing import CliRunner

    from hpdsl.cli import main

    saved = os.environ.get("HPDSL_CACHE_DIR")
    os.environ["HPDSL_CACHE_DIR"] = folder
    diskcache.private_folder.cache_clear()
    try:
        result = CliRunner().invoke(main, ["compile", "--json"])
    finally:
        diskcache.private_folder.cache_clear()
        if saved is None:
            del os.environ["HPDSL_CACHE_DIR"]
        else:
            os.environ["HPDSL_CACHE_DIR"] = saved
    escaped = result.exception if not isinstance(result.exception, SystemExit) else None
    return result.exit_code, result.stdout, result.stderr, escaped


@cache
def _reference() -> tuple[int, Any, str, bytes]:
    """Return the uncached run's exit code and JSON, and the name and bytes of the entry a cold run writes."""
    code, out, err, escaped = _invoke("")
    assert escaped is None and code == 0 and err == "", (code, err, escaped)
    with tempfile.TemporaryDirectory() as folder:
        cold = _invoke(folder)
        assert cold[:2] == (code, out), cold
        (name,) = os.listdir(folder)
        entry = Path(folder, name).read_bytes()
    return code, json.loads(out), name, entry


def _forge(body: bytes, header: dict[str, Any] | None = None) -> bytes:
    """Return an entry whose header hashes `body` right (what only the folder's owner could write)."""
    header = dict(header or json.loads(_reference()[3].split(b"\n")[0]))
    header["sha256"] = hashlib.sha256(body).hexdigest()
    return json.dumps(header).encode() + b"\n" + body + b"\n"


def _content(rng: random.Random, root: Path, steps: list[str]) -> tuple[str, bytes | None]:
    """Choose what stands at the entry's name: (kind, bytes written or None for a special file)."""
    good = _reference()[3]
    head, body = good.split(b"\n")[0], good.split(b"\n")[1]
    roll = rng.randrange(13)
    if roll == 0:
        return "good", good
    if roll == 1:
        return "random bytes", rng.randbytes(rng.choice([0, 1, 16, 300, 4096]))
    if roll == 2:
        return "truncated", good[:rng.randrange(len(good))]
    if roll == 3:
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return "edited, its hash as it was", bytes(data)
    if roll in (4, 5):
        base = json.loads(body) if rng.random() < 0.5 else _TEMPLATE
        if rng.random() < 0.7:
            payload = json.dumps(mutate_data(base, rng) if rng.random() < 0.9 else json_value(rng))
        else:
            payload = mutate_json_text(json.dumps(base), rng)
        steps.append(f"forged payload {payload[:2000]}")
        return "forged", _forge(payload.encode())
    if roll == 6:
        header = mutate_data(json.loads(head), rng)
        steps.append(f"header {json.dumps(header)[:500]}")
        return "header edited", json.dumps(header).encode() + b"\n" + body + b"\n"
    if roll == 7:
        planted = pickle.dumps(_Plant(str(root / "payload-ran")))
        return "planted pickle", _forge(planted) if rng.random() < 0.5 else planted
    if roll == 8:
        return "huge", None
    if roll == 9:
        values = json.loads(body)
        if rng.random() < 0.5:  # a plausible lie: a count of declarations changed ("a profile emptied")
            values["summary"][rng.choice(["profiles", "families", "models"])] = rng.randrange(40)
        else:
            values = mutate_data(values, rng)
        payload = json.dumps(values, separators=(",", ":"))
        steps.append(f"payload {payload[:2000]}")
        return "values edited, the hash as it was", head + b"\n" + payload.encode() + b"\n"
    return rng.choice(["fifo", "symlink", "folder", "absent"]), None


def _special(kind: str, entry: Path, root: Path, rng: random.Random, steps: list[str]) -> None:
    """Make the entry a FIFO, a symlink, a folder or an oversized file."""
    if kind == "fifo":
        os.mkfifo(entry)
    elif kind == "folder":
        entry.mkdir()
    elif kind == "huge":
        with open(entry, "wb") as out:
            out.write(_reference()[3])
            out.truncate(diskcache.MAX_ENTRY_BYTES + rng.choice([1, 1 << 20]))
    elif kind == "symlink":
        copy = root / "elsewhere.json"
        copy.write_bytes(_reference()[3])
        target = rng.choice([str(copy), "/dev/zero", str(root / "nowhere"), str(entry), str(root)])
        steps.append(f"symlink to {target}")
        entry.symlink_to(target)


def _extras(folder: Path, root: Path, rng: random.Random, steps: list[str]) -> None:
    """Plant what may lie beside the entry: earlier versions' pickles, other entries, temporary files."""
    planted = pickle.dumps(_Plant(str(root / "payload-ran")))
    if rng.random() < 0.3:
        for name in ("stdlib-" + "0" * 32 + ".pickle", "parse-" + "0" * 12 + "-" + "0" * 24 + ".pickle",
                     "grammar-" + "0" * 24 + ".lark"):
            (folder / name).write_bytes(planted)
        steps.append("legacy pickles")
    if rng.random() < 0.2:
        (folder / ("stdlib-" + "%032x" % rng.getrandbits(128) + ".json")).write_bytes(rng.randbytes(64))
        steps.append("another entry")
    if rng.random() < 0.1:
        (folder / ".tmp1234.tmp").write_bytes(_reference()[3][:40])
        steps.append("a half-written temporary file")


@contextmanager
def _wall_clock(seconds: float) -> Iterator[None]:
    def _alarm(_signum: int, _frame: Any) -> None:
        raise _Hang()

    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _chmod_all(path: Path) -> None:
    for node in [path, *path.rglob("*")]:
        if not node.is_symlink() and node.exists() and not stat.S_ISFIFO(node.lstat().st_mode):
            node.chmod(0o700)


def cache_target(rng: random.Random) -> None:
    """Compile the standard library over a tampered cache folder: the uncached answer, nothing run, no hang."""
    root = Path(tempfile.mkdtemp(prefix="hpdsl-fuzz-cache-"))
    try:
        _one(rng, root)
    finally:
        _chmod_all(root)
        shutil.rmtree(root, ignore_errors=True)


def _one(rng: random.Random, root: Path) -> None:
    steps: list[str] = []
    LAST["input"] = steps
    folder = root / "cache"
    folder.mkdir(mode=0o700)
    name = _reference()[2]
    kind, data = _content(rng, root, steps)
    steps.insert(0, kind)
    entry = folder / name
    if data is not None:
        entry.write_bytes(data)
        if rng.random() < 0.2:
            mode = rng.choice(_ENTRY_MODES)
            entry.chmod(mode)
            steps.append(f"entry mode {mode:04o}")
    elif kind != "absent":
        _special(kind, entry, root, rng, steps)
    _extras(folder, root, rng, steps)
    mode = rng.choice(_FOLDER_MODES) if rng.random() < 0.4 else 0o700
    folder.chmod(mode)
    steps.append(f"folder mode {mode:04o}")
    where = _where(folder, root, rng, steps)
    before = _listing(folder)
    writable = os.access(folder, os.W_OK | os.X_OK)
    with _wall_clock(WALL_SECONDS):
        try:
            code, out, err, escaped = _invoke(where)
        except _Hang:
            raise Finding(f"hang: compile still running after {WALL_SECONDS} s of wall time") from None
    if escaped is not None:
        raise escaped
    _judge(kind, data, where, folder, code, out, err, before=before, writable=writable, mode=mode)
    if (root / "payload-ran").exists():
        raise Finding("a planted pickle ran")


def _where(folder: Path, root: Path, rng: random.Random, steps: list[str]) -> str:
    """Return what HPDSL_CACHE_DIR says: mostly the folder, else a symlink to it, a path below a file, off."""
    roll = rng.random()
    if roll < 0.85:
        return str(folder)
    if roll < 0.93:
        link = root / "link"
        link.symlink_to(folder)
        steps.append("HPDSL_CACHE_DIR a symlink to the folder")
        return str(link)
    if roll < 0.97:
        blocker = root / "a-file"
        blocker.write_text("x")
        steps.append("HPDSL_CACHE_DIR below a file")
        return str(blocker / "below")
    steps.append("HPDSL_CACHE_DIR empty")
    return ""


def _listing(folder: Path) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    for path in folder.iterdir():
        regular = stat.S_ISREG(path.lstat().st_mode)
        found[path.name] = path.read_bytes() if regular and path.stat().st_size < 1 << 20 else None
    return found


def _judge(kind: str, data: bytes | None, where: str, folder: Path, code: int, out: str, err: str, *,
           before: dict[str, bytes | None], writable: bool, mode: int) -> None:
    """Raise a Finding unless the run answered as an uncached one (or as a well-formed forged entry says)."""
    reference_code, reference, name, good = _reference()
    used = where in (str(folder), str(folder.parent / "link"))
    shared = used and bool(mode & 0o022)
    expected_err = f"hpdsl: not caching in '{where}': others may write into it" if shared else ""
    if (err.splitlines()[0] if err else "").split(" (mode")[0] != expected_err or err.count("\n") > 1:
        raise Finding(f"stderr {err[:300]!r}, expected {expected_err!r}")
    try:
        printed = json.loads(out)
    except ValueError:
        raise Finding(f"exit {code}, stdout not JSON: {out[:300]!r}") from None
    readable = data is not None and os.access(folder / name, os.R_OK)
    believed = used and not shared and readable and _said(data) is not None
    expected_code, expected = (_said(data) or (reference_code, reference)) if believed else (reference_code, reference)
    if (code, printed) != (expected_code, expected):
        raise Finding(f"exit {code} with {out[:400]!r}, expected exit {expected_code}")
    if shared or not used:
        if _listing(folder) != before:
            raise Finding("a cache folder that may not be used was changed")
    elif writable and kind != "folder" and not believed:
        entry = folder / name
        if not stat.S_ISREG(entry.lstat().st_mode) or entry.read_bytes() != good:
            raise Finding("a miss was not rewritten with the right entry")


def _said(data: bytes | None) -> tuple[int, Any] | None:
    """Return (exit code, JSON) an entry says, if its header is right and its values hold together; else None.

    The header is checked here, apart from hpdsl/diskcache.py, so a reader that trusted a wrong hash
    would be a finding; the values go through the reader's own decoding (hpdsl/cli/checked.py).
    """
    from hpdsl.cli.checked import KIND, _decode, _key_and_sources
    from hpdsl.cli.json_output import versioned

    found = _key_and_sources()
    if data is None or found is None:
        return None
    head, newline, body = data.partition(b"\n")
    try:
        header = json.loads(head)
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return None
    right = {"hpdsl": KIND, "format": 1, "key": found[0], "sha256": hashlib.sha256(body[:-1]).hexdigest()}
    if not newline or not body.endswith(b"\n") or header != right:
        return None
    report = _decode(payload, found[1])
    if report is None:
        return None
    ok, summary, diagnostics, _sources = report
    printed = {"ok": ok, "diagnostics": [d.to_json() for d in diagnostics], "output": None, "summary": summary}
    return (0 if ok else 1), versioned(printed)  # what `compile --json` prints: schema_version first


SECONDS = {"cache": 5.0}
"""The time bound (CPU): a miss compiles the standard library again."""

TARGETS = {"cache": cache_target}
"""The target, by the name --targets takes (registered in bench/fuzz.py)."""
