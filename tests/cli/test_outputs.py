"""Outputs that cannot destroy: `-o` refusals, `fmt --write` through links, read-only files, temp files."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hpdsl.api import output_target, rewrite_source, write_text_atomic
from hpdsl.cli import EXIT_OK, EXIT_USAGE
from hpdsl.errors import InputError
from tests.cli.test_cli import GOOD, assert_no_traceback, hpdsl

UNFORMATTED = 'family tiny {\n    factory "pkg.mod:Tiny"\n  variant only "pkg.mod:Tiny" default }\n'


@pytest.fixture
def work(tmp_path: Path) -> Path:
    (tmp_path / "good.hpf").write_text(GOOD)
    return tmp_path


def _refused(work: Path, *args: str) -> str:
    run = hpdsl("compile", "good.hpf", *args, cwd=work)
    assert_no_traceback(run)
    assert run.returncode == EXIT_USAGE, run.stderr
    return run.stderr


def test_o_onto_the_input_is_refused_and_the_input_kept(work: Path) -> None:
    assert "an input of this run" in _refused(work, "-o", "good.hpf")
    assert (work / "good.hpf").read_text() == GOOD


def test_o_onto_a_fifo_a_device_and_a_symlink_is_refused(work: Path) -> None:
    os.mkfifo(work / "pipe")
    (work / "link.json").symlink_to(work / "real.json")
    assert "not a regular file" in _refused(work, "-o", "pipe")
    assert "not a regular file" in _refused(work, "-o", "/dev/null")
    assert "symbolic link" in _refused(work, "-o", "link.json")
    assert stat.S_ISFIFO((work / "pipe").lstat().st_mode)
    assert (work / "link.json").is_symlink() and not (work / "real.json").exists()


def test_o_with_a_trailing_slash_is_refused(work: Path) -> None:
    assert "names a folder" in _refused(work, "-o", "nodir/")
    assert not (work / "nodir").exists()


def test_o_onto_a_new_regular_file_still_works(work: Path) -> None:
    run = hpdsl("compile", "good.hpf", "--no-stdlib", "-o", "out/registry.json", cwd=work)
    assert run.returncode == EXIT_OK, run.stderr
    assert (work / "out" / "registry.json").is_file()
    assert [p.name for p in (work / "out").iterdir()] == ["registry.json"]


def test_a_failed_write_leaves_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "out.json").write_text("old")
    with pytest.raises(UnicodeEncodeError):  # fails inside the write, after the temp file exists
        write_text_atomic(tmp_path / "out.json", "x" * 100_000 + "\ud800")
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]
    assert (tmp_path / "out.json").read_text() == "old"


def test_an_output_directory_that_cannot_be_created_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError):
        write_text_atomic(tmp_path / "file" / "out.json", "{}")
    assert output_target(tmp_path / "new.json") == tmp_path / "new.json"


def test_fmt_write_through_a_symlink_formats_the_target(work: Path) -> None:
    (work / "real.hpf").write_text(UNFORMATTED)
    (work / "link.hpf").symlink_to("real.hpf")
    run = hpdsl("fmt", "--write", "link.hpf", cwd=work)
    assert run.returncode == EXIT_OK, run.stderr
    assert (work / "link.hpf").is_symlink()
    assert (work / "real.hpf").read_text() != UNFORMATTED


def test_fmt_write_keeps_hard_links_and_permissions(work: Path) -> None:
    (work / "a.hpf").write_text(UNFORMATTED)
    os.link(work / "a.hpf", work / "b.hpf")
    os.chmod(work / "a.hpf", 0o640)
    run = hpdsl("fmt", "--write", "a.hpf", cwd=work)
    assert run.returncode == EXIT_OK, run.stderr
    assert os.path.samefile(work / "a.hpf", work / "b.hpf")
    assert (work / "b.hpf").read_text() != UNFORMATTED
    assert stat.S_IMODE((work / "a.hpf").stat().st_mode) == 0o640


def test_fmt_write_keeps_permissions_of_a_single_file(tmp_path: Path) -> None:
    (tmp_path / "a.hpf").write_text(UNFORMATTED)
    os.chmod(tmp_path / "a.hpf", 0o600)
    rewrite_source(tmp_path / "a.hpf", GOOD)
    assert stat.S_IMODE((tmp_path / "a.hpf").stat().st_mode) == 0o600
    assert (tmp_path / "a.hpf").read_text() == GOOD


def test_fmt_write_refuses_a_read_only_file(work: Path) -> None:
    (work / "ro.hpf").write_text(UNFORMATTED)
    os.chmod(work / "ro.hpf", 0o444)
    run = hpdsl("fmt", "--write", "ro.hpf", cwd=work)
    assert_no_traceback(run)
    assert run.returncode == EXIT_USAGE
    assert "read-only" in run.stderr
    assert (work / "ro.hpf").read_text() == UNFORMATTED
