"""The demo set: written by the project itself, with a quality order known by construction.

Each context is a short passage with a good summary; the other candidates are progressively damaged copies
(candidate with damage level d is the level d-1 copy with one more damage step: a dropped word, swapped
words, a repeated word, an inserted stray word, or a sentence moved). The human score of level d is
``5 - 4 d / (n - 1)``, for every attribute, so a judge that notices damage ranks them in order.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from pipeline.config.assessment import DemoConfig
from pipeline.contracts.errors import ConfigError

ATTRIBUTES = ("coherence", "fluency")
META = {
    "task": "summarization",
    "context_noun": "passage",
    "candidate_noun": "summary",
    "attributes": list(ATTRIBUTES),
    "scale": [1, 5],
    "note": "demo set: a good summary per passage and progressively damaged copies; score = 5 - 4 d / (n - 1)",
}

PASSAGES = [
    (
        "The town council voted on Tuesday to close the old swimming pool on Mill Road after engineers found "
        "cracks in its concrete basin. Repairs would have cost more than building a new pool, the council said. "
        "A new leisure centre with two pools is planned on the site of the former bus depot and should open in "
        "three years. Until then, residents can use the pool in the neighbouring village, and the council will "
        "run a free bus there on weekends.",
        "The council closed the cracked Mill Road pool because repairs cost too much. A new leisure centre "
        "will open in three years, and a free weekend bus will take swimmers to the next village meanwhile.",
    ),
    (
        "Researchers at the university have grown tomatoes that keep fresh for twice as long as ordinary ones. "
        "The team switched off a gene that softens the fruit as it ripens, without changing its taste or "
        "colour. In tests, the tomatoes stayed firm for six weeks at room temperature. The scientists hope the "
        "work will reduce food waste, since many tomatoes spoil before they reach shops.",
        "Scientists switched off a softening gene so tomatoes stay firm for six weeks without losing taste, "
        "which could cut the number of tomatoes that spoil before reaching shops.",
    ),
    (
        "A storm brought heavy rain and winds of up to ninety kilometres an hour to the coast overnight. "
        "Several roads were flooded and a bridge over the river was closed as a precaution. About two thousand "
        "homes lost power, most of which was restored by the morning. Forecasters expect calmer weather from "
        "Thursday but warn that rivers may keep rising for another day.",
        "An overnight storm flooded roads, closed a bridge and cut power to two thousand homes, most restored "
        "by morning. Calmer weather is due on Thursday, though rivers may rise for another day.",
    ),
    (
        "The city library will stay open until ten at night from next month, after a survey showed that many "
        "students had nowhere quiet to study in the evening. The longer hours are paid for by a grant from a "
        "local charity for one year. Librarians will also add more desks and power sockets on the second "
        "floor. If the evening hours prove popular, the city may fund them permanently.",
        "Funded by a one-year charity grant, the city library will open until ten at night and add desks and "
        "sockets, because students lacked evening study space; the city may keep the hours if they are popular.",
    ),
    (
        "A family walking in the hills found a hoard of about three hundred silver coins buried under a fallen "
        "tree. Experts at the museum say the coins are nearly a thousand years old and were probably hidden "
        "during a war. The find has been reported to the coroner, who will decide whether it counts as "
        "treasure. If it does, the museum hopes to buy it and put it on display.",
        "Walkers found about three hundred thousand-year-old silver coins under a fallen tree, probably hidden "
        "in wartime. A coroner will decide if they are treasure, and the museum hopes to display them.",
    ),
    (
        "The railway company has ordered forty new electric trains to replace its diesel fleet on the northern "
        "lines. The trains are quieter, have more seats and will cut the journey between the two main cities "
        "by fifteen minutes. The first ones are due to enter service in two years, once the overhead wires are "
        "finished. The company says fares will not rise because of the change.",
        "Forty new electric trains will replace diesel ones on the northern lines in two years, adding seats "
        "and cutting fifteen minutes from the main journey, without raising fares.",
    ),
    (
        "Volunteers planted twelve thousand trees along the river banks over the weekend as part of a plan to "
        "reduce flooding downstream. The roots hold the soil together and slow the water after heavy rain. "
        "Local schools took part, and each class will look after a small area and measure how the trees grow. "
        "The organisers want to plant another twenty thousand trees next year.",
        "Volunteers and schools planted twelve thousand riverside trees to slow floodwater, with classes "
        "monitoring their growth; twenty thousand more are planned for next year.",
    ),
    (
        "A small bakery in the old market has won the national prize for the best sourdough bread. The owner "
        "started the business five years ago in her kitchen and now employs eight people. She says the secret "
        "is a long, slow rise and flour from a mill in the next valley. Since the award, queues have formed "
        "outside the shop every morning before it opens.",
        "A bakery that began in its owner's kitchen five years ago won the national sourdough prize thanks to "
        "a slow rise and local flour, and now draws queues every morning.",
    ),
]

STRAY_WORDS = ("banana", "however", "purple", "the", "seven", "quickly", "umbrella", "nevertheless")


def damage(text: str, step: int, rng: np.random.Generator) -> str:
    """Apply damage step ``step`` (cycling through five kinds) to ``text``."""
    words = text.split()
    kind = step % 5
    if kind == 0 and len(words) > 3:  # drop a word
        del words[int(rng.integers(1, len(words)))]
    elif kind == 1 and len(words) > 3:  # swap two words
        a, b = rng.choice(len(words), size=2, replace=False)
        words[a], words[b] = words[b], words[a]
    elif kind == 2:  # repeat a word
        k = int(rng.integers(0, len(words)))
        words.insert(k, words[k])
    elif kind == 3:  # insert a stray word
        words.insert(int(rng.integers(0, len(words) + 1)), str(rng.choice(STRAY_WORDS)))
    else:  # move a word far away
        k = int(rng.integers(0, len(words)))
        word = words.pop(k)
        words.insert(int(rng.integers(0, len(words) + 1)), word)
    return " ".join(words)


def demo_records(cfg: DemoConfig) -> list[dict]:
    """The demo contexts in the shared JSONL layout."""
    if not 1 <= cfg.n_contexts <= len(PASSAGES):
        raise ConfigError(
            f"config dataset.demo.n_contexts={cfg.n_contexts} must be between 1 and {len(PASSAGES)}"
        )
    if cfg.n_candidates < 2:
        raise ConfigError(f"config dataset.demo.n_candidates={cfg.n_candidates} must be at least 2")
    rng = np.random.default_rng(cfg.seed)
    records = []
    n = cfg.n_candidates
    for c, (passage, summary) in enumerate(PASSAGES[: cfg.n_contexts]):
        texts = [summary]
        for d in range(1, n):
            # two damage steps per level so neighbouring levels differ visibly
            texts.append(damage(damage(texts[-1], 2 * d, rng), 2 * d + 1, rng))
        order = rng.permutation(n)
        candidates = []
        for d in order:
            score = round(5.0 - 4.0 * d / (n - 1), 4)
            candidates.append(
                {
                    "candidate_id": f"demo-{c}:d{d}",
                    "system": f"damage-{d}",
                    "text": texts[d],
                    "scores": dict.fromkeys(ATTRIBUTES, score),
                }
            )
        records.append({"context_id": f"demo-{c}", "context": passage, "candidates": candidates})
    return records


def write_demo(cfg: DemoConfig, folder: Path) -> Path:
    """Write the demo set (JSONL + meta.json) into ``folder`` and return the JSONL path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"demo-{cfg.n_contexts}x{cfg.n_candidates}-seed{cfg.seed}.jsonl"
    # a name of this process's own: runs started at once (parallel tests, a sweep) write the same file
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for record in demo_records(cfg):
            fh.write(json.dumps(record) + "\n")
    tmp.replace(path)
    (folder / "meta.json").write_text(json.dumps(META, indent=2), encoding="utf-8")
    return path
