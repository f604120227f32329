"""Unit tests of check_slots: top-level defaults across files, completeness, and the registry's slots."""

from __future__ import annotations

import json

from hpdsl.api import check_sources, compile_sources
from hpdsl.check import check_files
from hpdsl.diagnostics import Diagnostic, Source
from hpdsl.ir.convert import registry_from_data, registry_to_json
from hpdsl.model.slots import SLOTS
from hpdsl.syntax import parse_text

# Every slot bound to `f` is priced from its layout (a slot whose family declares none is unpriced-slot).
FAMILY = ('family f { factory "pkg.mod:F"  variant local "pkg.mod:F" default params(weight)'
          '  layout { weight (hidden) replicate } }\n')
ALL = "slots { " + "  ".join(f"{slot} f" for slot in SLOTS) + " }\n"
MODEL = "model m : p { ffn_width 64  hidden 64  layers 1  heads 4  vocab 10  layer_norms 1 }\n"
PROFILE = 'vocabulary { attMM "projections" }\nprofile p { kind k { ops { attMM 4 } } }\n'


def _errors(*texts: str) -> list[Diagnostic]:
    files = [parse_text(text, f"f{index}.hpf") for index, text in enumerate(texts)]
    return [d for d in check_files(files)[1] if d.is_error]


def test_two_files_binding_one_slot_at_top_level_is_an_error_naming_both() -> None:
    (error,) = _errors(FAMILY + ALL + PROFILE, "slots { mlp f }\n")
    assert (error.code, error.span.file, error.span.line) == ("duplicate-slot", "f1.hpf", 1)
    (note,) = error.notes
    assert (note.span.file, note.span.line) == ("f0.hpf", 2)
    assert "already has a default binding" in error.message


def test_a_second_default_of_a_standard_slot_names_the_standard_library() -> None:
    result = check_sources([Source("user.hpf", "slots { norm norm }\n")])
    (error,) = result.errors
    assert (error.code, error.span.file) == ("duplicate-slot", "user.hpf")
    assert "standard library (<hpdsl>/profiles/slots.hpf)" in error.message
    assert "--no-stdlib" in (error.hint or "")
    assert error.notes[0].span.file == "<hpdsl>/profiles/slots.hpf"


def test_the_defaults_may_be_split_over_files() -> None:
    first, second = ALL.replace("  mlp f", ""), "slots { mlp f }\n"
    assert _errors(FAMILY + first + PROFILE + MODEL, second) == []


def test_a_used_profile_missing_slots_is_reported_once_at_the_profile() -> None:
    errors = _errors(FAMILY + "slots { mlp f }\n" + PROFILE + MODEL + MODEL.replace("m :", "n :"))
    (error,) = errors
    assert (error.code, error.span.line) == ("unbound-slot", 4)
    assert "'attention'" in error.message and "'mlp'" not in error.message
    assert "model 'm'" in error.message
    assert error.notes[0].span.line == 5


def test_a_profile_override_completes_the_defaults() -> None:
    partial = ALL.replace("  head f", "")
    assert [e.code for e in _errors(FAMILY + partial + PROFILE + MODEL)] == ["unbound-slot"]
    completed = PROFILE.replace("profile p {", "profile p { slots { head f }")
    assert _errors(FAMILY + partial + completed + MODEL) == []


def test_a_kind_binding_does_not_complete_its_profile() -> None:
    partial = ALL.replace("  mlp f", "")
    in_kind = PROFILE.replace("kind k {", "kind k { slots { mlp f }")
    assert [e.code for e in _errors(FAMILY + partial + in_kind + MODEL)] == ["unbound-slot"]


def test_the_registry_carries_the_bindings_and_loads_them_back() -> None:
    vector = "attMM 4  attBMM 2  ffMM 3  softmax 1  dropout 0  normOp 2  gather 4  headCast 1  ffAct 1  linrec 0"
    text = (FAMILY.replace("family f", "family g") + "profile p { slots { mlp g }\n"
            f"  kind k {{ slots {{ experts g }}  ops {{ {vector} }} }} }}\n")
    registry = compile_sources([Source("user.hpf", text)]).ir
    data = json.loads(registry_to_json(registry))
    profile = data["profiles"]["p"]
    assert profile["slots"]["mlp"] == "g" and profile["slots"]["head"] == "output_head"
    assert profile["kinds"]["k"]["slots"] == {**profile["slots"], "experts": "g"}
    assert list(profile["slots"]) == list(SLOTS)
    assert registry_from_data(data) == registry


def test_the_position_bias_slot_is_needed_only_where_a_model_states_position_buckets() -> None:
    partial = ALL.replace("  position_bias f", "")
    assert _errors(FAMILY + partial + PROFILE + MODEL) == []
    (error,) = _errors(FAMILY + partial + PROFILE + MODEL.replace("layer_norms 1", "layer_norms 1  position_buckets 32"))
    assert error.code == "unbound-slot" and "'position_bias'" in error.message


def test_the_mtp_proj_slot_is_needed_only_where_a_model_states_mtp() -> None:
    partial = ALL.replace("  mtp_proj f", "")
    assert _errors(FAMILY + partial + PROFILE + MODEL) == []
    (error,) = _errors(FAMILY + partial + PROFILE + MODEL.replace("layer_norms 1", "layer_norms 1  mtp 1"))
    assert error.code == "unbound-slot" and "'mtp_proj'" in error.message


def test_the_latent_proj_slot_is_needed_only_where_a_moe_block_states_latent_width() -> None:
    partial = ALL.replace("  latent_proj f", "")
    moe = MODEL.replace("layer_norms 1", "layer_norms 1  moe { experts 4  top_k 2  expert_width 32 }")
    assert _errors(FAMILY + partial + PROFILE + moe) == []
    (error,) = _errors(FAMILY + partial + PROFILE + moe.replace("expert_width 32", "expert_width 32  latent_width 16"))
    assert error.code == "unbound-slot" and "'latent_proj'" in error.message
