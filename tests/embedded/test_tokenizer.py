from mlerl.embedded import CHAT_TEMPLATE, train_tokenizer
from mlerl.embedded._tokenizer import stdlib_texts

TEXTS = stdlib_texts(60_000)


def test_round_trip_is_exact_for_code_and_unicode():
    tok = train_tokenizer(TEXTS, vocab_size=1000)
    for s in ["import pandas as pd\n\ttrain = pd.read_csv('input/train.csv')  # é 🎉\n",
              "  \n\n\r\n x=1", "<|im_start|>user\nhi<|im_end|>"]:
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
        add_generation_prompt=True, tokenize=False)
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"


def test_training_is_deterministic():
    a = train_tokenizer(TEXTS, vocab_size=800)
    b = train_tokenizer(TEXTS, vocab_size=800)
    assert a.get_vocab() == b.get_vocab()
