#!/usr/bin/env python3
"""Hugging Face transformers peer of tandem's training benchmark.

Times one training step of a Gemma 4 text model in transformers, with random weights, so that its
figures can be printed beside tandem's own. A step is: forward of --micro-batch sequences of
--tokens random token ids with labels = the input ids (next-token cross-entropy), backward,
torch.optim.AdamW (fused where torch supports it on the device; lr 1e-6, weight decay 0.01, moments
in the parameters' dtype) and zero_grad(set_to_none=True). --warmup steps run untimed, then --steps
steps are timed one by one (synchronizing the device around each) and the median and mean reported.

A multimodal config (Gemma4ForConditionalGeneration, with a text_config) is trained as its text
stack alone: AutoModelForCausalLM over config.get_text_config(), which is Gemma4ForCausalLM for a
gemma4_text config. The model is built directly on the target device (or on the meta device with
--count-only) in the chosen dtype, with transformers' own random initialization.

FLOPs of a step are model FLOPs (gradient-checkpointing recomputation is not counted):
  6 x matrix parameters touched per token x tokens  +  3 x the forward attention products.
Matrix parameters touched per token are found by walking the instantiated model: the weight of
every nn.Linear (q/o projections; k/v where a layer has them: KV-shared layers have none and
k_eq_v layers no v; gate/up/down of the MLP at its real width; the per-layer-input gate and
projection; the per-layer model projection; the MoE router; the lm_head, which is tied to the
embedding but is still a matmul per token), plus each MoE experts tensor (3-D, one slice per
expert) scaled by top_k / num_experts. Embedding lookups are not counted. The forward attention
products are, per query and head, 4 x T_k x head_dim for S = QK^T and P.V, where T_k is the number
of keys the query attends to: min(position + 1, sliding_window) on sliding layers, position + 1 on
full layers; backward is twice the forward, hence 3 x forward in total.

Memory (CUDA only): peak = torch.cuda.max_memory_allocated over the timed steps (after
reset_peak_memory_stats); fixed = torch.cuda.memory_allocated measured after the optimizer step of
the last warm-up step (of one extra untimed step when --warmup is 0), gradients still kept: weights
+ gradients + AdamW moments (+ the small input batch and buffers); activations = peak - fixed. The
fixed memory computed from the tensors' sizes is printed beside it.

Usage:
  python3 tools/bench/hf_train_peer.py --model configs/models/gemma-4-E2B [--tokens 4096]
      [--micro-batch 1] [--steps 10] [--warmup 3] [--gradient-checkpointing]
      [--device cuda|cpu] [--dtype bf16|fp32] [--attn sdpa|eager|flash_attention_2|...]
      [--json PATH] [--count-only]
  --count-only builds the model on the meta device, prints its parameter and FLOP counts and runs
  no step.
Exit: 0 done; 1 a runtime failure (e.g. CUDA out of memory, with the peak); 2 bad arguments, a
missing config, or an environment without torch, CUDA (for --device cuda) or Gemma 4 support.
"""

import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_peer_common import (  # noqa: E402  (beside this script, wherever it is run from)
    Parser, attention_candidates, build_model, check_json_path, config_value, device_name, fail,
    fmt_gib, gib, import_libraries, instantiate, load_text_config, non_negative, out_of_memory_error, out_of_memory_message,
    positive, read_model_config, resolve_device, run, synchronize, torch_dtype, write_json)

PROG = "hf_train_peer.py"
LR = 1e-6
BETAS = (0.9, 0.999)
EPS = 1e-8
WEIGHT_DECAY = 0.01


def parse_args(argv):
    p = Parser(prog=PROG, description="Times a transformers training step of a Gemma 4 model (random weights).")
    p.add_argument("--model", required=True, help="directory holding a Hugging Face config.json")
    p.add_argument("--tokens", type=positive, default=4096, help="tokens per sequence (default 4096)")
    p.add_argument("--micro-batch", type=positive, default=1, help="sequences per step (default 1)")
    p.add_argument("--steps", type=positive, default=10, help="timed steps (default 10)")
    p.add_argument("--warmup", type=non_negative, default=3, help="untimed steps first (default 3)")
    p.add_argument("--gradient-checkpointing", action="store_true", help="recompute activations in backward")
    p.add_argument("--device", choices=["cuda", "cpu"], default=None, help="default: cuda if available, else cpu")
    p.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16", help="weights, gradients and moments (default bf16)")
    p.add_argument("--attn", default=None, help="attention implementation (default: the fastest available)")
    p.add_argument("--json", default=None, metavar="PATH", help="also write every figure as one JSON object")
    p.add_argument("--count-only", action="store_true", help="build on the meta device, print counts, run no step")
    return p.parse_args(argv)


# ---------------------------------------------------------------- environment and model


# ---------------------------------------------------------------- counting


def top_k_experts(config):
    for name in ("top_k_experts", "num_experts_per_tok", "moe_top_k"):
        value = config_value(config, name)
        if value:
            return int(value)
    return None


def expert_tensors(torch, model):
    """(module name, parameter name, tensor, num_experts) of every MoE experts tensor: a 3-D
    parameter held directly by a module that has num_experts, one slice per expert."""
    found = []
    for mname, module in model.named_modules():
        num_experts = getattr(module, "num_experts", None)
        if isinstance(module, torch.nn.Linear) or not num_experts:
            continue
        for pname, param in module.named_parameters(recurse=False):
            if param.dim() == 3 and param.shape[0] == num_experts:
                found.append((mname, pname, param, int(num_experts)))
    return found


def matrix_parameters(torch, model, config):
    """Matrix parameters touched per token: every nn.Linear weight (the tied lm_head included) and
    the MoE experts tensors scaled by top_k / num_experts. Also returns the count with all experts."""
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    touched = float(linear)
    every = linear
    experts = expert_tensors(torch, model)
    if experts:
        top_k = top_k_experts(config)
        if top_k is None:
            fail("the model has MoE experts but its config names no top-k (top_k_experts)", 1)
        for _, _, param, num_experts in experts:
            touched += param.numel() * top_k / num_experts
            every += param.numel()
    return touched, every


def total_parameters(model):
    return sum(p.numel() for p in model.parameters())  # a tied weight is counted once


def keys_attended(length, window):
    """Sum over positions 0..length-1 of the keys a causal query attends to."""
    if window is None or window >= length:
        return length * (length + 1) // 2
    return window * (window + 1) // 2 + (length - window) * window


def attention_layers(torch, model):
    """(heads, head_dim, sliding_window or None) of every self-attention module (one with q_proj)."""
    layers = []
    for module in model.modules():
        q_proj = getattr(module, "q_proj", None)
        head_dim = getattr(module, "head_dim", None)
        if isinstance(q_proj, torch.nn.Linear) and head_dim:
            window = getattr(module, "sliding_window", None)
            layers.append((q_proj.out_features // head_dim, head_dim, window or None))
    return layers


def attention_forward_flops(layers, length):
    """Forward FLOPs of S = QK^T and P.V for one sequence: 4 x T_k x head_dim per query and head."""
    return sum(4 * heads * head_dim * keys_attended(length, window) for heads, head_dim, window in layers)


def step_flops(matrix_touched, attn_forward, tokens, micro_batch):
    return micro_batch * (6.0 * matrix_touched * tokens + 3.0 * attn_forward)


# ---------------------------------------------------------------- training


def enable_checkpointing(model):
    """Activation (gradient) checkpointing of every decoder layer, non-reentrant."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5.x; the old name warns
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    if not any(getattr(m, "gradient_checkpointing", False) for m in model.modules()):
        fail(f"{type(model).__name__} did not enable gradient checkpointing", 1)


def make_optimizer(torch, model, device):
    params = [p for p in model.parameters() if p.requires_grad]
    settings = dict(lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY)
    try:
        return torch.optim.AdamW(params, fused=True, **settings), True
    except (RuntimeError, ValueError):
        return torch.optim.AdamW(params, foreach=(device == "cuda"), **settings), False


def describe_optimizer(optimizer, fused, dtype):
    d = optimizer.defaults
    kind = "fused" if fused else ("foreach" if d.get("foreach") else "for-loop")
    return (f"torch.optim.AdamW ({kind}): lr {d['lr']:g}, betas {tuple(d['betas'])}, eps {d['eps']:g}, "
            f"weight decay {d['weight_decay']:g}, moments {dtype}")


def moment_dtype(optimizer):
    for state in optimizer.state.values():
        if "exp_avg" in state:
            return str(state["exp_avg"].dtype).replace("torch.", "")
    return None


def train_step(model, optimizer, batch, probe=None):
    loss = model(input_ids=batch, labels=batch, use_cache=False).loss
    loss.backward()
    optimizer.step()
    if probe is not None:
        probe()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach()


def fixed_bytes_from_tensors(model, optimizer):
    """Weights + gradients + optimizer state, from the tensors' sizes (tied weights once)."""
    total = 0
    for p in model.parameters():
        total += p.numel() * p.element_size()
        if p.grad is not None:
            total += p.grad.numel() * p.grad.element_size()
    for state in optimizer.state.values():
        for value in state.values():
            if hasattr(value, "element_size"):
                total += value.numel() * value.element_size()
    return total


def run_steps(torch, model, optimizer, batch, args, device):
    """Warm-up, then the timed steps. Returns step times (s), the last loss and memory figures.
    The fixed memory is read, outside the timed steps, after the optimizer step of the last
    warm-up step (or of one extra step when there is no warm-up), its gradients still kept."""
    memory = {}

    def probe():
        if device == "cuda":
            memory["fixed"] = torch.cuda.memory_allocated()
        memory["fixed_tensors"] = fixed_bytes_from_tensors(model, optimizer)

    for i in range(args.warmup):
        train_step(model, optimizer, batch, probe if i == args.warmup - 1 else None)
    synchronize(torch, device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times, loss = [], None
    for _ in range(args.steps):
        synchronize(torch, device)
        start = time.perf_counter()
        loss = train_step(model, optimizer, batch)
        synchronize(torch, device)
        times.append(time.perf_counter() - start)
    if device == "cuda":
        memory["peak"] = torch.cuda.max_memory_allocated()
    if args.warmup == 0:
        train_step(model, optimizer, batch, probe)
    return times, float(loss), memory


# ---------------------------------------------------------------- report


def print_counts(r):
    print(f"model: {r['model']} ({r['model_class']}, {r['num_layers']} layers)")
    print(f"total parameters: {r['total_params']:,} ({r['total_params']:.3e})")
    print(f"matrix parameters touched per token: {r['matrix_params']:,.0f} ({r['matrix_params']:.3e}); "
          f"all matrix parameters: {r['matrix_params_all']:,}")
    print(f"model FLOPs per step: {r['flops_per_step']:.4e} (attention products {r['attention_flops_per_step']:.4e}; "
          f"6 x matrix x tokens + 3 x forward attention, {r['micro_batch']} x {r['tokens']} tokens)")


def print_setup(r):
    experts = r.get("experts_implementation")
    print(f"attention: {r['attn_implementation']}" + (f"; MoE experts: {experts}" if experts else ""))
    for note in r["attn_notes"]:
        print(f"  passed over {note}")
    sys.stdout.flush()


def print_timing(r):
    print(f"optimizer: {r['optimizer']}")
    print(f"device: {r['device_name']}; dtype {r['dtype']}; gradient checkpointing "
          f"{'on' if r['gradient_checkpointing'] else 'off'}; torch {r['torch_version']}, transformers {r['transformers_version']}")
    print(f"step: median {r['step_ms_median']:.2f} ms, mean {r['step_ms_mean']:.2f} ms over {r['steps']} steps "
          f"(after {r['warmup']} warm-up); last loss {r['loss']:.4f}")
    print(f"throughput: {r['tokens_per_s']:,.1f} tokens/s; model {r['model_tflops']:.3f} TFLOP/s")
    tensors = fmt_gib(r["fixed_gib_from_tensors"])
    if r["peak_gib"] is None:
        print(f"memory: n/a on {r['device']} (weights + gradients + AdamW state from the tensors' sizes: {tensors})")
    else:
        print(f"memory: peak {fmt_gib(r['peak_gib'])}, fixed {fmt_gib(r['fixed_gib'])} ({r['fixed_method']}; "
              f"from the tensors' sizes {tensors}), activations {fmt_gib(r['activation_gib'])}")


# ---------------------------------------------------------------- main


def count_report(torch, model, config, args):
    touched, every = matrix_parameters(torch, model, config)
    layers = attention_layers(torch, model)
    attn = attention_forward_flops(layers, args.tokens)
    return {
        "model": args.model,
        "model_class": type(model).__name__,
        "num_layers": len(layers),
        "total_params": total_parameters(model),
        "matrix_params": touched,
        "matrix_params_all": every,
        "tokens": args.tokens,
        "micro_batch": args.micro_batch,
        "attention_flops_per_step": 3.0 * args.micro_batch * attn,
        "flops_per_step": step_flops(touched, attn, args.tokens, args.micro_batch),
    }


def check_length(config, tokens):
    limit = config_value(config, "max_position_embeddings")
    if limit and tokens > limit:
        fail(f"--tokens {tokens} exceeds the model's max_position_embeddings {limit}")


def benchmark(torch, transformers, config, args):
    dtype = torch_dtype(torch, args.dtype)
    if args.count_only:
        model = instantiate(torch, transformers, config, "meta", dtype, args.attn)
        return count_report(torch, model, config, args)
    device = resolve_device(torch, args.device)
    torch.manual_seed(0)

    candidates, notes = attention_candidates(torch, transformers, config, device, args.dtype, args.attn)
    model, refused = build_model(torch, transformers, config, device, dtype, candidates)
    model.train()
    if args.gradient_checkpointing:
        enable_checkpointing(model)
    report = count_report(torch, model, config, args)
    report.update({
        "attn_implementation": model.config._attn_implementation,
        "attn_notes": notes + refused,
        "experts_implementation": getattr(model.config, "_experts_implementation", None) if expert_tensors(torch, model) else None,
    })
    print_counts(report)
    print_setup(report)
    optimizer, fused = make_optimizer(torch, model, device)
    batch = torch.randint(0, config.vocab_size, (args.micro_batch, args.tokens), device=device)

    times, loss, memory = run_steps(torch, model, optimizer, batch, args, device)
    median, mean = statistics.median(times), statistics.fmean(times)
    peak, fixed = memory.get("peak"), memory.get("fixed")
    report.update({
        "optimizer": describe_optimizer(optimizer, fused, moment_dtype(optimizer)),
        "optimizer_fused": fused,
        "torch_version": torch.__version__,
        "transformers_version": transformers.__version__,
        "device": device,
        "device_name": device_name(torch, device),
        "dtype": str(dtype).replace("torch.", ""),
        "gradient_checkpointing": bool(args.gradient_checkpointing),
        "steps": args.steps,
        "warmup": args.warmup,
        "step_ms": [t * 1e3 for t in times],
        "step_ms_median": median * 1e3,
        "step_ms_mean": mean * 1e3,
        "loss": loss,
        "tokens_per_s": args.micro_batch * args.tokens / median,
        "model_tflops": report["flops_per_step"] / median / 1e12,
        "peak_gib": gib(peak),
        "fixed_gib": gib(fixed),
        "fixed_method": "torch.cuda.memory_allocated after a step, gradients kept" if fixed is not None else None,
        "fixed_gib_from_tensors": gib(memory.get("fixed_tensors")),
        "activation_gib": gib(peak - fixed) if peak is not None and fixed is not None else None,
    })
    return report


def main(argv):
    args = parse_args(argv)
    check_json_path(args.json)
    _, raw = read_model_config(args.model)
    torch, transformers = import_libraries()
    config = load_text_config(args.model, raw, transformers)
    check_length(config, args.tokens)
    try:
        report = benchmark(torch, transformers, config, args)
    except out_of_memory_error(torch) as e:
        fail(out_of_memory_message(torch, e), 1)
    if args.count_only:
        print_counts(report)
    else:
        print_timing(report)
    if args.json:
        write_json(args.json, report)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    run(PROG, main)
