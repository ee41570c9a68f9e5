"""The model endpoint's settings of a run: the agent's (`--super-model`, `--super-base-url`, the
price, the cache, the circuit breaker) and the LMR judge's, with the API key read from the
environment and refused when no request could carry it.
"""

from __future__ import annotations

import os
from pathlib import Path

from pytest_super.llm import LLMSettings
from pytest_super.llm.breaker import ENDPOINT_DOWN_FILE
from pytest_super.settings.readers import SettingError
from pytest_super.settings.table import DEFAULT_BASE_URL, SettingValues

#: where the API key is read, first first (llm.api_key_from_env)
API_KEY_VARIABLES = ("SUPER_API_KEY", "OPENAI_API_KEY")


def model_settings(agent: str | None, values: SettingValues, run_dir: Path) -> LLMSettings | None:
    from pytest_super.agents import needs_llm

    if not agent or not needs_llm(agent):
        return None
    model = values["model"]
    if not model:
        raise SettingError(f"--super-agent={agent} talks to a model: name it with --super-model")
    price_in, price_out, price_cached = values["price"] or (None, None, None)
    base_url = values["base_url"]
    api_key = _endpoint_key(base_url, f"--super-agent={agent}")
    return LLMSettings(
        model=model,
        base_url=base_url,
        api_key=api_key,
        price_in=price_in,
        price_out=price_out,
        price_cached=price_cached,
        cache_dir=values["llm_cache"],
        breaker_threshold=values["llm_breaker"],
        breaker_check_s=values["llm_breaker_check"],
        down_flag=str(run_dir / ENDPOINT_DOWN_FILE),
    )


def judge_settings(values: SettingValues) -> LLMSettings | None:
    """The LMR judge's endpoint (`--super-judge-model`): the run's base URL and key, upstream's
    sampling (temperature 0; top_p and the token cap the API's defaults), no circuit breaker
    (a judge's failure is the task's judge error, never the run's)."""
    from pytest_super.lmr.judge import JUDGE_TEMPERATURE

    model = values["judge_model"]
    if not model:
        return None
    base_url = values["base_url"]
    return LLMSettings(
        model=model,
        base_url=base_url,
        api_key=_endpoint_key(base_url, f"--super-judge-model={model}"),
        temperature=JUDGE_TEMPERATURE,
        top_p=1.0,
        max_tokens=4096,
        cache_dir=values["llm_cache"],
        breaker_threshold=0,
    )


def _endpoint_key(base_url: str, who: str) -> str | None:
    """The API key for `who` (an option that asks the endpoint), refused when none is set and
    the endpoint is the default one."""
    api_key = _api_key()
    if api_key is None and base_url.rstrip("/") == DEFAULT_BASE_URL:
        raise SettingError(
            f"{who} asks {DEFAULT_BASE_URL} but no API key is set: export "
            "SUPER_API_KEY (or OPENAI_API_KEY), or point --super-base-url at your own endpoint"
        )
    return api_key


def _api_key() -> str | None:
    """The API key (`llm.api_key_from_env`), refused when it holds what an HTTP header cannot
    carry (a non-ASCII letter, a newline or another control character): an error naming the
    variable, never showing the key."""
    from pytest_super.llm import api_key_from_env

    variable = next((v for v in API_KEY_VARIABLES if os.environ.get(v)), None)
    key = os.environ[variable] if variable else ""
    if not (key.isascii() and key.isprintable()):
        raise SettingError(
            f"environment variable {variable} holds a character that is not printable ASCII (a "
            "non-ASCII letter, a newline or another control character), so no request could "
            "carry it: set the key again without it (the value is not shown here)"
        )
    return api_key_from_env()
