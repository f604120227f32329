"""A composite (vision-language) config is priced as its text model, and the import says so.

Which wrappers carry a language model in text_config, and which of their own keys are the vision
tower's, is data: the profile listing the wrapper's model_type and its `hf "WRAPPER"` block
(profiles/gemma3.hpf, llama2.hpf, deepseek.hpf; docs/importing.md, "Composite configs"). The
published files run through the real CLI; tests/importers/test_published_architectures.py holds
their counts to transformers' text model class.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.importers.hf_configs import DATA, FILES

WRAPPERS = {
    # name: (the wrapper's model_type, the text model's, a wrapper key its profile declares)
    "gemma_3_4b_it": ("gemma3", "gemma3_text", "mm_tokens_per_image"),
    "devstral_small_2_24b": ("mistral3", "ministral3", "spatial_merge_size"),
    "kimi_k2_5": ("kimi_k25", "kimi_k2", "use_unified_vision_chunk"),
}


def _hpdsl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hpdsl.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_a_composite_config_is_priced_as_its_text_model_saying_so(name: str, tmp_path: Path) -> None:
    wrapper, text_type, key = WRAPPERS[name]
    shutil.copyfile(DATA / FILES[name][0], tmp_path / "config.json")
    imported = _hpdsl("import-hf", "config.json", "--name", name, "-o", "m.hpf", "--json", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    said = f"{wrapper} is a composite config"
    assert f"warning: {said}" in imported.stderr and f"model_type {text_type}" in imported.stderr
    assert key in imported.stderr and "vision_config" in imported.stderr
    report = json.loads(imported.stdout)
    assert report["composite"].startswith(said) and key in report["composite"]
    text = (tmp_path / "m.hpf").read_text()
    assert text.startswith(f"// hpdsl import-hf: {said}") and text.splitlines()[-1] == "}"
    formatted = _hpdsl("fmt", "--check", "m.hpf", cwd=tmp_path)
    assert formatted.returncode == 0, formatted.stdout + formatted.stderr  # the note is canonical .hpf


def test_a_plain_config_has_no_composite_note(tmp_path: Path) -> None:
    shutil.copyfile(DATA / FILES["qwen3_8b"][0], tmp_path / "config.json")
    imported = _hpdsl("import-hf", "config.json", "--json", cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    report = json.loads(imported.stdout)
    assert report["composite"] is None and not report["text"].startswith("//")


def test_a_wrapper_key_no_profile_declares_is_still_refused(tmp_path: Path) -> None:
    """The wrapper's rules name its keys; one they do not name is refused, as any unknown key."""
    config = json.loads((DATA / FILES["gemma_3_4b_it"][0]).read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "mm_projector_depth": 2}))
    refused = _hpdsl("import-hf", "config.json", cwd=tmp_path)
    assert refused.returncode == 1 and "mm_projector_depth" in refused.stderr
    assert "mm_tokens_per_image" not in refused.stderr and "Traceback" not in refused.stderr


def test_an_undeclared_wrapper_s_vision_keys_are_refused(tmp_path: Path) -> None:
    """A wrapper no profile lists has no vision-tower keys: its own keys are held to the text model's rules."""
    config = json.loads((DATA / FILES["devstral_small_2_24b"][0]).read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "model_type": "acme_vl"}))
    refused = _hpdsl("import-hf", "config.json", cwd=tmp_path)
    assert refused.returncode == 1 and "multimodal_projector_bias" in refused.stderr
    assert "spatial_merge_size" in refused.stderr and "Traceback" not in refused.stderr
