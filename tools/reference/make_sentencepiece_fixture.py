#!/usr/bin/env python3
"""Builds the SentencePiece fixture of tests/data/sentencepiece/: a tiny tokenizer.model trained
with the `sentencepiece` package in the shape of Gemma's (BPE, byte fallback, digits split, no
dummy prefix, white space kept as it is, <pad> <eos> <bos> <unk> at ids 0 to 3, the turn markers
as user-defined pieces), and the ids transformers' Gemma tokenizer gives every line of a corpus
when it reads that file (it converts the model itself; there is no tokenizer.json).

    tools/reference/make_sentencepiece_fixture.py OUT_DIR

writes OUT_DIR/tokenizer.model, OUT_DIR/tokenizer_config.json and OUT_DIR/corpus.jsonl (one
{"text", "ids", "ids_with_special", "decoded", "decoded_skip_special"} per line).
tests/unit/orchestration/tokenizer/sentencepiece_test.cpp reads them. Needs sentencepiece,
protobuf and transformers (no torch).
"""
import io
import json
import sys
from pathlib import Path

import sentencepiece as spm

TRAINING = [
    "What is 17 + 25? Answer: 42",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces and   runs of    spaces  ",
    "tabs\tand\nnewlines\n\nand carriage returns",
    "digits 0123456789 and 3.14159 and 1,000,000",
    "Gemma 4 answers: \\boxed{12}",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber stra\u00dfe",
    "<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n",
] * 40

CORPUS = [
    "",
    " ",
    "a",
    "What is 17 + 25?",
    "Answer: 42",
    "  two leading spaces",
    "trailing spaces   ",
    "a\tb\nc\r\nd",
    "\n\n\n",
    "The quick brown fox jumps over the lazy dog.",
    "caf\u00e9 na\u00efve",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",  # never seen: byte fallback
    "emoji \U0001F600 and \U0001F44D\U0001F3FD",
    "<bos>literal special text<eos>",
    "<|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n",
    "<unk> <pad> and <bos><bos>",
    "12345678901234567890",
    "\\boxed{-3.5}",
    "mixed\u00e9\U0001F600\u65e5end",
]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(TRAINING), model_writer=model, model_type="bpe", vocab_size=400,
        character_coverage=1.0, byte_fallback=True, split_digits=True, add_dummy_prefix=False,
        remove_extra_whitespaces=False, normalization_rule_name="identity", allow_whitespace_only_pieces=True,
        split_by_whitespace=False, pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>", eos_piece="<eos>",
        bos_piece="<bos>", unk_piece="<unk>",
        user_defined_symbols=["<|turn>", "<turn|>"], minloglevel=2)
    (out / "tokenizer.model").write_bytes(model.getvalue())
    config = {"tokenizer_class": "GemmaTokenizer", "bos_token": "<bos>", "eos_token": "<eos>",
              "unk_token": "<unk>", "pad_token": "<pad>", "add_bos_token": True, "add_eos_token": False}
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")

    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(out))
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for text in CORPUS:
            ids = hf(text, add_special_tokens=False)["input_ids"]
            with_special = hf(text, add_special_tokens=True)["input_ids"]
            f.write(json.dumps({"text": text, "ids": ids, "ids_with_special": with_special,
                                "decoded": hf.decode(ids, skip_special_tokens=False),
                                "decoded_skip_special": hf.decode(ids, skip_special_tokens=True)},
                               ensure_ascii=True) + "\n")
    print(type(hf).__name__, len(hf), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
