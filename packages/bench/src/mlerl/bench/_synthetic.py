"""Seeded generators for the synthetic stand-in data sets (essays, tweets, insults, materials).

Each generator is a pure function of (n, seed) returning a DataFrame; the same arguments give
the same bytes on every machine (numpy's PCG64 ``default_rng``). Signals are learnable but not
trivial: labels depend on several interacting features plus label noise, so a constant model,
a bag-of-words linear model and a non-linear model score clearly apart.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

TOPICS = [
    "car-free cities",
    "exploring Venus",
    "the face on Mars",
    "driverless cars",
    "online school",
    "summer projects",
    "the electoral college",
    "community service",
    "phones while driving",
    "extracurricular activities",
]
PLAIN = [
    "good",
    "bad",
    "thing",
    "stuff",
    "people",
    "idea",
    "very",
    "really",
    "lot",
    "get",
    "make",
    "think",
    "because",
    "so",
    "big",
    "many",
    "time",
    "way",
    "want",
    "like",
]
ADVANCED = [
    "consequently",
    "substantial",
    "perspective",
    "advocate",
    "mitigate",
    "inherent",
    "nevertheless",
    "compelling",
    "facilitate",
    "paramount",
    "detrimental",
    "moreover",
    "contemplate",
    "ubiquitous",
    "scrutinize",
    "feasible",
    "pragmatic",
    "undeniably",
]
CONNECT = [
    "However,",
    "Furthermore,",
    "In addition,",
    "For example,",
    "In conclusion,",
    "On the other hand,",
    "Therefore,",
]
FILLER = [
    "i",
    "the",
    "a",
    "to",
    "and",
    "it",
    "at",
    "on",
    "my",
    "with",
    "just",
    "day",
    "today",
    "going",
    "work",
    "home",
    "now",
    "got",
    "back",
    "this",
    "that",
    "was",
    "be",
    "for",
    "out",
    "up",
    "all",
    "we",
    "they",
    "new",
    "time",
    "morning",
    "night",
    "week",
]
POSITIVE = [
    "love",
    "happy",
    "great",
    "awesome",
    "amazing",
    "fun",
    "glad",
    "thanks",
    "nice",
    "best",
    "excited",
    "lovely",
    "wonderful",
    "cool",
    "enjoy",
    "yay",
    "blessed",
    "proud",
    "sweet",
    "beautiful",
    "thrilled",
    "grateful",
    "stoked",
    "delighted",
    "fab",
    "brilliant",
    "cheerful",
    "splendid",
    "jolly",
    "marvelous",
]
NEGATIVE = [
    "hate",
    "sad",
    "sick",
    "bad",
    "tired",
    "sorry",
    "miss",
    "awful",
    "worst",
    "hurts",
    "bored",
    "upset",
    "annoying",
    "terrible",
    "ugh",
    "lonely",
    "angry",
    "broke",
    "sucks",
    "crying",
    "scared",
    "gutted",
    "miserable",
    "dreadful",
    "grumpy",
    "heartbroken",
    "furious",
    "gloomy",
    "exhausted",
    "horrid",
]
INTENSIFIERS = ["so", "really", "very", "soo", "totally"]
INSULTS = [
    "idiot",
    "moron",
    "stupid",
    "loser",
    "pathetic",
    "clueless",
    "dumb",
    "ignorant",
    "fool",
    "troll",
    "liar",
    "clown",
]
PRAISE = ["smart", "right", "kind", "helpful", "brilliant", "fair", "honest", "correct"]
THIRD = ["the referee", "that politician", "this article", "the coach", "the author", "he"]
CHATTER = [
    "lol",
    "seriously",
    "well",
    "honestly",
    "i mean",
    "come on",
    "again",
    "today",
    "about this",
    "in the game",
    "on this one",
    "as usual",
]


def _misspell(word: str, rng: np.random.Generator) -> str:
    if len(word) < 4:
        return word
    i = int(rng.integers(1, len(word) - 2))
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def _essay(q: float, rng: np.random.Generator) -> str:
    """One essay for latent quality ``q`` (higher: longer, richer, fewer typos, connectives)."""
    topic = TOPICS[int(rng.integers(len(TOPICS)))]
    n_sent = int(np.clip(round(6 + 3 * q + rng.normal(0, 2)), 2, 24))
    p_adv = 0.4 / (1 + np.exp(-1.5 * q))
    p_typo = 0.12 / (1 + np.exp(1.5 * q))
    p_conn = 0.5 / (1 + np.exp(-q))
    sentences = [f"I think {topic} is important."]
    for _ in range(n_sent):
        n_words = int(np.clip(rng.normal(9 + 2 * q, 3), 4, 25))
        words = []
        for _ in range(n_words):
            pool = ADVANCED if rng.random() < p_adv else PLAIN
            w = pool[int(rng.integers(len(pool)))]
            words.append(_misspell(w, rng) if rng.random() < p_typo else w)
        lead = CONNECT[int(rng.integers(len(CONNECT)))] + " " if rng.random() < p_conn else ""
        sentences.append(lead + " ".join(words) + ".")
    return " ".join(sentences)


def essays(n: int, seed: int) -> pd.DataFrame:
    """Columns essay_id, full_text, score (int 1-6): score = round(3.5 + 1.3 q + noise)."""
    rng = np.random.default_rng(seed)
    q = rng.normal(0, 1, n)
    score = np.clip(np.round(3.5 + 1.3 * q + rng.normal(0, 0.6, n)), 1, 6).astype(int)
    ids = [f"e{h:07x}" for h in rng.choice(16**7, size=n, replace=False)]
    return pd.DataFrame({"essay_id": ids, "full_text": [_essay(x, rng) for x in q], "score": score})


def _words(rng: np.random.Generator, lo: int, hi: int) -> list[str]:
    return [FILLER[int(i)] for i in rng.integers(len(FILLER), size=int(rng.integers(lo, hi)))]


def _pick(words: list[str], rng: np.random.Generator) -> str:
    """Zipf-like choice: the first words of a lexicon are common, the last ones rare."""
    weights = 1.0 / np.arange(1, len(words) + 1)
    return words[int(rng.choice(len(words), p=weights / weights.sum()))]


def _tweet(sentiment: str, rng: np.random.Generator) -> tuple[str, str]:
    if sentiment == "neutral":
        text = " ".join(_words(rng, 4, 14))
        if rng.random() < 0.15:  # some neutral spans drop the first words, as annotators did
            words = text.split()
            return text, " ".join(words[int(rng.integers(1, 3)) :]) or text
        return text, text
    lex = POSITIVE if sentiment == "positive" else NEGATIVE
    phrase = [_pick(lex, rng)]
    if rng.random() < 0.5:
        phrase.insert(0, INTENSIFIERS[int(rng.integers(len(INTENSIFIERS)))])
    if rng.random() < 0.3:
        phrase.append(_pick(lex, rng))
    before, after = _words(rng, 1, 8), _words(rng, 0, 7)
    if rng.random() < 0.3 and before:  # annotator noise: the span grabs neighbouring words
        phrase.insert(0, before.pop())
    if rng.random() < 0.25 and after:
        phrase.append(after.pop(0))
    if rng.random() < 0.2:  # a sentiment word outside the span, of the other polarity
        other = NEGATIVE if lex is POSITIVE else POSITIVE
        after.append(_pick(other, rng))
    return " ".join(before + phrase + after), " ".join(phrase)


def tweets(n: int, seed: int) -> pd.DataFrame:
    """Columns textID, text, sentiment, selected_text (the span that carries the sentiment)."""
    rng = np.random.default_rng(seed)
    sentiments = rng.choice(["neutral", "positive", "negative"], size=n, p=[0.4, 0.3, 0.3])
    rows = [_tweet(s, rng) for s in sentiments]
    ids = [f"{h:010x}" for h in rng.choice(16**10, size=n, replace=False)]
    return pd.DataFrame(
        {
            "textID": ids,
            "text": [r[0] for r in rows],
            "sentiment": sentiments,
            "selected_text": [r[1] for r in rows],
        }
    )


def _comment(rng: np.random.Generator) -> tuple[str, int]:
    """An insult needs: addressed to the reader ("you"), an insulting word, and no negation."""
    second = rng.random() < 0.6
    insulting = rng.random() < 0.5
    negated = rng.random() < 0.2
    word = (INSULTS if insulting else PRAISE)[
        int(rng.integers(len(INSULTS if insulting else PRAISE)))
    ]
    subject = "you are" if second else f"{THIRD[int(rng.integers(len(THIRD)))]} is"
    article = "a " if word in ("idiot", "moron", "loser", "fool", "troll", "liar", "clown") else ""
    core = f"{subject} {'not ' if negated else ''}{article}{word}"
    pre = CHATTER[int(rng.integers(len(CHATTER)))] if rng.random() < 0.6 else ""
    post = CHATTER[int(rng.integers(len(CHATTER)))] if rng.random() < 0.6 else ""
    label = int(second and insulting and not negated)
    return " ".join(x for x in (pre, core, post) if x), label


def insults(n: int, seed: int) -> pd.DataFrame:
    """Columns id, Comment, Insult (0/1, 5% of labels flipped)."""
    rng = np.random.default_rng(seed)
    rows = [_comment(rng) for _ in range(n)]
    flip = rng.random(n) < 0.05
    labels = np.array([r[1] for r in rows]) ^ flip.astype(int)
    ids = rng.permutation(n) + 1000
    return pd.DataFrame({"id": ids, "Comment": [f'"{r[0]}"' for r in rows], "Insult": labels})


SPACEGROUPS = np.array([12, 33, 167, 194, 206, 227])


def materials(n: int, seed: int) -> pd.DataFrame:
    """Synthetic transparent conductors: composition, lattice, 2 positive targets."""
    rng = np.random.default_rng(seed)
    x = rng.dirichlet([1.0, 1.0, 1.0], size=n)  # (n, 3): al, ga, in fractions
    sg_idx = rng.integers(len(SPACEGROUPS), size=n)
    natoms = rng.choice([10, 20, 30, 40, 60, 80], size=n)
    a = 5 + 4 * x[:, 2] + rng.normal(0, 0.3, n)
    b = 5 + 3 * x[:, 1] + rng.normal(0, 0.3, n)
    c = 9 + 6 * rng.random(n)
    sg_effect = np.array([0.02, -0.01, 0.04, 0.0, 0.03, -0.02])[sg_idx]
    formation = (
        0.05
        + 0.6 * x[:, 0] * x[:, 2]
        + 0.15 * x[:, 1] * x[:, 2]
        + sg_effect
        + 0.01 * np.sin(c)
        + rng.normal(0, 0.02, n)
    )
    bandgap = (
        0.6
        + 3.8 * x[:, 0] ** 1.3
        + 1.5 * x[:, 1]
        - 0.4 * x[:, 2]
        + 6 * sg_effect
        + 0.002 * natoms
        + rng.normal(0, 0.12, n)
    )
    return pd.DataFrame(
        {
            "id": np.arange(1, n + 1),
            "spacegroup": SPACEGROUPS[sg_idx],
            "number_of_total_atoms": natoms,
            "percent_atom_al": x[:, 0].round(4),
            "percent_atom_ga": x[:, 1].round(4),
            "percent_atom_in": x[:, 2].round(4),
            "lattice_vector_1_ang": a.round(4),
            "lattice_vector_2_ang": b.round(4),
            "lattice_vector_3_ang": c.round(4),
            "formation_energy_ev_natom": np.clip(formation, 0.0, None).round(4),
            "bandgap_energy_ev": np.clip(bandgap, 0.05, None).round(4),
        }
    )
