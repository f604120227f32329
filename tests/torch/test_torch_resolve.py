"""resolve_family: every resolution rule and error, on the standard families and hand-made ones."""

from __future__ import annotations

import copy
import itertools
from pathlib import Path

import pytest

from hpdsl.errors import ResolutionError
from hpdsl.ir.conditions import matching_variants, violated_requires
from hpdsl.ir.nodes import Condition, FamilyIR, SelectorIR, VariantIR
from hpdsl.torch.resolve import (
    FamilyRequest,
    explicit_parameters,
    is_allowed,
    resolve_family,
    trusted_prefixes,
)

FIXTURES = ("torch_fixture_modules.",)


def request(registry, name: str, **arguments) -> FamilyRequest:
    return FamilyRequest(registry.family(name), arguments)


def family(*variants: VariantIR, selectors=(), requires=(), parallel=None) -> FamilyIR:
    """A family built directly as IR, past the checker (to reach runtime-only errors)."""
    return FamilyIR("custom", "torch_fixture_modules:Plain", parallel, tuple(selectors), tuple(requires),
                    tuple(variants))


def ref(name: str) -> Condition:
    return Condition("ref", name=name, text=name)


# --------------------------------------------------------------------------
# Selection on the standard families
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("context", "variant"), [
    (None, "local"), ({"cp_size": 1}, "local"), ({"cp_size": 2}, "ring"), ({"tp_size": 8}, "local"),
])
def test_attention_follows_the_cp_axis(stdlib_registry, context, variant) -> None:
    resolved = resolve_family(request(stdlib_registry, "attention"), context)
    assert resolved.variant.name == variant
    assert resolved.parallel == (variant == "ring")
    assert resolved.selectors == {"backend": "sdpa", "qk_norm": False, "qk_norm_full": False}


@pytest.mark.parametrize(("arguments", "context", "variant"), [
    ({}, None, "local"),
    ({"use_mxfp8": False}, None, "local"),
    ({}, {"ep_size": 4}, "ep"),
    ({"use_mxfp8": True}, None, "mxfp8"),
    ({"use_mxfp8": True}, {"ep_size": 2}, "mxfp8"),
])
def test_grouped_experts_selection(stdlib_registry, arguments, context, variant) -> None:
    resolved = resolve_family(request(stdlib_registry, "grouped_experts", **arguments), context)
    assert resolved.variant.name == variant
    assert resolved.constructor.__name__ == resolved.variant.path.split(":")[1]


@pytest.mark.parametrize(("arguments", "context", "message"), [
    ({"use_fused_mxfp8": True}, None, "use_fused_mxfp8 requires use_mxfp8=True"),
    ({"use_fused_mxfp8": True, "use_mxfp8": True}, None,
     "use_fused_mxfp8=True is not supported; use non-fused MXFP8"),
    ({"use_mxfp8": True}, {"tp_size": 2}, "MXFP8 experts require TP=CP=PP=1"),
    ({"use_mxfp8": True}, {"ep_size": 4}, "MXFP8 experts support only EP=1 or EP=2"),
])
def test_requires_report_their_message_and_the_module_path(stdlib_registry, arguments, context,
                                                           message) -> None:
    with pytest.raises(ResolutionError) as error:
        resolve_family(request(stdlib_registry, "grouped_experts", **arguments), context,
                       module_fqn="layers.7.ffn.experts")
    text = str(error.value)
    assert text.startswith("layers.7.ffn.experts: family 'grouped_experts': " + message)
    assert "grouped_experts.hpf:" in text  # where the require is declared


def test_the_first_violated_require_is_reported(stdlib_registry) -> None:
    # Both the fused requires fail; the one declared first wins.
    with pytest.raises(ResolutionError, match="requires use_mxfp8=True"):
        resolve_family(request(stdlib_registry, "grouped_experts", use_fused_mxfp8=True),
                       {"tp_size": 2})


def test_gated_delta_net_backend_picks_the_kernel(stdlib_registry) -> None:
    assert resolve_family(request(stdlib_registry, "gated_delta_net")).variant.name == "chunked"
    eager = resolve_family(request(stdlib_registry, "gated_delta_net", backend="eager"))
    assert eager.variant.name == "eager" and eager.clause == "when backend == eager"


def test_runtime_selection_agrees_with_the_checkers_evaluator(stdlib_registry) -> None:
    """Over the whole allowed domain, resolution picks what conditions.matching_variants picks."""
    experts = stdlib_registry.family("grouped_experts")
    for mxfp8, fused, tp, ep, etp in itertools.product([False, True], [False, True], [1, 2], [1, 2, 4], [1, 2]):
        env = {"use_mxfp8": mxfp8, "use_fused_mxfp8": fused, "tp": tp, "cp": 1, "ep": ep, "pp": 1, "etp": etp,
               "parallel": ep > 1}
        req = request(stdlib_registry, "grouped_experts", use_mxfp8=mxfp8, use_fused_mxfp8=fused)
        context = {"tp_size": tp, "ep_size": ep, "etp_size": etp}
        if violated_requires(experts.requires, env):
            with pytest.raises(ResolutionError):
                resolve_family(req, context)
            continue
        (expected,) = matching_variants(experts.variants, env)
        assert resolve_family(req, context).variant == expected


# --------------------------------------------------------------------------
# Selectors
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("arguments", "message"), [
    ({"use_mxfp8": 1}, r"selector 'use_mxfp8' must be a bool, found 1 \(int\)"),
    ({"use_mxfp8": "true"}, r"selector 'use_mxfp8' must be a bool, found 'true' \(str\)"),
])
def test_bool_selectors_take_bools_only(stdlib_registry, arguments, message) -> None:
    with pytest.raises(ResolutionError, match=message):
        resolve_family(request(stdlib_registry, "grouped_experts", **arguments))


def test_enum_selectors_take_their_values_and_suggest(stdlib_registry) -> None:
    with pytest.raises(ResolutionError, match=r"must be one of sdpa, eager, found 'sdp' \(str\); did you mean 'sdpa'"):
        resolve_family(request(stdlib_registry, "attention", backend="sdp"))
    with pytest.raises(ResolutionError, match="must be one of sdpa, eager, found 2"):
        resolve_family(request(stdlib_registry, "attention", backend=2))


def test_int_selectors_are_ints_in_range_and_a_bool_is_not_one() -> None:
    level = SelectorIR("level", "int", 1, low=1, high=3)
    fam = family(VariantIR("v", "torch_fixture_modules:Everything", default=True), selectors=[level])
    assert resolve_family(FamilyRequest(fam, {"level": 3}), allowed_prefixes=FIXTURES).selectors == {"level": 3}
    for value, message in [(True, "must be an int, found True"), (4, r"must lie in \[1, 3\], found 4"),
                           (0, r"must lie in \[1, 3\], found 0"), (2.0, "must be an int")]:
        with pytest.raises(ResolutionError, match=message):
            resolve_family(FamilyRequest(fam, {"level": value}), allowed_prefixes=FIXTURES)


def test_a_selector_without_default_must_be_stated() -> None:
    fam = family(VariantIR("v", "torch_fixture_modules:Plain", default=True),
                 selectors=[SelectorIR("fast", "bool", None)])
    with pytest.raises(ResolutionError, match="selector 'fast' has no default; state it"):
        resolve_family(FamilyRequest(fam), allowed_prefixes=FIXTURES)
    assert resolve_family(FamilyRequest(fam, {"fast": True}), allowed_prefixes=FIXTURES).selectors["fast"]


# --------------------------------------------------------------------------
# Exactly one variant
# --------------------------------------------------------------------------


def test_no_matching_variant_is_an_error() -> None:
    fam = family(VariantIR("fast", "torch_fixture_modules:Plain", when=ref("parallel")), parallel="tp")
    with pytest.raises(ResolutionError, match=r"<root>: family 'custom': no variant matches .*parallel=false"):
        resolve_family(FamilyRequest(fam), allowed_prefixes=FIXTURES)


def test_two_matching_variants_are_an_error() -> None:
    fam = family(VariantIR("a", "torch_fixture_modules:Plain", when=ref("parallel")),
                 VariantIR("b", "torch_fixture_modules:Plain", when=ref("parallel")), parallel="ep")
    with pytest.raises(ResolutionError, match="variants 'a', 'b' all match"):
        resolve_family(FamilyRequest(fam), {"ep_size": 2}, allowed_prefixes=FIXTURES)


def test_an_evaluation_error_names_the_module() -> None:
    fam = family(VariantIR("a", "torch_fixture_modules:Plain", default=True, when=ref("missing")))
    with pytest.raises(ResolutionError, match=r"^x\.y: family 'custom': condition 'missing' uses 'missing'"):
        resolve_family(FamilyRequest(fam), module_fqn="x.y", allowed_prefixes=FIXTURES)


# --------------------------------------------------------------------------
# Import paths
# --------------------------------------------------------------------------


def test_import_paths_outside_the_allowed_prefixes_are_never_imported() -> None:
    import sys

    fam = family(VariantIR("v", "evil_module_for_hpdsl_tests:Thing", default=True))
    with pytest.raises(ResolutionError, match="outside the trusted prefixes \\('hpdsl.torch.modules'\\)"):
        resolve_family(FamilyRequest(fam))
    assert "evil_module_for_hpdsl_tests" not in sys.modules
    assert not is_allowed("hpdsl.torchvision:X", ("hpdsl.torch.",))
    assert is_allowed("hpdsl.torch:X", ("hpdsl.torch",)) and is_allowed("a.b.c:X", ("a.b.",))


@pytest.mark.parametrize(("path", "message"), [
    ("hpdsl.torch.no_such_module:Thing", "cannot import 'hpdsl.torch.no_such_module:Thing'"),
    ("hpdsl.torch.modules:NoSuchClass", "has no attribute 'NoSuchClass'"),
    ("torch_fixture_modules:NOT_CALLABLE", "is a int, not a torch nn.Module class"),
    ("torch_fixture_modules:not_a_module", "is a function, not a torch nn.Module class"),
    ("hpdsl.torch.agreement:nn.utils.weight_norm", "must have the form 'package.module:Name'"),
    ("hpdsl.torch.resolve:importlib.import_module", "must have the form 'package.module:Name'"),
    ("torch_fixture_modules:Tensor_alias", "has no attribute"),
    ("hpdsl.torch.modules", "must have the form 'package.module:Name'"),
])
def test_import_failures_are_resolution_errors(path: str, message: str) -> None:
    """Each is refused before anything in it is called: no attribute walk, only nn.Module classes."""
    fam = family(VariantIR("v", path, default=True))
    with pytest.raises(ResolutionError, match=message):
        resolve_family(FamilyRequest(fam), allowed_prefixes=("hpdsl.torch.", *FIXTURES))


# --------------------------------------------------------------------------
# Constructors and arguments
# --------------------------------------------------------------------------


def test_arguments_must_be_named_by_the_constructor_and_accepted_by_the_variant(stdlib_registry) -> None:
    ok = resolve_family(request(stdlib_registry, "attention", layer_index=3))
    assert ok.arguments == {"layer_index": 3}
    with pytest.raises(ResolutionError, match=r"layers\.2\.mixer: .*unknown arguments \['foo'\] .* it accepts \['layer_index'\]"):
        resolve_family(request(stdlib_registry, "attention", foo=1), module_fqn="layers.2.mixer")
    # chunk_size is a parameter of GatedDeltaNet, but the variant does not accept it.
    with pytest.raises(ResolutionError, match=r"unknown arguments \['chunk_size'\]"):
        resolve_family(request(stdlib_registry, "gated_delta_net", chunk_size=16))


def test_accepts_without_a_parameter_and_catch_all_kwargs_accept_nothing() -> None:
    accepts_only = family(VariantIR("v", "torch_fixture_modules:Plain", default=True, accepts=("height",)))
    with pytest.raises(ResolutionError, match=r"unknown arguments \['height'\]"):
        resolve_family(FamilyRequest(accepts_only, {"height": 1}), allowed_prefixes=FIXTURES)
    catch_all = family(VariantIR("v", "torch_fixture_modules:CatchAll", default=True, accepts=("x",)))
    with pytest.raises(ResolutionError, match=r"unknown arguments \['x'\]"):
        resolve_family(FamilyRequest(catch_all, {"x": 1}), allowed_prefixes=FIXTURES)
    both = family(VariantIR("v", "torch_fixture_modules:Plain", default=True, accepts=("width",)))
    assert resolve_family(FamilyRequest(both, {"width": 2}), allowed_prefixes=FIXTURES).arguments == {"width": 2}


def test_the_constructor_must_name_config_or_module() -> None:
    fam = family(VariantIR("v", "torch_fixture_modules:NoConfig", default=True))
    with pytest.raises(ResolutionError, match="must explicitly accept 'config' .* or 'module'"):
        resolve_family(FamilyRequest(fam), allowed_prefixes=FIXTURES)


def test_runtime_arguments_are_not_request_arguments(stdlib_registry) -> None:
    for name in ("config", "module", "module_fqn", "context", "mesh"):
        with pytest.raises(ResolutionError, match="build_family's own keywords"):
            request(stdlib_registry, "attention", **{name: None})


def test_signatures_are_cached(stdlib_registry) -> None:
    req = request(stdlib_registry, "attention", layer_index=0)
    resolve_family(req)
    before = explicit_parameters.cache_info().hits
    for _ in range(5):
        resolve_family(req)
    assert explicit_parameters.cache_info().hits >= before + 5


# --------------------------------------------------------------------------
# Purity
# --------------------------------------------------------------------------


def test_resolution_never_mutates_its_input(stdlib_registry) -> None:
    arguments = {"use_mxfp8": True, "nested": {"kept": [1]}}
    fam = stdlib_registry.family("grouped_experts")
    snapshot = copy.deepcopy(fam)
    req = FamilyRequest(fam, arguments)
    arguments["use_mxfp8"] = False
    arguments["nested"]["kept"].append(2)
    assert req.arguments == {"use_mxfp8": True, "nested": {"kept": [1]}}
    context = {"ep_size": 2}
    with pytest.raises(ResolutionError, match="unknown arguments \\['nested'\\]"):
        resolve_family(req, context)
    assert req.arguments == {"use_mxfp8": True, "nested": {"kept": [1]}}
    assert context == {"ep_size": 2} and fam == snapshot
    with pytest.raises(TypeError):
        req.arguments["use_mxfp8"] = False  # type: ignore[index]


def test_with_arguments_returns_a_new_request(stdlib_registry) -> None:
    base = request(stdlib_registry, "grouped_experts", use_mxfp8=True)
    changed = base.with_arguments(use_mxfp8=False)
    assert resolve_family(changed).variant.name == "local"
    assert resolve_family(base).variant.name == "mxfp8"
    assert changed.to_dict() == {"family": "grouped_experts", "arguments": {"use_mxfp8": False}}
    assert base.to_dict()["arguments"] == {"use_mxfp8": True}


def test_a_class_imported_into_a_trusted_module_but_defined_elsewhere_is_refused() -> None:
    fam = family(VariantIR("v", "torch_fixture_modules:Linear", default=True))
    with pytest.raises(ResolutionError, match="defined in 'torch.nn.modules.linear'"):
        resolve_family(FamilyRequest(fam), allowed_prefixes=FIXTURES)


def test_trusted_prefixes_come_from_the_environment_and_the_pyproject(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fam = family(VariantIR("v", "torch_fixture_modules:Plain", default=True))
    with pytest.raises(ResolutionError, match="HPDSL_TRUSTED"):
        resolve_family(FamilyRequest(fam))
    monkeypatch.setenv("HPDSL_TRUSTED", "other.pkg, torch_fixture_modules")
    assert resolve_family(FamilyRequest(fam)).variant.name == "v"
    monkeypatch.delenv("HPDSL_TRUSTED")
    (tmp_path / "pyproject.toml").write_text('[tool.hpdsl]\ntrusted = ["torch_fixture_modules"]\n')
    monkeypatch.chdir(tmp_path)
    assert "torch_fixture_modules" in trusted_prefixes()
    assert resolve_family(FamilyRequest(fam)).variant.name == "v"


def test_the_pyproject_is_found_above_the_working_directory_as_the_cli_finds_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from a project's subfolder, the library trusts what the project's pyproject lists.

    A pyproject.toml without a `[tool.hpdsl]` table in between is passed over, as
    hpdsl/cli/project.py passes it over.
    """
    monkeypatch.delenv("HPDSL_TRUSTED", raising=False)
    (tmp_path / "pyproject.toml").write_text('[tool.hpdsl]\ntrusted = ["torch_fixture_modules"]\n')
    inner = tmp_path / "pkg" / "sub"
    inner.mkdir(parents=True)
    (tmp_path / "pkg" / "pyproject.toml").write_text('[project]\nname = "pkg"\n')
    monkeypatch.chdir(inner)
    assert "torch_fixture_modules" in trusted_prefixes()
    (tmp_path / "pkg" / "pyproject.toml").write_text('[tool.hpdsl]\ntrusted = ["elsewhere"]\n')
    assert "torch_fixture_modules" not in trusted_prefixes() and "elsewhere" in trusted_prefixes()
