"""What a call costs: the built-in price table, `Completion` (one reply with its token counts and
cost) and the cost of a call from its token counts (cached prompt tokens at their own price).

A cache hit costs nothing; its token counts are the stored ones, so token budgets replay
identically.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_super.llm.settings import LLMSettings

#: USD per million tokens (prompt, completion), as of 2025-08 (OpenAI's public price list).
#: A model name matches the longest entry it starts with ("gpt-4o-2024-08-06" -> "gpt-4o").
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-2024-05-13": (5.00, 15.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o1": (15.00, 60.00),
    "o1-mini": (1.10, 4.40),
    "o3": (2.00, 8.00),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
}
#: USD per million cached prompt tokens (`usage.prompt_tokens_details.cached_tokens`), same source;
#: models not listed here are charged the full prompt price for cached tokens.
CACHED_PRICES: dict[str, float] = {
    "gpt-4o": 1.25,
    "gpt-4o-mini": 0.075,
    "gpt-4.1": 0.50,
    "gpt-4.1-mini": 0.10,
    "gpt-4.1-nano": 0.025,
    "gpt-5": 0.125,
    "gpt-5-mini": 0.025,
    "gpt-5-nano": 0.005,
    "o1": 7.50,
    "o1-mini": 0.55,
    "o3": 0.50,
    "o3-mini": 0.55,
    "o4-mini": 0.275,
}

#: The largest token count one reply may report: 100x the longest context window offered today
#: (10M tokens, Llama 4 Scout, 2025). Anything above is a broken endpoint, not a real count.
MAX_USAGE_TOKENS = 1_000_000_000


@dataclass(frozen=True)
class Completion:
    """One model reply with its usage. A cache hit has `cached=True` and costs nothing."""

    text: str
    prompt_tokens: int  # all of them, cached ones included (as the API counts them)
    completion_tokens: int
    cost_usd: float
    cached: bool = False
    cached_prompt_tokens: int = 0  # of prompt_tokens, those the provider served from its cache


def _price_key(model: str) -> str | None:
    """The price-table entry of a model: the longest key its name starts with
    ("gpt-4o-2024-08-06" -> "gpt-4o"); None when none does."""
    name = model.rsplit("/", 1)[-1].lower()
    matches = [key for key in PRICES if name.startswith(key)]
    return max(matches, key=len) if matches else None


def price_unknown(settings: LLMSettings) -> bool:
    """Whether the run's cost would show 0 for want of a price: no `--super-price` and no entry
    of the price table for the model."""
    given = settings.price_in is not None or settings.price_out is not None
    return not given and _price_key(settings.model) is None


def model_prices(settings: LLMSettings) -> tuple[float, float]:
    """(USD per million prompt tokens, per million completion tokens) for the settings' model."""
    key = _price_key(settings.model)
    table = PRICES[key] if key else (0.0, 0.0)
    price_in = table[0] if settings.price_in is None else settings.price_in
    price_out = table[1] if settings.price_out is None else settings.price_out
    return price_in, price_out


def cached_prompt_price(settings: LLMSettings) -> float:
    """USD per million cached prompt tokens: --super-price's third value; else the table's
    cached rate for the model when its prompt price is the table's; else the prompt price."""
    if settings.price_cached is not None:
        return settings.price_cached
    key = _price_key(settings.model)
    if settings.price_in is None and key in CACHED_PRICES:
        return CACHED_PRICES[key]
    return model_prices(settings)[0]


def completion_cost(
    settings: LLMSettings, prompt_tokens: int, cached_tokens: int, completion_tokens: int
) -> float:
    """USD for one call: uncached prompt tokens at the prompt price, cached ones at the cached
    price, completion tokens at the completion price."""
    price_in, price_out = model_prices(settings)
    cached = min(cached_tokens, prompt_tokens)
    return (
        (prompt_tokens - cached) * price_in
        + cached * cached_prompt_price(settings)
        + completion_tokens * price_out
    ) / 1_000_000
