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
INSULTS = ["stupid", "moron", "pathetic", "creep", "fraud", "troll", "brat", "snake"]
PRAISE = ["sturdy", "moral", "patient", "creative", "frank", "trooper", "brave", "snazzy"]
"""Pairs (data version 3): each insult shares its first three letters with a praise word
(stupid, sturdy), so the character n-grams that tie an irony hashtag to its word ("#st",
"#stu", " #stu") are the same for both up to four characters, and only the five-character
"#stup" / "#stur" tell an ironic insult from ironic praise (`_comment`)."""
NEUTRAL = [
    "late",
    "early",
    "here",
    "back",
    "online",
    "busy",
    "new",
    "tall",
    "quiet",
    "ready",
    "sure",
    "away",
    "wrong",
    "done",
    "awake",
    "local",
    "young",
    "famous",
    "serious",
    "alone",
]
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


LEET = {"a": "@", "i": "1", "o": "0", "e": "3", "u": "v"}
NEGATIONS = ["not", "never", "not really", "hardly"]
ADDRESS = ["you are", "you're", "ur", "you are such", "you absolute", "you total"]


SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ner",
    "ta",
    "vu",
    "sel",
    "pri",
    "do",
    "ben",
    "fa",
    "ri",
    "gos",
    "tem",
    "lu",
    "zan",
]


def _nonce(rng: np.random.Generator) -> str:
    """A made-up adjective (names, slang, typos): an open vocabulary that word features have
    mostly never seen, so an unseen word does not by itself mark an (obfuscated) insult."""
    return "".join(
        SYLLABLES[int(i)] for i in rng.integers(len(SYLLABLES), size=int(rng.integers(2, 4)))
    )


def _obfuscate(word: str, rng: np.random.Generator) -> str:
    """How commenters dodge filters: a leetspeak vowel, a starred vowel or a doubled letter.
    Word-level features see a new token; character n-grams still see most of the word."""
    vowels = [i for i, ch in enumerate(word) if ch in LEET]
    kind = int(rng.integers(3))
    if not vowels or kind == 2:
        i = int(rng.integers(1, len(word)))
        return word[:i] + word[i - 1] + word[i:]
    i = vowels[int(rng.integers(len(vowels)))]
    return word[:i] + (LEET[word[i]] if kind == 0 else "*") + word[i + 1 :]


IRONY = "#"
"""The irony hashtag ("you are so #brave"): it inverts the word it is attached to. The default
word tokenizer (runs of two or more word characters) drops it; character n-grams keep it."""


def _comment(rng: np.random.Generator) -> tuple[str, int]:
    """An insult needs: addressed to the reader ("you ..."), no negation, and a word that
    insults as meant: an insulting word (often obfuscated) said plainly, or praise with the
    irony hashtag (``you are so #brave``). A hashtagged insult is banter; third-person and
    negated insults are not insults. Within a second-person, unnegated comment the label is
    therefore an exclusive or of the word's polarity and the tag: a linear model can fit it
    only from features that tie the two, which the word tokenizer never has (it drops the
    ``#``) and character n-grams have from five characters on (`PRAISE`)."""
    second = rng.random() < 0.55
    kind = rng.choice(3, p=[0.45, 0.3, 0.25])  # insulting, praise, neutral
    insulting, praise = kind == 0, kind == 1
    negated = rng.random() < 0.2
    ironic = rng.random() < 0.35
    pool = INSULTS if insulting else (PRAISE if praise else NEUTRAL)
    word = pool[int(rng.integers(len(pool)))]
    if kind == 2 and rng.random() < 0.5:
        word = _nonce(rng)
    if insulting and not ironic and rng.random() < 0.6:
        word = _obfuscate(word, rng)
    neg = NEGATIONS[int(rng.integers(len(NEGATIONS)))] + " " if negated else ""
    if ironic:
        word = IRONY + word
    if second:
        address = ADDRESS[int(rng.integers(len(ADDRESS)))]
        if negated:
            address = "you are"
        core = f"{address} {neg}{word}"
    else:
        core = f"{THIRD[int(rng.integers(len(THIRD)))]} is {neg}{word}"
    pre = CHATTER[int(rng.integers(len(CHATTER)))] if rng.random() < 0.6 else ""
    post = CHATTER[int(rng.integers(len(CHATTER)))] if rng.random() < 0.6 else ""
    label = int(second and not negated and (insulting != ironic) and kind != 2)
    return " ".join(x for x in (pre, core, post) if x), label


def insults(n: int, seed: int) -> pd.DataFrame:
    """Columns id, Comment, Insult (0/1, 3% of labels flipped).

    Built (data version 3) so that one composition of decisions is clearly best (the testbed;
    about 3 % of the corpus generator's draws, against 0.15 % for the materials stand-in's
    basal-area product): obfuscated insults ("stup*d", "m0ron") favour character n-grams over
    words; the irony hashtag (35 % of comments, `IRONY`) inverts its word, and an ironic insult
    and ironic praise differ only in five-character n-grams ("#stup" / "#stur", `PRAISE`), so
    only character n-grams up to five characters fit it; and the few, rare n-grams that carry
    it need a weakly regularised linear model (naive Bayes, LightGBM and strong regularisation
    leave most of it). Measured in docs/experiments/embedded-testbed.md, section 9.
    """
    rng = np.random.default_rng(seed)
    rows = [_comment(rng) for _ in range(n)]
    flip = rng.random(n) < 0.03
    labels = np.array([r[1] for r in rows]) ^ flip.astype(int)
    ids = rng.permutation(n) + 1000
    return pd.DataFrame({"id": ids, "Comment": [f'"{r[0]}"' for r in rows], "Insult": labels})


SPACEGROUPS = np.array([12, 33, 167, 194, 206, 227])
SPACEGROUP_EFFECT = np.array([0.0, 0.45, -0.3, 0.6, -0.15, 0.25])
"""Per-spacegroup shift of log(band gap): not monotonic in the spacegroup number, so a model
that reads the number as a quantity (a linear model, a shallow tree) misses most of it and a
one-hot (or target) encoding recovers it."""


def materials(n: int, seed: int, *, wave: float = 0.2, period: float = 6.0) -> pd.DataFrame:
    """Synthetic transparent conductors: composition, lattice, 2 positive targets.

    Built so that several independent modelling decisions each move the score (measured in
    docs/experiments/embedded-testbed.md):

    - the band gap is multiplicative (log band gap is additive in the features), spread over
      two orders of magnitude: a log1p target transform matters under RMSLE;
    - the spacegroup's effect is categorical (`SPACEGROUP_EFFECT`): its encoding matters;
    - both targets depend on composition products (al*in, ga*in) and on the volume per atom
      (the product of the lattice vectors over the number of atoms), which no single column
      carries: interaction / domain features matter;
    - both targets oscillate with the basal cell area (the product of the first two lattice
      vectors, about nine periods over its range, data version 3): a model given that product
      as a feature fits it with a few dozen splits, one given the two vectors apart cannot
      from 600 rows. One product of the 28 a program may add is therefore worth about a quarter of
      the score (a rare decision: measured in docs/experiments/embedded-testbed.md, section 8;
      ``wave`` is the log band gap's amplitude, a tenth of it the formation energy's, and
      ``period`` the period in square angstroms: ``benchmarks/experiments/materials_wave.py``
      compares other values);
    - label noise is small next to these effects, so capacity (boosting rounds, depth) keeps
      paying until the model has found them.
    """
    rng = np.random.default_rng(seed)
    x = rng.dirichlet([1.0, 1.0, 1.0], size=n)  # (n, 3): al, ga, in fractions
    al, ga, in_ = x[:, 0], x[:, 1], x[:, 2]
    sg_idx = rng.integers(len(SPACEGROUPS), size=n)
    natoms = rng.choice([10, 20, 30, 40, 60, 80], size=n)
    a = 5 + 4 * in_ + rng.normal(0, 0.3, n)
    b = 5 + 3 * ga + rng.normal(0, 0.3, n)
    c = 9 + 6 * rng.random(n)
    per_atom = a * b * c / natoms  # (n,): volume per atom, 4-45
    sg = SPACEGROUP_EFFECT[sg_idx]
    basal = np.sin(2 * np.pi * a * b / period)  # (n,): the basal area's oscillation, 22-75 A^2
    log_gap = (
        -0.6
        + 2.2 * al**1.3
        + 0.9 * ga
        - 0.4 * in_
        + sg
        - 1.0 * np.log(per_atom / 12)
        + 2.0 * al * in_
        + wave * basal
        + rng.normal(0, 0.04, n)
    )
    bandgap = np.exp(log_gap)
    formation = (
        0.04
        + 1.2 * al * in_
        + 0.5 * ga * in_
        + 0.12 * sg
        + 0.08 * np.log(per_atom / 12)
        + 0.01 * np.sin(c)
        + wave / 10 * basal
        + rng.normal(0, 0.012, n)
    )
    return pd.DataFrame(
        {
            "id": np.arange(1, n + 1),
            "spacegroup": SPACEGROUPS[sg_idx],
            "number_of_total_atoms": natoms,
            "percent_atom_al": al.round(4),
            "percent_atom_ga": ga.round(4),
            "percent_atom_in": in_.round(4),
            "lattice_vector_1_ang": a.round(4),
            "lattice_vector_2_ang": b.round(4),
            "lattice_vector_3_ang": c.round(4),
            "formation_energy_ev_natom": np.clip(formation, 0.0, None).round(4),
            "bandgap_energy_ev": np.clip(bandgap, 0.05, None).round(4),
        }
    )
