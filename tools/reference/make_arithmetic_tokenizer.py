#!/usr/bin/env python3
"""Builds the tokenizer of configs/models/tiny-arithmetic/ with the Hugging Face `tokenizers`
package: one token per character of the arithmetic task ("0"-"9", "+", "-", "*", "=", the space
as "\u2581", newline), Gemma's special tokens <pad> <eos> <bos> <unk> as ids 0-3, Gemma's
normaliser (" " -> "\u2581"), decoder (Replace, Fuse) and <bos> template. No byte fallback: a
character outside the set is <unk>.

    tools/reference/make_arithmetic_tokenizer.py OUT_DIR

writes OUT_DIR/tokenizer.json and OUT_DIR/tokenizer_config.json.
"""
import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, normalizers, processors
from tokenizers.models import BPE

SPECIAL = ["<pad>", "<eos>", "<bos>", "<unk>"]
CHARACTERS = list("0123456789+-*=") + ["\u2581", "\n"]


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    vocab = {t: i for i, t in enumerate(SPECIAL + CHARACTERS)}
    tok = Tokenizer(BPE(vocab=vocab, merges=[], unk_token="<unk>", fuse_unk=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.Fuse()])
    tok.add_special_tokens(SPECIAL)
    tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", vocab["<bos>"])])
    tok.save(str(out / "tokenizer.json"))
    (out / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<bos>", "eos_token": "<eos>",
         "unk_token": "<unk>", "pad_token": "<pad>", "add_bos_token": True}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
