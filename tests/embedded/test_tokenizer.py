from mlerl.embedded._tokenizer import CHAT_TEMPLATE, train_tokenizer
from mlerl.embedded._tokenizer import stdlib_texts

TEXTS = stdlib_texts(60_000)


def test_round_trip_is_exact_for_code_and_unicode():
    tok = train_tokenizer(TEXTS, vocab_size=1000)
    for s in [
        "import pandas as pd\n\ttrain = pd.read_csv('input/train.csv')  # é 🎉\n",
        "  \n\n\r\n x=1",
        "<|im_start|>user\nhi<|im_end|>",
    ]:
        assert tok.decode(tok(s, add_special_tokens=False)["input_ids"]) == s


def test_special_tokens_are_single_ids_and_eos_is_im_end():
    tok = train_tokenizer(TEXTS, vocab_size=1000)
    for special in ("<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        ids = tok(special, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert len(tok) == 1000


def test_chat_template_is_chatml():
    tok = train_tokenizer(TEXTS, vocab_size=1000)
    assert tok.chat_template == CHAT_TEMPLATE
    text = tok.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert (
        text
        == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
    )


def test_training_is_deterministic():
    a = train_tokenizer(TEXTS, vocab_size=800)
    b = train_tokenizer(TEXTS, vocab_size=800)
    assert a.get_vocab() == b.get_vocab()


PROGRAMS = [
    "import pandas as pd\nmodel = RandomForestClassifier(n_estimators=200)\nmodel.fit(X, y)\n",
    "import pandas as pd\nmodel = LogisticRegression(C=1.0)\nmodel.fit(X, y)\n",
    "I will read the data. Then I will fit a model.\nimport pandas as pd\nprint('x')\n",
]


def test_phrase_tokens_are_repeated_lines_and_sentences():
    from mlerl.embedded._tokenizer import phrase_tokens

    phrases = phrase_tokens(PROGRAMS, once=["# Task\nPredict the target.\n"])
    # in >= 2 answers: the shared lines; in a prompt: its lines, once is enough
    assert phrases[0] == "import pandas as pd\n"  # most frequent first
    assert set(phrases) == {
        "import pandas as pd\n",
        "model.fit(X, y)\n",
        "# Task\n",
        "Predict the target.\n",
    }  # not the lines of one answer only
    # prose is cut into sentences (each keeps its trailing space); short pieces stay with the BPE
    assert phrase_tokens(PROGRAMS * 2) == [
        "import pandas as pd\n",
        "model.fit(X, y)\n",
        "I will read the data. ",
        "Then I will fit a model.\n",
        "model = LogisticRegression(C=1.0)\n",
        "model = RandomForestClassifier(n_estimators=200)\n",
        "print('x')\n",
    ]
    assert phrase_tokens(PROGRAMS * 2, limit=1) == ["import pandas as pd\n"]


def test_phrases_survive_the_qwen2_reload_and_text_still_round_trips(tmp_path):
    """A Qwen2 model directory reloads Qwen2's tokenizer class (its own word-splitting
    pre-tokenizer); phrases are added tokens, matched before it, so they stay single tokens."""
    from transformers import AutoTokenizer, Qwen2Config

    from mlerl.embedded._tokenizer import phrase_tokens

    tok = train_tokenizer(TEXTS + PROGRAMS, vocab_size=1000, phrases=phrase_tokens(PROGRAMS))
    tok.save_pretrained(tmp_path)
    Qwen2Config(vocab_size=len(tok)).save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    ids = loaded("    model.fit(X, y)\nimport pandas as pd\n", add_special_tokens=False)[
        "input_ids"
    ]
    pieces = [loaded.decode([i]) for i in ids]
    assert pieces[-2:] == ["model.fit(X, y)\n", "import pandas as pd\n"]
    for s in PROGRAMS + ["import pandas as pdx\n", "model.fit(X, y)\n\n<|im_end|>", "é 🎉 x"]:
        assert loaded.decode(loaded(s, add_special_tokens=False)["input_ids"]) == s
        assert loaded(s)["input_ids"] == tok(s)["input_ids"]
