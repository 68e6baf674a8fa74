#!/usr/bin/env python3
"""tools/convert_dataset.py writes prompt datasets that `tandem dataset check` reads.

Rows in the shapes of DAPO-Math-17k (a message-list prompt, the answer nested at
reward_model.ground_truth) and GSM8K (a question and an answer ending "#### N") convert to the
records expected, as JSON lines and as a JSON list, and the output passes `tandem dataset check`.
A row without the column is refused naming the row and leaves no output file; a bad line in a
dataset makes `tandem dataset check` name the file and line.

Usage: convert_dataset_test.py TANDEM [unittest arguments...]
Exit:  0 every check passed, 1 a check failed, 2 usage error.
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

TANDEM = None
SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "convert_dataset.py")

DAPO_ROWS = [
    {"data_source": "math_dapo", "prompt": [{"content": "Solve 1+1. Answer: $Answer", "role": "user"}],
     "ability": "MATH", "reward_model": {"ground_truth": "2", "style": "rule-lang"}, "extra_info": {"index": "a"}},
    {"data_source": "math_dapo", "prompt": [{"content": "Find x if 2x = 6.", "role": "user"}],
     "ability": "MATH", "reward_model": {"ground_truth": "3", "style": "rule-lang"}, "extra_info": {"index": "b"}},
]
GSM8K_ROWS = [
    {"question": "Natalia sold 48 clips in April and half as many in May. How many in all?",
     "answer": "In May she sold 48/2 = <<48/2=24>>24 clips.\nAltogether 48+24 = <<48+24=72>>72.\n#### 72"},
    {"question": "What is 10 - 4?", "answer": "10 - 4 = 6\n#### 6"},
]


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


class ConvertDatasetTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tandem-convert-")

    def path(self, name):
        return os.path.join(self.dir, name)

    def convert(self, rows, as_list, *options):
        src = self.path("in.json" if as_list else "in.jsonl")
        with open(src, "w", encoding="utf-8") as f:
            if as_list:
                json.dump(rows, f)
            else:
                f.write("".join(json.dumps(r) + "\n" for r in rows))
        out = self.path("out.jsonl")
        p = run([sys.executable, SCRIPT, src, *options, "-o", out])
        return p, out

    def read(self, out):
        with open(out, encoding="utf-8") as f:
            return [json.loads(line) for line in f]

    def check_with_tandem(self, out, count):
        p = run([TANDEM, "dataset", "check", out])
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("%d records" % count, p.stdout)

    def test_dapo_math_rows_become_message_records_with_the_nested_ground_truth(self):
        for as_list in (False, True):
            p, out = self.convert(DAPO_ROWS, as_list, "--prompt-column", "prompt", "--answer-column", "reward_model.ground_truth")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(self.read(out), [
                {"messages": [{"role": "user", "content": "Solve 1+1. Answer: $Answer"}], "answer": "2"},
                {"messages": [{"role": "user", "content": "Find x if 2x = 6."}], "answer": "3"}])
            self.check_with_tandem(out, 2)

    def test_gsm8k_rows_become_prompt_records_with_the_number_after_the_mark(self):
        p, out = self.convert(GSM8K_ROWS, False, "--prompt-column", "question", "--answer-column", "answer",
                              "--answer-after", "####", "--limit", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.read(out), [{"prompt": GSM8K_ROWS[0]["question"], "answer": "72"}])
        self.check_with_tandem(out, 1)

    def test_a_row_without_the_column_is_refused_by_row_and_writes_nothing(self):
        rows = [GSM8K_ROWS[0], {"question": "no answer here"}]
        p, out = self.convert(rows, False, "--prompt-column", "question", "--answer-column", "answer")
        self.assertEqual(p.returncode, 1)
        self.assertIn("row 1 has no column answer", p.stderr)
        self.assertFalse(os.path.exists(out))
        self.assertEqual([n for n in os.listdir(self.dir) if n.startswith(".convert-")], [])

    def test_a_bad_line_makes_the_check_name_the_file_and_line(self):
        bad = self.path("bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"prompt": "p", "answer": "a"}\n{"prompt": "q"}\n')
        p = run([TANDEM, "dataset", "check", bad])
        self.assertEqual(p.returncode, 1)
        self.assertIn(bad + ':2: the record has no "answer"', p.stderr)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    TANDEM = sys.argv.pop(1)
    sys.exit(0 if unittest.main(exit=False).result.wasSuccessful() else 1)
