"""Hostile cache folders (hpdsl/diskcache.py, hpdsl/cli/checked.py): no planted, malformed or
mismatching entry runs code, blocks or changes a result; each is a miss, compiled and rewritten.

Every case runs the real CLI in a fresh interpreter with HPDSL_CACHE_DIR at a folder of its own,
and compares its output with a run that has no cache at all.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "llama3_8b.hpf"
BAD = "profile p { run { a 1 } }\n"


def _compile(folder: Path | str, *paths: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HPDSL_CACHE_DIR": str(folder), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "hpdsl", "compile", "--json", *paths], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The uncached answers, and the entry a cold run writes (its name and bytes)."""
    folder = tmp_path_factory.mktemp("cold")
    bad = folder.parent / "bad.hpf"
    bad.write_text(BAD)
    cold = _compile(folder)
    assert cold.returncode == 0, cold.stderr
    (entry,) = folder.iterdir()
    answers = {args: _outcome(_compile("", *args)) for args in ((), (str(EXAMPLE),), (str(bad),))}
    assert _outcome(cold) == answers[()]
    return {"answers": answers, "name": entry.name, "entry": entry.read_bytes(), "bad": str(bad)}


def _outcome(run: subprocess.CompletedProcess[str]) -> tuple[int, Any]:
    return run.returncode, json.loads(run.stdout)


def _folder(tmp_path: Path, name: str = "cache") -> Path:
    folder = tmp_path / name
    folder.mkdir(mode=0o700)
    return folder


def _forged(reference: dict[str, Any], payload: Any, *, key: str | None = None, body: bytes = b"") -> bytes:
    """Return an entry with a header that matches `payload` (as one who writes the format would)."""
    header = json.loads(reference["entry"].split(b"\n")[0])
    body = body or json.dumps(payload).encode()
    header["sha256"] = hashlib.sha256(body).hexdigest()
    if key is not None:
        header["key"] = key
    return json.dumps(header).encode() + b"\n" + body + b"\n"


def _assert_miss(reference: dict[str, Any], folder: Path, *, rewritten: bool = True, timeout: float = 120) -> None:
    run = _compile(folder, timeout=timeout)
    assert _outcome(run) == reference["answers"][()], run.stderr
    assert run.stderr == "", run.stderr
    if rewritten:
        entry = folder / reference["name"]
        assert stat.S_ISREG(entry.lstat().st_mode) and entry.read_bytes() == reference["entry"]


class _Plant:
    """A pickle that creates a file when it is unpickled."""

    def __init__(self, path: Path) -> None:
        self.path = str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def test_a_warm_compile_answers_as_an_uncached_one(reference: dict[str, Any], tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / reference["name"]).write_bytes(reference["entry"])
    run = _compile(folder)
    assert (_outcome(run), run.stderr) == (reference["answers"][()], "")


def test_planted_pickles_run_nothing(reference: dict[str, Any], tmp_path: Path) -> None:
    marker = tmp_path / "payload-ran"
    planted = pickle.dumps(_Plant(marker))
    folder = _folder(tmp_path)
    # Where this hpdsl keeps its entry, a valid header over a pickle, and where earlier ones kept pickles.
    names = [reference["name"], f"stdlib-{'0' * 32}.pickle", f"parse-{'0' * 12}-{'0' * 24}.pickle",
             f"grammar-{'0' * 24}.lark"]
    for name in names:
        (folder / name).write_bytes(planted)
    header = json.loads(reference["entry"].split(b"\n")[0])
    header["sha256"] = hashlib.sha256(planted).hexdigest()
    (folder / "stdlib-with-header.json").write_bytes(json.dumps(header).encode() + b"\n" + planted + b"\n")
    for args in ((), (str(EXAMPLE),), (reference["bad"],)):  # the cache, the fast path, Lark's path
        run = _compile(folder, *args)
        assert _outcome(run) == reference["answers"][args], run.stderr
    assert not marker.exists()
    assert (folder / reference["name"]).read_bytes() == reference["entry"]
    assert not [name for name in os.listdir(folder) if name.endswith((".pickle", ".lark"))]


WRONG_SHAPES = {
    "a list": [],
    "no fields": {},
    "a string for ok": {"ok": "yes", "summary": {}, "diagnostics": []},
    "an extra field": {"ok": True, "summary": {}, "diagnostics": [], "more": 1},
    "counts as text": {"ok": True, "diagnostics": [], "summary": {
        "files": "30", "profiles": 18, "families": 10, "models": 0, "errors": 0, "warnings": 0}},
    "a negative count": {"ok": True, "diagnostics": [], "summary": {
        "files": 30, "profiles": -1, "families": 10, "models": 0, "errors": 0, "warnings": 0}},
    "a bool for a count": {"ok": True, "diagnostics": [], "summary": {
        "files": 30, "profiles": True, "families": 10, "models": 0, "errors": 0, "warnings": 0}},
    "a missing summary key": {"ok": True, "diagnostics": [], "summary": {
        "files": 30, "profiles": 18, "families": 10, "models": 0, "errors": 0}},
    "counts that disagree with the diagnostics": {"ok": True, "diagnostics": [], "summary": {
        "files": 30, "profiles": 18, "families": 10, "models": 0, "errors": 0, "warnings": 2}},
    "another number of files": {"ok": True, "diagnostics": [], "summary": {
        "files": 29, "profiles": 18, "families": 10, "models": 0, "errors": 0, "warnings": 0}},
    "ok with an error": {"ok": True, "summary": {
        "files": 30, "profiles": 18, "families": 10, "models": 0, "errors": 1, "warnings": 0},
        "diagnostics": [{"span": ["x", 1, 1, 1, 2], "code": "syntax-error", "message": "m",
                         "severity": "error", "hint": None, "notes": []}]},
    "an unknown code": {"ok": True, "summary": {
        "files": 30, "profiles": 18, "families": 10, "models": 0, "errors": 0, "warnings": 1},
        "diagnostics": [{"span": ["x", 1, 1, 1, 2], "code": "no-such-code", "message": "m",
                         "severity": "warning", "hint": None, "notes": []}]},
    "a span of four numbers": {"ok": True, "summary": {
        "files": 30, "profiles": 18, "families": 10, "models": 0, "errors": 0, "warnings": 1},
        "diagnostics": [{"span": ["x", 1, 1, 1], "code": "syntax-error", "message": "m",
                         "severity": "warning", "hint": None, "notes": []}]},
    "a note that is a string": {"ok": True, "summary": {
        "files": 30, "profiles": 18, "families": 10, "models": 0, "errors": 0, "warnings": 1},
        "diagnostics": [{"span": ["x", 1, 1, 1, 2], "code": "syntax-error", "message": "m",
                         "severity": "warning", "hint": None, "notes": ["n"]}]},
    "a nested list for ok": {"ok": [[[[[[[[]]]]]]]], "summary": {}, "diagnostics": []},
}


@pytest.mark.parametrize("case", sorted(WRONG_SHAPES))
def test_an_entry_of_the_wrong_shape_is_a_miss(reference: dict[str, Any], tmp_path: Path, case: str) -> None:
    folder = _folder(tmp_path)
    (folder / reference["name"]).write_bytes(_forged(reference, WRONG_SHAPES[case]))
    _assert_miss(reference, folder)


def test_truncated_and_damaged_entries_are_misses(reference: dict[str, Any], tmp_path: Path) -> None:
    good: bytes = reference["entry"]
    head = good.index(b"\n") + 1
    damaged = {"empty": b"", "one byte": good[:1], "the header alone": good[:head],
               "half the body": good[:head + (len(good) - head) // 2], "no last newline": good[:-1],
               "not UTF-8": good[:head] + b"\xff\xfe" + good[head + 2:],
               "a profile emptied": good.replace(b'"profiles":18', b'"profiles":0 '),
               "deeply nested": good[:head] + b"[" * 200_000 + b"]" * 200_000 + b"\n",
               "deeply nested, its hash right": _forged(reference, None, body=b"[" * 200_000 + b"]" * 200_000),
               "NaN counts, the hash right": _forged(reference, None,
                                                         body=re.sub(rb'"files":\d+', b'"files":NaN', good[head:-1]))}
    for index, (case, data) in enumerate(damaged.items()):
        folder = _folder(tmp_path, f"case{index}")
        (folder / reference["name"]).write_bytes(data)
        _assert_miss(reference, folder)


def test_an_entry_for_another_source_is_a_miss(reference: dict[str, Any], tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    body = json.loads(reference["entry"].split(b"\n")[1])
    (folder / reference["name"]).write_bytes(_forged(reference, body, key=hashlib.sha256(b"other").hexdigest()))
    _assert_miss(reference, folder)


def test_an_entry_replaced_by_a_fifo_does_not_block(reference: dict[str, Any], tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    os.mkfifo(folder / reference["name"])
    _assert_miss(reference, folder, timeout=60)


def test_an_entry_that_is_a_symlink_or_a_folder_is_a_miss(reference: dict[str, Any], tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_bytes(reference["entry"])
    for index, target in enumerate((elsewhere, Path("/dev/zero"))):
        folder = _folder(tmp_path, f"link{index}")
        (folder / reference["name"]).symlink_to(target)
        _assert_miss(reference, folder)
    assert elsewhere.read_bytes() == reference["entry"]
    folder = _folder(tmp_path, "folder")
    (folder / reference["name"]).mkdir()
    _assert_miss(reference, folder, rewritten=False)


def test_an_oversized_entry_is_a_miss(reference: dict[str, Any], tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    with open(folder / reference["name"], "wb") as out:
        out.write(reference["entry"])
        out.truncate(9 << 20)  # sparse: past the 8 MiB cap
    _assert_miss(reference, folder)


def _lie(reference: dict[str, Any]) -> bytes:
    """A well-formed entry that says the library has an error: believed only in a private folder."""
    return _forged(reference, {"ok": False, "summary": {
        "files": 30, "profiles": None, "families": None, "models": None, "errors": 1, "warnings": 0},
        "diagnostics": [{"span": ["x", 1, 1, 1, 2], "code": "syntax-error", "message": "planted",
                         "severity": "error", "hint": None, "notes": []}]})


def test_a_folder_others_may_write_is_skipped_and_said_once(reference: dict[str, Any], tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / reference["name"]).write_bytes(_lie(reference))
    for mode in (0o770, 0o707, 0o1777):
        folder.chmod(mode)
        run = _compile(folder)
        assert _outcome(run) == reference["answers"][()], run.stderr
        lines = run.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"hpdsl: not caching in '{folder}': others may write"), lines
        assert f"{mode & 0o777:04o}" in lines[0] or f"{mode:04o}" in lines[0]
        assert os.listdir(folder) == [reference["name"]] and (folder / reference["name"]).read_bytes() == _lie(reference)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a folder to another user")
def test_a_folder_of_another_user_is_skipped(reference: dict[str, Any], tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    (folder / reference["name"]).write_bytes(_lie(reference))
    os.chown(folder, 54321, -1)
    run = _compile(folder)
    assert _outcome(run) == reference["answers"][()], run.stderr
    assert run.stderr.startswith(f"hpdsl: not caching in '{folder}': it belongs to another user (uid 54321)")
    assert len(run.stderr.splitlines()) == 1


def test_a_new_cache_folder_is_private(reference: dict[str, Any], tmp_path: Path) -> None:
    folder = tmp_path / "new" / "hpdsl"
    run = _compile(folder)
    assert _outcome(run) == reference["answers"][()] and run.stderr == ""
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert [path.name for path in folder.iterdir()] == [reference["name"]]


def test_the_xdg_cache_folder_follows_the_same_rules(reference: dict[str, Any], tmp_path: Path) -> None:
    marker = tmp_path / "payload-ran"
    folder = tmp_path / "hpdsl"
    folder.mkdir(mode=0o700)
    for name in (reference["name"], f"stdlib-{'0' * 32}.pickle", f"grammar-{'0' * 24}.lark"):
        (folder / name).write_bytes(pickle.dumps(_Plant(marker)))
    env = {key: value for key, value in os.environ.items() if key != "HPDSL_CACHE_DIR"}
    env.update(XDG_CACHE_HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    for args in ((), (reference["bad"],)):
        run = subprocess.run([sys.executable, "-m", "hpdsl", "compile", "--json", *args], env=env, cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
        assert _outcome(run) == reference["answers"][args] and run.stderr == "", run.stderr
    assert not marker.exists()
    assert sorted(os.listdir(folder)) == [reference["name"]]
    assert (folder / reference["name"]).read_bytes() == reference["entry"]
