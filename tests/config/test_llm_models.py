"""``llm.models``: several meta-agent models, each on its endpoint or server with its price; the single-model
form is one model; a bad entry names its key."""

from __future__ import annotations

import pytest

from metasearch.config import load_config_data
from metasearch.errors import ConfigError

SMOL = {"model": "local:smollm2-135m", "python": ".venv-vllm/bin/python", "gpus": []}
GEMMA = {"model": "local:gemma3-270m", "python": ".venv-vllm/bin/python", "gpus": ["1"]}


def test_the_single_model_form_is_one_model() -> None:
    llm = load_config_data({"llm": {"base_url": "http://h:8000/v1", "model": "m"}}).config.llm
    ((name, arm),) = llm.arms()
    assert (name, arm is llm, llm.choose) == ("m", True, "bandit")
    assert load_config_data({"llm": {"serve": SMOL}}).config.llm.arms()[0][0] == "local:smollm2-135m"
    assert load_config_data({}).config.llm.arms()[0][0] == "default"


def test_each_model_is_a_single_model_section() -> None:
    llm = load_config_data(
        {
            "llm": {
                "api_key_env": "KEY",
                "max_tokens": 512,
                "choose": "uniform",
                "models": [
                    {"name": "smol", "serve": SMOL},
                    {"name": "gemma", "serve": GEMMA},
                    {"name": "api", "base_url": "http://h/v1", "model": "big", "api_key_env": "OTHER",
                     "price_input_per_mtok": 3.0, "price_output_per_mtok": 15.0},
                ],
            }
        }
    ).config.llm  # fmt: skip
    arms = dict(llm.arms())
    assert list(arms) == ["smol", "gemma", "api"] and llm.choose == "uniform"
    assert arms["smol"].serve is not None and arms["smol"].serve.model == "local:smollm2-135m"
    assert arms["api"].base_url == "http://h/v1" and arms["api"].model == "big"
    assert (arms["api"].price_input_per_mtok, arms["api"].price_output_per_mtok) == (3.0, 15.0)
    assert (arms["api"].api_key_env, arms["smol"].api_key_env) == ("OTHER", "KEY")
    assert all(arm.max_tokens == 512 and not arm.models for arm in arms.values())
    assert llm.served_gpus() == ["1"]


@pytest.mark.parametrize(
    ("llm", "needle"),
    [
        ({"models": [{"name": "a", "base_url": "u"}, {"name": "b"}]}, "llm.models[1].base_url: "),
        (
            {"models": [{"name": "a", "base_url": "u", "serve": SMOL}]},
            "llm.models[0].base_url: Value error, set either base_url",
        ),
        ({"models": [{"name": "a", "base_url": "u"}, {"name": "a", "base_url": "v"}]}, "['a'] appear more"),
        ({"models": [{"name": "a", "base_url": "u", "url": "v"}]}, "llm.models[0].url: Extra inputs"),
        ({"models": [{"name": "a b", "base_url": "u"}]}, "llm.models[0].name"),
        (
            {"models": [{"name": "a", "base_url": "u", "price_input_per_mtok": -1}]},
            "llm.models[0].price_input",
        ),
        ({"models": [{"name": "a", "serve": {"model": "m", "gpus": "x"}}]}, "llm.models[0].serve.gpus"),
        ({"base_url": "u", "models": [{"name": "a", "base_url": "v"}]}, "set base_url on each entry"),
        ({"choose": "best"}, "llm.choose: Input should be 'bandit', 'uniform' or 'first'"),
    ],
)
def test_a_bad_entry_names_its_key(llm: dict, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config_data({"llm": llm})
    assert needle in str(info.value)
