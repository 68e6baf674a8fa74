#!/usr/bin/env python3
"""Hugging Face transformers peer of tandem's generation benchmark.

Times transformers' generate() on a Gemma 4 text model with random weights, so that its figures
can be printed beside `tandem bench generate`'s. One run generates exactly --new-tokens tokens
(min_new_tokens = max_new_tokens, no stop token) after each of --batch prompts of --prompt-len
random token ids, sampling (do_sample) at --temperature, --top-k and --top-p (transformers'
defaults when sampling: 1, 50, 1), with the model's KV cache (generate()'s default cache). A
warm-up run of 4 new tokens goes first, untimed; the timed run is synchronized on both ends.

The model is built like hf_train_peer.py's: AutoModelForCausalLM from the config's text config on
the device, in --dtype, with transformers' own random initialization and the fastest attention
implementation it accepts (printed, with the ones passed over), in eval mode under
torch.inference_mode().

Usage:
  python3 tools/bench/hf_generate_peer.py --model configs/models/gemma-4-E2B [--batch 256]
      [--prompt-len 128] [--new-tokens 256] [--temperature 1] [--top-k 50] [--top-p 1]
      [--device cuda|cpu] [--dtype bf16|fp32] [--attn IMPL] [--seed N] [--json PATH]
Exit: 0 done; 1 a runtime failure (e.g. CUDA out of memory, with the peak); 2 bad arguments, a
missing config, or an environment without torch, CUDA (for --device cuda) or Gemma 4 support.
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_peer_common import (  # noqa: E402  (beside this script, wherever it is run from)
    Parser, attention_candidates, build_model, check_json_path, config_value, device_name, fail,
    gib, import_libraries, load_text_config, non_negative, out_of_memory_error, out_of_memory_message, positive,
    read_model_config, resolve_device, run, synchronize, torch_dtype, write_json)

PROG = "hf_generate_peer.py"
WARMUP_TOKENS = 4


def probability(text):
    value = float(text)
    if not 0 < value <= 1:
        raise ValueError
    return value


def parse_args(argv):
    p = Parser(prog=PROG, description="Times transformers' generate() on a Gemma 4 model (random weights).")
    p.add_argument("--model", required=True, help="directory holding a Hugging Face config.json")
    p.add_argument("--batch", type=positive, default=256, help="prompts generated at once (default 256)")
    p.add_argument("--prompt-len", type=positive, default=128, help="random prompt tokens each (default 128)")
    p.add_argument("--new-tokens", type=positive, default=256, help="tokens generated after each prompt (default 256)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1)")
    p.add_argument("--top-k", type=non_negative, default=50, help="top-k, 0: none (default 50)")
    p.add_argument("--top-p", type=probability, default=1.0, help="top-p in (0, 1] (default 1)")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda if available, else cpu")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16", help="weights and activations (default bf16)")
    p.add_argument("--attn", default=None, help="attention implementation (default: the fastest available)")
    p.add_argument("--seed", type=non_negative, default=0, help="weights, prompts and sampling (default 0)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write every figure as one JSON object")
    args = p.parse_args(argv)
    if args.temperature <= 0:
        fail(f"bad arguments: --temperature must be > 0 to sample, got {args.temperature}")
    return args


def generate(torch, model, prompts, args, new_tokens):
    """Exactly new_tokens sampled tokens after every prompt; returns the generated ids."""
    out = model.generate(
        input_ids=prompts,
        attention_mask=torch.ones_like(prompts),
        do_sample=True,
        temperature=args.temperature,
        top_k=args.top_k if args.top_k > 0 else None,
        top_p=args.top_p,
        max_new_tokens=new_tokens,
        min_new_tokens=new_tokens,
        pad_token_id=0,
        use_cache=True,
    )
    return out[:, prompts.shape[1]:]


def benchmark(torch, transformers, config, args):
    device = resolve_device(torch, args.device)
    dtype = torch_dtype(torch, args.dtype)
    limit = config_value(config, "max_position_embeddings")
    if limit and args.prompt_len + args.new_tokens > limit:
        fail(f"--prompt-len + --new-tokens ({args.prompt_len + args.new_tokens}) exceeds the model's max_position_embeddings {limit}")
    torch.manual_seed(args.seed)
    candidates, notes = attention_candidates(torch, transformers, config, device, args.dtype, args.attn)
    model, refused = build_model(torch, transformers, config, device, dtype, candidates)
    model.eval()
    print(f"attention: {model.config._attn_implementation}")
    for note in notes + refused:
        print(f"  passed over {note}")
    sys.stdout.flush()
    generator = torch.Generator(device=device).manual_seed(args.seed)
    prompts = torch.randint(0, config.vocab_size, (args.batch, args.prompt_len), device=device, generator=generator)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        generate(torch, model, prompts, args, min(WARMUP_TOKENS, args.new_tokens))
        synchronize(torch, device)
        start = time.perf_counter()
        tokens = generate(torch, model, prompts, args, args.new_tokens)
        synchronize(torch, device)
        seconds = time.perf_counter() - start
    if tuple(tokens.shape) != (args.batch, args.new_tokens):
        fail(f"generate() returned {tuple(tokens.shape)} tokens, not ({args.batch}, {args.new_tokens})", 1)
    return {
        "model": args.model,
        "model_class": type(model).__name__,
        "parameters": sum(p.numel() for p in model.parameters()),
        "attn_implementation": model.config._attn_implementation,
        "attn_notes": notes + refused,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "device": device,
        "device_name": device_name(torch, device),
        "dtype": str(dtype).replace("torch.", ""),
        "batch": args.batch,
        "prompt_len": args.prompt_len,
        "new_tokens": args.new_tokens,
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "total_ms": seconds * 1e3,
        "tokens_per_s": args.batch * args.new_tokens / seconds,
        "peak_gib": gib(torch.cuda.max_memory_allocated()) if device == "cuda" else None,
    }


def main(argv):
    args = parse_args(argv)
    check_json_path(args.json)
    _, raw = read_model_config(args.model)
    torch, transformers = import_libraries()
    config = load_text_config(args.model, raw, transformers)
    try:
        report = benchmark(torch, transformers, config, args)
    except out_of_memory_error(torch) as e:
        fail(out_of_memory_message(torch, e), 1)
    print(f"device: {report['device_name']}; dtype {report['dtype']}; torch {report['torch_version']}, "
          f"transformers {report['transformers_version']}")
    print(f"generate(): batch {args.batch} x ({args.prompt_len}-token prompt + {args.new_tokens} new tokens), sampling at "
          f"temperature {args.temperature:g}, top-k {args.top_k}, top-p {args.top_p:g}")
    print(f"throughput: {report['tokens_per_s']:,.1f} generated tokens/s ({report['total_ms']:.1f} ms)"
          + (f"; peak memory {report['peak_gib']:.3f} GiB" if report["peak_gib"] is not None else ""))
    if args.json:
        write_json(args.json, report)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    run(PROG, main)
