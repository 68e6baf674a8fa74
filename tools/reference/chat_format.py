#!/usr/bin/env python3
"""transformers' rendering of Gemma 4 conversations, against which tandem's built-in chat format
(orchestration/data/chat_format.h) is checked.

    chat_format.py record --chat-template FILE --tokenizer DIR OUT.jsonl
        renders the conversations below with the chat template FILE through transformers'
        apply_chat_template, tokenizes each rendering with DIR's tokenizer.json, and writes one
        {"messages", "add_generation_prompt", "enable_thinking", "text", "ids"} per line (the
        fixture of tests/data/tokenizer/chat/, which the C++ tests read).

    chat_format.py check --model DIR --tandem BIN
        renders the same conversations with the checkpoint DIR's own chat template (its
        chat_template.jinja, or tokenizer_config.json's "chat_template") and compares each with
        `BIN tokenize --model DIR --chat`: the text and the ids. Run it on a checkpoint before
        training on "messages" datasets to know that tandem renders them as its template does.

Exit: 0 every rendering equal (record: written), 1 a difference (printed), 2 usage error.
Needs transformers (and jinja2); no torch.
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path

CONVERSATIONS = [
    [{"role": "user", "content": "What is 2 + 3?"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "7*6?"}],
    [{"role": "system", "content": "  You check sums.\n\n"}, {"role": "user", "content": "1+1?"},
     {"role": "assistant", "content": "2"}, {"role": "user", "content": "And 2+2?"}],
    [{"role": "user", "content": "  padded on both sides \n"},
     {"role": "assistant", "content": "<|channel>thought\nadd them<channel|>The sum is 5.  "},
     {"role": "user", "content": "And 5+5?"}],
    [{"role": "user", "content": "\u00a0\u3000unicode white space\u2003\u2028\n"}],
    [{"role": "user", "content": "q"}, {"role": "model", "content": "an answer<|channel>a thought never closed"},
     {"role": "user", "content": "again"}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a<|channel>x<channel|>b<|channel>y<channel|> c "},
     {"role": "user", "content": "more"}],
    [{"role": "user", "content": "q"}, {"role": "assistant", "content": "tail<channel|>after a stray close"},
     {"role": "user", "content": "ok"}],
    [{"role": "system", "content": "Only a system turn."}],
    [{"role": "user", "content": "emoji \U0001F600 and \u65e5\u672c\u8a9e, caf\u00e9"}],
    [{"role": "user", "content": ""}],
    [{"role": "user", "content": "special text <turn|> and <bos> inside"}],
    [{"role": "user", "content": "tabs\tand\r\nlines\n\n"}, {"role": "assistant", "content": "\n\n"},
     {"role": "user", "content": "\x1c\x1d\x1e\x1f\x85edge spaces\x0b\x0c"}],
]
OPTIONS = [(True, False), (True, True), (False, False)]  # (add_generation_prompt, enable_thinking)


def hf_tokenizer(tokenizer_file, template):
    from transformers import PreTrainedTokenizerFast

    t = PreTrainedTokenizerFast(tokenizer_file=str(tokenizer_file), bos_token="<bos>", eos_token="<eos>",
                                unk_token="<unk>", pad_token="<pad>")
    t.chat_template = template
    return t


def renderings(t):
    for messages in CONVERSATIONS:
        for generation, thinking in OPTIONS:
            text = t.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation,
                                         enable_thinking=thinking)
            ids = t(text, add_special_tokens=False)["input_ids"]
            yield {"messages": messages, "add_generation_prompt": generation, "enable_thinking": thinking,
                   "text": text, "ids": ids}


def checkpoint_template(model):
    jinja = model / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    config = model / "tokenizer_config.json"
    if config.is_file():
        t = json.loads(config.read_text(encoding="utf-8")).get("chat_template")
        if isinstance(t, str):
            return t
        if isinstance(t, list):  # named templates: the default one
            for x in t:
                if x.get("name") == "default":
                    return x["template"]
    raise SystemExit("chat_format.py: %s has no chat template (chat_template.jinja or tokenizer_config.json's)" % model)


def tandem(binary, model, messages, generation, thinking, text_out):
    args = [binary, "tokenize", "--model", str(model), "--chat"]
    if thinking:
        args.append("--thinking")
    if not generation:
        args.append("--no-generation-prompt")
    if text_out:
        args.append("--text")
    p = subprocess.run(args, input=json.dumps(messages).encode(), capture_output=True)
    if p.returncode != 0:
        raise AssertionError("%s failed (%d): %s" % (" ".join(args), p.returncode, p.stderr.decode()))
    return p.stdout.decode("utf-8") if text_out else json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record")
    r.add_argument("--chat-template", required=True, type=Path)
    r.add_argument("--tokenizer", required=True, type=Path)
    r.add_argument("out", type=Path)
    c = sub.add_parser("check")
    c.add_argument("--model", required=True, type=Path)
    c.add_argument("--tandem", required=True)
    a = ap.parse_args()

    if a.command == "record":
        t = hf_tokenizer(a.tokenizer / "tokenizer.json", a.chat_template.read_text(encoding="utf-8"))
        a.out.parent.mkdir(parents=True, exist_ok=True)
        tmp = a.out.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for x in renderings(t):
                f.write(json.dumps(x, ensure_ascii=True) + "\n")
        tmp.replace(a.out)
        return 0

    t = hf_tokenizer(a.model / "tokenizer.json", checkpoint_template(a.model))
    bad = 0
    for n, x in enumerate(renderings(t)):
        text = tandem(a.tandem, a.model, x["messages"], x["add_generation_prompt"], x["enable_thinking"], True)
        ids = tandem(a.tandem, a.model, x["messages"], x["add_generation_prompt"], x["enable_thinking"], False)
        if text != x["text"] or ids != x["ids"]:
            bad += 1
            print("rendering %d differs (add_generation_prompt %s, enable_thinking %s):\n  template: %r\n  tandem:   %r"
                  % (n, x["add_generation_prompt"], x["enable_thinking"], x["text"], text))
    total = len(CONVERSATIONS) * len(OPTIONS)
    print("%d of %d renderings equal the checkpoint's chat template" % (total - bad, total))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
