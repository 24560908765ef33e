"""translate(): text to text, batched by length, in the caller's order, leaving the model's mode as it was."""

from __future__ import annotations

import pytest
import torch

from aiayn.decode.beam import beam_search
from aiayn.decode.greedy import greedy_search
from aiayn.decode.search import autocast, batch_by_length, translate

LETTERS = "abcdefgh"  # ids 4..11 of the tiny model's 12-token vocabulary


class LetterTokenizer:
    """One id per letter; the project's tokenizer interface in miniature."""

    pad_id, unk_id, bos_id, eos_id, vocab_size = 0, 1, 2, 3, 12

    def encode(self, lines):
        return [[4 + LETTERS.index(ch) for ch in line if ch != " "] for line in lines]

    def decode(self, ids):
        return ["".join(LETTERS[i - 4] for i in seq) for seq in ids]


SENTENCES = ["abc", "h", "gfedcba", "", "bd", "abcdefgh", "ee"]


def test_batch_by_length_respects_the_token_budget_and_covers_every_index():
    lengths = [5, 1, 9, 3, 3, 20, 2]
    batches = batch_by_length(lengths, batch_tokens=10)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        longest = max(lengths[i] for i in batch)
        assert len(batch) == 1 or len(batch) * longest <= 10
    assert [5] in batches  # longer than the budget: alone, not dropped
    with pytest.raises(ValueError, match="batch_tokens"):
        batch_by_length(lengths, batch_tokens=0)


@pytest.mark.parametrize("strategy", ["beam", "greedy"])
def test_translate_matches_searching_each_sentence_alone(tiny_transformer, strategy):
    tok = LetterTokenizer()
    tiny_transformer.train()
    out = translate(
        tiny_transformer, tok, SENTENCES, strategy=strategy, beam_size=3, alpha=0.6, max_len_b=4, batch_tokens=12
    )
    assert tiny_transformer.training  # restored
    tiny_transformer.eval()
    expected: list[list[int]] = []
    with torch.inference_mode():
        for ids in tok.encode(SENTENCES):
            if not ids:  # an empty line: nothing to search, an empty translation
                expected.append([])
                continue
            src = torch.tensor([ids + [tok.eos_id]])
            special = dict(bos_id=2, eos_id=3, pad_id=0, max_len_b=4)
            if strategy == "beam":
                expected.append(beam_search(tiny_transformer, src, beam_size=3, alpha=0.6, **special)[0][0].tokens)
            else:
                expected += greedy_search(tiny_transformer, src, **special)
    assert out == tok.decode(expected)


def test_an_empty_sentence_stays_empty_and_an_over_long_one_is_truncated_not_dropped(tiny_transformer, caplog):
    tok = LetterTokenizer()
    long = "abcdefgh" * 20  # 160 tokens, beyond the model's 128 positions
    kwargs = dict(strategy="greedy", beam_size=1, alpha=0.0, max_len_b=50, batch_tokens=64)
    out = translate(tiny_transformer, tok, ["ab", "", long, "  "], **kwargs)
    assert len(out) == 4 and out[1] == "" and out[3] == ""
    assert "sentence 3: 160 subword tokens" in caplog.text and "first 127" in caplog.text
    # the truncated sentence is translated as its first 127 tokens would be
    assert out[2] == translate(tiny_transformer, tok, [long[:127]], **kwargs)[0]
    positions = tiny_transformer.cfg.max_positions
    assert len(out[2]) <= positions - 1  # the output stops where the decoder's positions end


def test_unknown_strategy_is_rejected(tiny_transformer):
    with pytest.raises(ValueError, match="sample"):
        translate(tiny_transformer, LetterTokenizer(), ["ab"], strategy="sample", beam_size=4, alpha=0.6, max_len_b=5)


@pytest.mark.parametrize(
    "precision, dtype",
    [
        ("bf16-mixed", torch.bfloat16),
        ("16-mixed", torch.float16),
        ("bf16-true", torch.bfloat16),
        ("32-true", torch.float32),
        ("64-true", torch.float32),
    ],
)
def test_decoding_arithmetic_follows_the_lightning_precision(precision, dtype):
    layer = torch.nn.Linear(4, 4)
    with autocast(precision, "cpu"):
        assert layer(torch.ones(1, 4)).dtype == dtype


def test_an_unknown_precision_is_refused():
    with pytest.raises(ValueError, match="'fp8'"):
        autocast("fp8", "cpu")
