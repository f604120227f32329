"""The editor integrations: the Neovim plugin attaches one client per root, the VS Code extension packages cleanly."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "editors/nvim/hpdsl.lua"
VSCODE = REPO / "editors/vscode"


def test_the_plugin_s_filetype_is_the_readme_recipe_s() -> None:
    recipe = (REPO / "editors/README.md").read_text()
    [named] = set(re.findall(r'hpf = "(\w+)"', recipe))
    assert set(re.findall(r'filetypes = \{ "(\w+)" \}', recipe)) == {named}
    plugin = PLUGIN.read_text()
    assert f"setfiletype {named}" in plugin and f'pattern = "{named}"' in plugin
    package = json.loads((VSCODE / "package.json").read_text())
    assert package["contributes"]["languages"][0]["id"] == named


def test_the_vscode_extension_declares_what_vsce_asks_for() -> None:
    package = json.loads((VSCODE / "package.json").read_text())
    assert package["repository"]["directory"] == "editors/vscode"
    assert package["license"] == "Apache-2.0" and "Apache License" in (VSCODE / "LICENSE").read_text()
    ignored = (VSCODE / ".vscodeignore").read_text().split()
    assert "node_modules/**" in ignored and "src/**" in ignored
    assert "esbuild src/extension.js" in package["scripts"]["build"]
    assert package["scripts"]["vscode:prepublish"] == "npm run build"
    assert "./dist/extension.js" in (VSCODE / package["main"]).read_text()


NVIM_SCRIPT = """
local roots = {}
for _, client in pairs(vim.lsp.get_active_clients()) do
  if client.name == "hpdsl" then
    table.insert(roots, client.config.root_dir)
  end
end
table.sort(roots)
local out = io.open(vim.env.HPDSL_NVIM_OUT, "w")
out:write(vim.bo.filetype .. "\\n" .. table.concat(roots, "\\n"))
out:close()
"""


@pytest.mark.skipif(shutil.which("nvim") is None, reason="Neovim is not installed")
def test_neovim_attaches_one_client_per_root(tmp_path: Path) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    for root in (first, second):
        (root / "specs").mkdir(parents=True)
        (root / "pyproject.toml").write_text("")
    files = [first / "a.hpf", first / "specs/b.hpf", second / "c.hpf"]
    for path in files:
        path.write_text("// empty\n")
    report = tmp_path / "report.txt"
    script = tmp_path / "report.lua"
    script.write_text(NVIM_SCRIPT)
    server = "{" + ", ".join(json.dumps(part) for part in (sys.executable, "-m", "hpdsl", "lsp")) + "}"
    commands = [f"lua vim.g.hpdsl_server_cmd = {server}", f"luafile {PLUGIN}"]
    commands += [f"edit {path}" for path in files] + ["sleep 2", f"luafile {script}", "qall!"]
    args = ["nvim", "--headless", "-u", "NONE", "-i", "NONE", "-n"]
    for command in commands:
        args += ["-c", command]
    env = {**os.environ, "HPDSL_NVIM_OUT": str(report), "PYTHONPATH": str(REPO)}
    subprocess.run(args, cwd=tmp_path, env=env, timeout=60, check=True, capture_output=True)
    filetype, *roots = report.read_text().splitlines()
    assert filetype == "hpdsl"
    assert roots == [str(first), str(second)]
