#!/usr/bin/env python3
"""Builds the tokenizer fixture of tests/data/tokenizer/ with the Hugging Face `tokenizers`
package, in the shape of Gemma's tokenizer.json (a BPE model with byte fallback and fused unknown
tokens, a normaliser that replaces " " with "\u2581", a Split pre-tokeniser on " " merged with the
previous piece, the decoder Replace / ByteFallback / Fuse / Strip, special and added tokens, and a
<bos> template), and records the ids that transformers' tokenizer gives every line of a corpus.

    tools/reference/make_tokenizer_fixture.py OUT_DIR

writes OUT_DIR/tokenizer.json, OUT_DIR/tokenizer_config.json and OUT_DIR/corpus.jsonl (one
{"text", "ids", "ids_with_special", "decoded"} per line). tests/unit/orchestration/tokenizer/
reads them; tests/python/tokenizer_fixture_test.py re-derives the ids with the installed package.
"""
import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<|turn>", "<turn|>"]
ADDED = ["<start_of_image>", "[multimodal]"]  # non-special added tokens: matched before the model
CHAT = ["<|channel>", "<channel|>", "<|think|>"]  # the rest of Gemma 4's chat tokens, after the others' ids

TRAINING = [
    "What is 17 + 25? Answer: 42",
    "The quick brown fox jumps over the lazy dog.",
    "  leading spaces and   runs of    spaces  ",
    "tabs\tand\nnewlines\n\nand\r\ncarriage returns",
    "digits 0123456789 and 3.14159 and 1,000,000",
    "Gemma 4 answers: \\boxed{12}",
    "caf\u00e9 na\u00efve r\u00e9sum\u00e9 \u00fcber stra\u00dfe",
    "<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n",
] * 20

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
    "emoji \U0001F600 and \U0001F44D\U0001F3FD flags \U0001F1EB\U0001F1F7",
    "zero\u200bwidth and \u00a0nbsp",
    "<bos>literal special text<eos>",
    "<|turn>user\nWhat is 2+2?<turn|>\n<|turn>model\n",
    "an added <start_of_image> token and [multimodal] here",
    "<unk> <pad> <mask>",
    "12345678901234567890",
    "\\boxed{-3.5}",
    "mixed\u00e9\U0001F600\u65e5end",
    "\u0000control\u0007chars\u007f",
]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)

    tok = Tokenizer(BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.pre_tokenizer = pre_tokenizers.Split(pattern=" ", behavior="merged_with_previous", invert=False)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(content=" ", left=0, right=0)])
    byte_tokens = ["<0x%02X>" % b for b in range(256)]
    trainer = BpeTrainer(vocab_size=600, special_tokens=SPECIAL + byte_tokens, show_progress=False,
                         initial_alphabet=[])
    # Train on the normalised text, as the model sees it (the pre-tokeniser does not split it).
    tok.train_from_iterator([t.replace(" ", "\u2581") for t in TRAINING], trainer=trainer)
    tok.add_tokens(ADDED)
    tok.add_special_tokens(SPECIAL)
    tok.add_special_tokens(CHAT)
    bos = tok.token_to_id("<bos>")
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", bos)])
    tok.save(str(out / "tokenizer.json"))

    # transformers' tokenizer over the same file: the ids a user of transformers gets.
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_file=str(out / "tokenizer.json"), bos_token="<bos>", eos_token="<eos>",
                                 unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>",
         "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>", "add_bos_token": True},
        indent=2) + "\n")
    with open(out / "corpus.jsonl", "w", encoding="utf-8") as f:
        for text in CORPUS:
            ids = hf(text, add_special_tokens=False)["input_ids"]
            with_special = hf(text, add_special_tokens=True)["input_ids"]
            decoded = hf.decode(ids, skip_special_tokens=False)
            f.write(json.dumps({"text": text, "ids": ids, "ids_with_special": with_special, "decoded": decoded},
                               ensure_ascii=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
