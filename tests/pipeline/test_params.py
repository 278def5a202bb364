from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mimesis.params import ParamsError, build, deep_merge, set_profile, stage_params

PARAMS = """\
# comment kept
profile: default
seed: 7
train_user:
  lr: 0.1
  lora: {r: 8, alpha: 16}
profiles:
  smoke:
    train_user: {lora: {r: 2}}
  gpu:
    train_user: {}
"""


@pytest.fixture
def params_path(tmp_path: Path) -> Path:
    p = tmp_path / "params.yaml"
    p.write_text(PARAMS)
    return p


def test_profile_overrides_are_deep_merged(params_path):
    assert stage_params("train_user", params_path) == {
        "lr": 0.1, "lora": {"r": 8, "alpha": 16}, "seed": 7, "profile": "default"}
    smoke = stage_params("train_user", params_path, profile="smoke")
    assert smoke["lora"] == {"r": 2, "alpha": 16}
    assert smoke["profile"] == "smoke"


def test_unknown_stage_and_profile_are_clear_errors(params_path):
    with pytest.raises(ParamsError, match="no section 'label'"):
        stage_params("label", params_path)
    with pytest.raises(ParamsError, match="unknown profile"):
        stage_params("train_user", params_path, profile="huge")


def test_set_profile_rewrites_only_the_profile_line(params_path):
    assert set_profile(params_path, "smoke") is True
    text = params_path.read_text()
    assert "profile: smoke" in text and "# comment kept" in text
    assert stage_params("train_user", params_path)["lora"]["r"] == 2
    assert set_profile(params_path, "smoke") is False


@dataclass(frozen=True)
class Lora:
    r: int = 4
    alpha: int = 8


@dataclass(frozen=True)
class DemoParams:
    lr: float
    seed: int
    profile: str
    lora: Lora = field(default_factory=Lora)


def test_build_nested_and_rejects_unknown_keys(params_path):
    p = build(DemoParams, stage_params("train_user", params_path))
    assert p.lora == Lora(r=8, alpha=16)
    with pytest.raises(ParamsError, match="unknown params"):
        build(DemoParams, {"lr": 1.0, "seed": 1, "profile": "x", "typo": 3})


def test_deep_merge_does_not_mutate():
    base = {"a": {"b": 1, "c": 2}}
    out = deep_merge(base, {"a": {"b": 5}})
    assert out == {"a": {"b": 5, "c": 2}} and base == {"a": {"b": 1, "c": 2}}


BASE_MODULE = '''from __future__ import annotations
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Inner:
    k: int = 1


@dataclass(frozen=True)
class Base:
    inner: Inner = field(default_factory=Inner)
    maybe: Inner | None = None
'''
# The subclass's module never imports Inner: its fields' types live in the base's module.
SUB_MODULE = '''from __future__ import annotations
from dataclasses import dataclass

from params_base_demo import Base


@dataclass(frozen=True)
class Sub(Base):
    lr: float = 0.1
'''


def test_build_resolves_nested_types_where_they_are_declared(tmp_path, monkeypatch):
    import importlib

    (tmp_path / "params_base_demo.py").write_text(BASE_MODULE)
    (tmp_path / "params_sub_demo.py").write_text(SUB_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    base = importlib.import_module("params_base_demo")
    sub = importlib.import_module("params_sub_demo")
    assert not hasattr(sub, "Inner")
    p = build(sub.Sub, {"lr": 0.5, "inner": {"k": 3}, "maybe": {"k": 4}}, "demo")
    assert p.inner == base.Inner(k=3) and p.maybe == base.Inner(k=4)
    with pytest.raises(ParamsError, match=r"demo\.inner: unknown params \['kk'\]"):
        build(sub.Sub, {"inner": {"kk": 3}}, "demo")


def test_agent_stage_params_nest_without_importing_the_nested_types():
    import mimesis.stages.distill_agent as distill
    import mimesis.stages.train_agent as train
    from mimesis.rl.agent_training import DynamicSamplingParams
    from mimesis.users.spec import UserSamplingParams

    for module, cls in ((train, train.TrainAgentParams), (distill, distill.DistillAgentParams)):
        assert not hasattr(module, "UserSamplingParams")
        p = build(cls, {"user": {"max_new_tokens": 8}, "dynamic_sampling": {"max_rounds": 2}})
        assert p.user == UserSamplingParams(max_new_tokens=8)
        assert p.dynamic_sampling == DynamicSamplingParams(max_rounds=2)
