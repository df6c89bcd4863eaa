"""What a data set calls its contexts and candidates, and the adjective asked about for each attribute."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pipeline.contracts.errors import ConfigError

# The adjective asked about for an attribute ("Which summary is more <adjective>?").
DEFAULT_ADJECTIVES = {
    "coherence": "coherent",
    "consistency": "consistent",
    "fluency": "fluent",
    "relevance": "relevant",
    "naturalness": "natural",
    "engagingness": "engaging",
    "understandability": "understandable",
    "groundedness": "grounded in the facts",
    "overall": "good",
    "grammar": "grammatically correct",
    "semantics": "faithful to the semantic triples",
    "difficulty": "difficult",
    "quality": "good",
    # a judge benchmark's objective label (JudgeBench, LLMBar: the right candidate of each pair)
    "correct": "correct",
}


@dataclass(frozen=True)
class PromptWords:
    """What a dataset calls its contexts and candidates, and the adjective of each attribute."""

    context_noun: str
    candidate_noun: str
    adjectives: Mapping[str, str]
    # attribute -> an evaluation criterion in plain words ({criterion}; the attribute's name where none is given).
    criteria: Mapping[str, str] = field(default_factory=dict)
    # the nouns neither the config nor meta.json gave (the defaults, "passage" and "summary", stand in for them)
    defaulted: tuple[str, ...] = ()

    def warning(self) -> str | None:
        """What to say of nouns the data never gave (the judge would read "Passage ... Summary A"), or None."""
        if not self.defaulted:
            return None
        return (
            f"WARNING: the prompts call the contexts {self.context_noun!r} and the candidates {self.candidate_noun!r}, "
            "the defaults: nothing names them (dataset.context_noun, dataset.candidate_noun, or meta.json beside the "
            "data); the rendered prompt below is what the judge reads"
        )


def resolve_adjectives(attributes: list[str], configured: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for attribute in attributes:
        adjective = configured.get(attribute) or DEFAULT_ADJECTIVES.get(attribute)
        if not adjective:
            raise ConfigError(
                f"no adjective for attribute {attribute!r}: set dataset.adjectives.{attribute}=<adjective> "
                "(the word in 'Which summary is more <adjective>?')"
            )
        out[attribute] = adjective
    return out
