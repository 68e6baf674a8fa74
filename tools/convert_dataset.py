#!/usr/bin/env python3
"""Converts a Hugging Face dataset file into tandem's prompt dataset: JSON lines of
{"prompt": TEXT} or {"messages": [{"role", "content"}, ...]}, each with {"answer": TEXT}.

    tools/convert_dataset.py INPUT --prompt-column COL --answer-column COL [--answer-after MARK]
                             [--limit N] -o OUT.jsonl

INPUT is a .parquet file (needs the pyarrow package: pip install pyarrow), a .jsonl file (one
object per line) or a .json file (a list of objects). A column may be a dotted path into nested
objects (reward_model.ground_truth). The prompt column holds text (written as "prompt") or a list
of {"role", "content"} messages (written as "messages"). --answer-after MARK keeps what follows the
last MARK of the answer, stripped (GSM8K's answers end with "#### 72"). A number answer is written
as its text. OUT is written whole or not at all; a row without a column, or with a value of the
wrong kind, stops the conversion naming the row.

Examples (the files as the Hugging Face hub publishes them):
    DAPO-Math-17k: tools/convert_dataset.py dapo-math-17k.parquet --prompt-column prompt \\
                   --answer-column reward_model.ground_truth -o dapo-math-17k.jsonl
    GSM8K:         tools/convert_dataset.py train-00000-of-00001.parquet --prompt-column question \\
                   --answer-column answer --answer-after '####' -o gsm8k-train.jsonl

Exit: 0 converted, 1 refused (the reason on stderr), 2 usage error.
"""
import argparse
import json
import os
import sys
import tempfile


class Refused(Exception):
    pass


def rows_of(path):
    if path.endswith(".parquet"):
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise Refused("reading parquet needs the pyarrow package (pip install pyarrow)")
        return pq.read_table(path).to_pylist()
    if path.endswith(".jsonl"):
        rows = []
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as e:
                        raise Refused("%s:%d: not JSON: %s" % (path, n, e))
        return rows
    if path.endswith(".json"):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, list):
            raise Refused("%s: expected a JSON list of rows" % path)
        return data
    raise Refused("%s: expected a .parquet, .jsonl or .json file" % path)


def column(row, path, index):
    value = row
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise Refused("row %d has no column %s" % (index, path))
        value = value[part]
    return value


def record(row, index, args):
    prompt = column(row, args.prompt_column, index)
    out = {}
    if isinstance(prompt, str):
        out["prompt"] = prompt
    elif isinstance(prompt, list) and prompt and all(isinstance(m, dict) and "role" in m and "content" in m for m in prompt):
        out["messages"] = [{"role": m["role"], "content": m["content"]} for m in prompt]
    else:
        raise Refused("row %d: %s is neither text nor a list of {role, content} messages" % (index, args.prompt_column))
    answer = column(row, args.answer_column, index)
    if isinstance(answer, bool) or not isinstance(answer, (str, int, float)):
        raise Refused("row %d: %s is %s, not text or a number" % (index, args.answer_column, type(answer).__name__))
    answer = str(answer)
    if args.answer_after is not None:
        if args.answer_after not in answer:
            raise Refused("row %d: %s holds no %r" % (index, args.answer_column, args.answer_after))
        answer = answer.rsplit(args.answer_after, 1)[1].strip()
    out["answer"] = answer
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("input")
    p.add_argument("--prompt-column", required=True)
    p.add_argument("--answer-column", required=True)
    p.add_argument("--answer-after")
    p.add_argument("--limit", type=int)
    p.add_argument("-o", "--out", required=True)
    args = p.parse_args()
    try:
        rows = rows_of(args.input)
        if args.limit is not None:
            rows = rows[: args.limit]
        if not rows:
            raise Refused("%s has no rows" % args.input)
        records = [record(r, i, args) for i, r in enumerate(rows)]
        folder = os.path.dirname(os.path.abspath(args.out))
        fd, tmp = tempfile.mkstemp(prefix=".convert-", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                for r in records:
                    f.write(json.dumps(r, ensure_ascii=False) + "\n")
            os.replace(tmp, args.out)
        except BaseException:
            os.unlink(tmp)
            raise
    except (Refused, OSError) as e:
        print("convert_dataset: %s" % e, file=sys.stderr)
        return 1
    print("convert_dataset: %d records -> %s" % (len(records), args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
