"""Loading: folders, imports (relative, once, cycles, not found), the standard library, names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpdsl.diagnostics import Source
from hpdsl.errors import InputError
from hpdsl.loader import MAX_FILE_BYTES, ImportPolicy, expand_paths, load_paths, load_sources
from hpdsl.resources import STDLIB_PREFIX, data_dir

FAMILY = 'family {name} {{ factory "m:F"  variant only "m:F" default }}\n'


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Return an empty folder that is also the working directory."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def names(loaded) -> list[str]:
    return [source.name for source in loaded.sources]


def codes(loaded) -> list[tuple[str, int, int, str]]:
    return [(d.span.file, d.span.line, d.span.col, d.code) for d in loaded.diagnostics]


# --------------------------------------------------------------------------
# Paths and names
# --------------------------------------------------------------------------


def test_a_folder_stands_for_its_hpf_files_sorted_and_recursive(tree: Path) -> None:
    write(tree, {"specs/b.hpf": FAMILY.format(name="b"), "specs/a.hpf": FAMILY.format(name="a"),
                 "specs/sub/c.hpf": FAMILY.format(name="c"), "specs/notes.txt": "x",
                 "specs/.hidden/d.hpf": FAMILY.format(name="d")})
    loaded = load_paths(["specs"], stdlib=False)
    assert names(loaded) == ["specs/a.hpf", "specs/b.hpf", "specs/sub/c.hpf"]
    assert loaded.diagnostics == ()
    assert len(loaded.files) == 3


def test_names_are_relative_to_the_working_directory(tree: Path) -> None:
    write(tree, {"specs/a.hpf": FAMILY.format(name="a")})
    assert names(load_paths([tree / "specs" / "a.hpf"], stdlib=False)) == ["specs/a.hpf"]
    assert names(load_paths(["./specs/../specs/a.hpf"], stdlib=False)) == ["specs/a.hpf"]


def test_a_file_given_twice_is_loaded_once(tree: Path) -> None:
    write(tree, {"a.hpf": FAMILY.format(name="a")})
    assert names(load_paths(["a.hpf", ".", "./a.hpf"], stdlib=False)) == ["a.hpf"]


def test_a_missing_path_is_an_input_error(tree: Path) -> None:
    with pytest.raises(InputError, match="'nope.hpf': no such file or folder"):
        load_paths(["nope.hpf"])


def test_a_folder_without_specs_is_an_input_error(tree: Path) -> None:
    (tree / "empty").mkdir()
    with pytest.raises(InputError, match="no .hpf files in the folder 'empty'"):
        expand_paths(["empty"])


def test_a_file_that_is_not_utf8_is_an_input_error(tree: Path) -> None:
    (tree / "bad.hpf").write_bytes(b"model \xff {}")
    with pytest.raises(InputError, match="cannot read 'bad.hpf': not UTF-8"):
        load_paths(["bad.hpf"], stdlib=False)


# --------------------------------------------------------------------------
# The standard library
# --------------------------------------------------------------------------


def test_the_standard_library_comes_first_under_its_own_names(tree: Path) -> None:
    write(tree, {"a.hpf": FAMILY.format(name="a")})
    loaded = load_paths(["a.hpf"])
    stdlib = [name for name in names(loaded) if name.startswith(f"{STDLIB_PREFIX}/")]
    assert stdlib and names(loaded) == [*stdlib, "a.hpf"]
    assert f"{STDLIB_PREFIX}/profiles/ops.hpf" in stdlib


def test_without_the_standard_library_only_the_given_files_load(tree: Path) -> None:
    write(tree, {"a.hpf": FAMILY.format(name="a")})
    assert names(load_paths(["a.hpf"], stdlib=False)) == ["a.hpf"]
    assert load_paths([], stdlib=False).sources == ()


def test_a_standard_file_also_given_is_loaded_once_under_the_given_name() -> None:
    ops = data_dir("profiles") / "ops.hpf"
    loaded = load_paths([ops])
    matching = [s for s in loaded.sources if s.text == ops.read_text()]
    assert len(matching) == 1
    assert not matching[0].name.startswith(STDLIB_PREFIX)


# --------------------------------------------------------------------------
# Imports
# --------------------------------------------------------------------------


def test_an_import_is_relative_to_the_importing_file(tree: Path) -> None:
    write(tree, {"specs/main.hpf": 'import "lib/shared.hpf"\n' + FAMILY.format(name="m"),
                 "specs/lib/shared.hpf": 'import "../../common.hpf"\n' + FAMILY.format(name="s"),
                 "common.hpf": FAMILY.format(name="c")})
    loaded = load_paths(["specs/main.hpf"], stdlib=False, imports=ImportPolicy((tree,)))
    assert names(loaded) == ["specs/main.hpf", "specs/lib/shared.hpf", "common.hpf"]
    assert loaded.diagnostics == ()


def test_an_import_outside_the_project_is_refused_without_reading_it(tree: Path) -> None:
    write(tree, {"specs/main.hpf": 'import "lib/shared.hpf"\n',
                 "specs/lib/shared.hpf": 'import "../../common.hpf"\n',
                 "common.hpf": FAMILY.format(name="c")})
    loaded = load_paths(["specs/main.hpf"], stdlib=False)
    assert names(loaded) == ["specs/main.hpf", "specs/lib/shared.hpf"]
    assert codes(loaded) == [("specs/lib/shared.hpf", 1, 8, "import-outside-project")]
    anywhere = load_paths(["specs/main.hpf"], stdlib=False, imports=ImportPolicy(anywhere=True))
    assert names(anywhere)[-1] == "common.hpf"


@pytest.mark.parametrize("target", ["/etc/passwd", "../../../../../../../../etc/passwd",
                                    "/proc/self/environ"])
def test_system_files_are_never_read_or_echoed(tree: Path, target: str) -> None:
    write(tree, {"a.hpf": f'import "{target}"\n'})
    for policy in (ImportPolicy(), ImportPolicy(anywhere=True)):
        loaded = load_paths(["a.hpf"], stdlib=False, imports=policy)
        assert names(loaded) == ["a.hpf"]
        (diagnostic,) = loaded.diagnostics
        assert diagnostic.code in ("import-outside-project", "import-not-found")
        assert "root:" not in diagnostic.message


def test_an_imported_fifo_is_refused_without_blocking(tree: Path) -> None:
    os.mkfifo(tree / "pipe.hpf")
    write(tree, {"a.hpf": 'import "pipe.hpf"\n'})
    loaded = load_paths(["a.hpf"], stdlib=False)
    assert codes(loaded) == [("a.hpf", 1, 8, "import-not-found")]
    assert "a FIFO, not a regular file" in loaded.diagnostics[0].message


def test_an_imported_device_and_a_symlink_loop_are_located_errors(tree: Path) -> None:
    (tree / "zero.hpf").symlink_to("/dev/zero")
    (tree / "loop.hpf").symlink_to(tree / "loop.hpf")
    write(tree, {"a.hpf": 'import "zero.hpf"\nimport "loop.hpf"\n'})
    loaded = load_paths(["a.hpf"], stdlib=False, imports=ImportPolicy(anywhere=True))
    assert [c[1:] for c in codes(loaded)] == [(1, 8, "import-not-found"), (2, 8, "import-not-found")]
    assert "is not a .hpf file" in loaded.diagnostics[0].message  # resolved to /dev/zero
    assert "loop" in loaded.diagnostics[1].message


def test_an_oversized_import_is_refused_and_an_oversized_root_is_a_usage_error(tree: Path) -> None:
    write(tree, {"big.hpf": "//" + "x" * MAX_FILE_BYTES, "a.hpf": 'import "big.hpf"\n'})
    loaded = load_paths(["a.hpf"], stdlib=False)
    assert "larger than 256 KiB" in loaded.diagnostics[0].message
    with pytest.raises(InputError, match="larger than 256 KiB"):
        load_paths(["big.hpf"], stdlib=False)


def test_root_paths_that_are_not_regular_files_are_usage_errors(tree: Path) -> None:
    os.mkfifo(tree / "pipe.hpf")
    (tree / "loop.hpf").symlink_to(tree / "loop.hpf")
    for path in ("pipe.hpf", "loop.hpf", "/dev/null"):
        with pytest.raises(InputError):
            load_paths([path], stdlib=False)


def test_a_search_path_lets_imports_reach_a_shared_folder(tree: Path) -> None:
    write(tree, {"project/a.hpf": 'import "../shared/s.hpf"\n', "shared/s.hpf": FAMILY.format(name="s")})
    loaded = load_paths(["project/a.hpf"], stdlib=False,
                        imports=ImportPolicy((Path("shared"),)))
    assert loaded.diagnostics == ()


def test_a_file_imported_twice_is_loaded_once(tree: Path) -> None:
    write(tree, {"a.hpf": 'import "shared.hpf"\n', "b.hpf": 'import "./shared.hpf"\n',
                 "shared.hpf": FAMILY.format(name="s")})
    loaded = load_paths(["a.hpf", "b.hpf"], stdlib=False)
    assert names(loaded) == ["a.hpf", "shared.hpf", "b.hpf"]
    assert loaded.diagnostics == ()


def test_an_import_that_does_not_exist_is_reported_at_the_string(tree: Path) -> None:
    write(tree, {"a.hpf": FAMILY.format(name="a") + '\nimport   "missing.hpf"\n'})
    loaded = load_paths(["a.hpf"], stdlib=False)
    assert codes(loaded) == [("a.hpf", 3, 10, "import-not-found")]
    diagnostic = loaded.diagnostics[0]
    assert (diagnostic.span.end_line, diagnostic.span.end_col) == (3, 23)
    assert "'missing.hpf' does not exist" in diagnostic.message
    assert len(loaded.files) == 1


def test_importing_a_folder_is_reported(tree: Path) -> None:
    write(tree, {"a.hpf": 'import "sub"\n', "sub/x.hpf": ""})
    loaded = load_paths(["a.hpf"], stdlib=False)
    assert codes(loaded) == [("a.hpf", 1, 8, "import-not-found")]
    assert "is a folder" in loaded.diagnostics[0].message


def test_an_import_cycle_is_reported_with_its_files(tree: Path) -> None:
    write(tree, {"a.hpf": 'import "b.hpf"\n', "b.hpf": 'import "c.hpf"\n',
                 "c.hpf": '// closes the cycle\nimport "a.hpf"\n'})
    loaded = load_paths(["a.hpf"], stdlib=False)
    assert codes(loaded) == [("c.hpf", 2, 8, "import-cycle")]
    assert loaded.diagnostics[0].message.endswith("a.hpf -> b.hpf -> c.hpf -> a.hpf")
    assert names(loaded) == ["a.hpf", "b.hpf", "c.hpf"]


def test_a_file_importing_itself_is_a_cycle(tree: Path) -> None:
    write(tree, {"a.hpf": 'import "a.hpf"\n'})
    loaded = load_paths(["a.hpf"], stdlib=False)
    assert codes(loaded) == [("a.hpf", 1, 8, "import-cycle")]
    assert loaded.diagnostics[0].message.endswith("a.hpf -> a.hpf")


def test_a_syntax_error_is_collected_and_the_other_files_still_load(tree: Path) -> None:
    write(tree, {"a.hpf": "model {\n", "b.hpf": FAMILY.format(name="b")})
    loaded = load_paths(["a.hpf", "b.hpf"], stdlib=False)
    assert [d.span.file for d in loaded.diagnostics] == ["a.hpf"]
    assert [file.path for file in loaded.files] == ["b.hpf"]
    assert names(loaded) == ["a.hpf", "b.hpf"]


# --------------------------------------------------------------------------
# In-memory sources
# --------------------------------------------------------------------------


def test_in_memory_sources_import_each_other_by_name(tree: Path) -> None:
    sources = [Source("main.hpf", 'import "lib.hpf"\n'), Source("lib.hpf", FAMILY.format(name="l"))]
    loaded = load_sources(sources, stdlib=False)
    assert names(loaded) == ["main.hpf", "lib.hpf"]
    assert loaded.diagnostics == ()


def test_in_memory_sources_may_import_files_on_disk(tree: Path) -> None:
    write(tree, {"disk.hpf": FAMILY.format(name="d")})
    loaded = load_sources([Source("<string>", 'import "disk.hpf"\n')], stdlib=False)
    assert names(loaded) == ["<string>", "disk.hpf"]


def test_two_different_sources_with_one_name_are_refused(tree: Path) -> None:
    with pytest.raises(InputError, match="two different sources are named 'a.hpf'"):
        load_sources([Source("a.hpf", "// one\n"), Source("a.hpf", "// two\n")])
