#!/usr/bin/env python3
"""`tandem tokenize` gives transformers' ids on the tokenizer fixture, beyond the recorded corpus.

The fixture (tests/data/tokenizer/, from tools/reference/make_tokenizer_fixture.py) is a
tokenizer.json in the shape of Gemma's. transformers' fast tokenizer over the same file must still
give the committed corpus ids (so the fixture and the installed reference agree), and `tandem
tokenize` must give transformers' ids, and decode them back to the text, for every corpus line and
for a few hundred seeded random strings drawn from ASCII, whitespace runs, Latin-1, CJK, emoji,
combining marks, control characters and the fixture's special and added tokens. `tandem tokenize
--chat` must give the recorded renderings of transformers' apply_chat_template with Google's Gemma 4
template (tests/data/tokenizer/chat/, from tools/reference/chat_format.py record), text and ids.

Usage: tokenizer_test.py TANDEM [unittest arguments...]
Exit:  0 every check passed, 1 a check failed, 2 usage error.
"""

import json
import os
import random
import subprocess
import sys
import unittest

from transformers import PreTrainedTokenizerFast

TANDEM = None  # path of the tandem binary (argv[1])
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "tokenizer")

ALPHABET = (list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+-*/=?!.,:;()[]{}\\_'\"")
            + [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", "\u00a0", "\u200b"]
            + list("\u00e9\u00fc\u00df\u00f1\u00e7\u00c5")
            + list("\u65e5\u672c\u8a9e\u4e2d\u6587\ud55c")
            + ["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F1EB\U0001F1F7", "\u2764\ufe0f"]
            + ["e\u0301", "\u0000", "\u0007", "\u007f"]
            + ["<bos>", "<eos>", "<|turn>", "<turn|>", "<start_of_image>", "[multimodal]", "<unk>", "<0x41>"]
            + ["<|channel>", "<channel|>", "<|think|>"])


def tandem(args, stdin):
    p = subprocess.run([TANDEM, "tokenize", "--model", FIXTURE] + args, input=stdin, capture_output=True)
    if p.returncode != 0:
        raise AssertionError("tandem tokenize %s failed (%d): %s" % (args, p.returncode, p.stderr.decode()))
    return p.stdout


class TokenizerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hf = PreTrainedTokenizerFast(tokenizer_file=os.path.join(FIXTURE, "tokenizer.json"), bos_token="<bos>",
                                         eos_token="<eos>", unk_token="<unk>", pad_token="<pad>", mask_token="<mask>")
        with open(os.path.join(FIXTURE, "corpus.jsonl"), encoding="utf-8") as f:
            cls.corpus = [json.loads(line) for line in f]

    def test_the_installed_reference_still_gives_the_committed_ids(self):
        for line in self.corpus:
            self.assertEqual(self.hf(line["text"], add_special_tokens=False)["input_ids"], line["ids"], repr(line["text"]))

    def check(self, text):
        want = self.hf(text, add_special_tokens=False)["input_ids"]
        got = json.loads(tandem([], text.encode("utf-8")))
        self.assertEqual(got, want, repr(text))
        with_bos = json.loads(tandem(["--special"], text.encode("utf-8")))
        self.assertEqual(with_bos, self.hf(text, add_special_tokens=True)["input_ids"], repr(text))
        back = tandem(["--decode"], json.dumps(got).encode()).decode("utf-8")
        self.assertEqual(back, self.hf.decode(want, skip_special_tokens=False), repr(text))
        if "<0x" not in text:  # a literal byte-token text decodes to its byte, here as in transformers
            self.assertEqual(back, text, repr(text))
        skipped = tandem(["--decode", "--skip-special"], json.dumps(got).encode()).decode("utf-8")
        self.assertEqual(skipped, self.hf.decode(want, skip_special_tokens=True), repr(text))

    def test_every_corpus_line_gives_transformers_ids(self):
        for line in self.corpus:
            self.check(line["text"])

    def test_tokenize_chat_gives_the_recorded_renderings_of_transformers_apply_chat_template(self):
        # tests/data/tokenizer/chat/renderings.jsonl: tools/reference/chat_format.py record.
        with open(os.path.join(FIXTURE, "chat", "renderings.jsonl"), encoding="utf-8") as f:
            renderings = [json.loads(line) for line in f]
        self.assertGreaterEqual(len(renderings), 30)
        for x in renderings:
            flags = ["--chat"] + (["--thinking"] if x["enable_thinking"] else []) + (
                [] if x["add_generation_prompt"] else ["--no-generation-prompt"])
            stdin = json.dumps({"messages": x["messages"]}).encode()
            self.assertEqual(tandem(flags + ["--text"], stdin).decode("utf-8"), x["text"], repr(x["messages"]))
            self.assertEqual(json.loads(tandem(flags, stdin)), x["ids"], repr(x["messages"]))
            self.assertEqual(self.hf(x["text"], add_special_tokens=False)["input_ids"], x["ids"])

    def test_random_strings_give_transformers_ids(self):
        rng = random.Random(20261202)
        texts = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 40))) for _ in range(150)]
        # One call for many texts would be faster, but each text must be its own stdin to be exact.
        for text in texts:
            self.check(text)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    TANDEM = sys.argv.pop(1)
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
