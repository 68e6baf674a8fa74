#!/usr/bin/env python3
"""Where a profiled decode step's device time goes, from Nsight Compute's CSV.

Reads the raw page that `ncu --csv --page raw --metrics gpu__time_duration.sum --log-file F` writes
(with `tandem bench generate ... --profiler-range` and `ncu --profile-from-start off`: the kernels
of one replayed decode step) and prints the time by kind of kernel (matrix products, attention,
norms, RoPE, the sampler, element-wise maps, embeddings, other), each with its launches and share,
then the kernels that take the most time, grouped by name.

Usage: ncu_breakdown.py CSV [--top N]
Exit:  0 printed; 1 the file has no kernel with a duration; 2 usage error.
"""
import argparse
import collections
import csv
import sys

TIME_METRIC = "gpu__time_duration.sum"
UNIT_TO_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "second": 1e6, "s": 1e6}

# First match wins; a kernel's full (demangled) name is matched in lower case.
KINDS = [
    ("attention", ("attn", "attention", "paged_", "query_tile", "tile_offsets")),
    ("norm", ("rmsnorm", "residual_norm")),
    ("rope", ("rope",)),
    ("sampler", ("sampl", "top_k", "draw", "token_filter")),
    ("embedding", ("embedding", "ple_")),
    ("matrix products", ("gemm", "nvjet", "cutlass", "xmma", "cublas", "wgmma", "sm90_", "sm80_")),
    ("element-wise", ("map_kernel", "gelu", "softcap", "scale")),
]


def kind_of(name):
    low = name.lower()
    for kind, needles in KINDS:
        if any(n in low for n in needles):
            return kind
    return "other"


def read_kernels(path):
    """[(name, microseconds)] in the file's order."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header_at = next((i for i, r in enumerate(rows) if r and r[0] == "ID"), None)
    if header_at is None:
        raise ValueError(f"{path}: no header row starting with \"ID\" (is it ncu's --csv --page raw output?)")
    header = rows[header_at]
    for column in ("Kernel Name", TIME_METRIC):
        if column not in header:
            raise ValueError(f"{path}: the header has no column \"{column}\"")
    name_col, time_col = header.index("Kernel Name"), header.index(TIME_METRIC)
    scale = 1e-3  # ncu's default unit for durations: nanoseconds
    kernels = []
    for r in rows[header_at + 1:]:
        if len(r) <= max(name_col, time_col):
            continue
        if r[0] == "":  # the units row
            scale = UNIT_TO_US.get(r[time_col].strip(), scale)
            continue
        value = r[time_col].replace(",", "").strip()
        try:
            kernels.append((r[name_col], float(value) * scale))
        except ValueError:
            continue
    return kernels


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=15)
    a = p.parse_args(argv)
    try:
        kernels = read_kernels(a.csv)
    except (OSError, ValueError) as e:
        print(f"ncu_breakdown: {e}", file=sys.stderr)
        return 1
    if not kernels:
        print(f"ncu_breakdown: {a.csv}: no kernel with a {TIME_METRIC} value", file=sys.stderr)
        return 1
    total = sum(t for _, t in kernels)
    by_kind = collections.defaultdict(lambda: [0, 0.0])
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for name, t in kernels:
        by_kind[kind_of(name)][0] += 1
        by_kind[kind_of(name)][1] += t
        short = name.split("(")[0]
        by_name[short][0] += 1
        by_name[short][1] += t
    print(f"{len(kernels)} kernels, {total / 1e3:.3f} ms of device time")
    print(f"  {'kind':<18} {'launches':>8} {'ms':>9} {'share':>7}")
    for kind, (n, t) in sorted(by_kind.items(), key=lambda kv: -kv[1][1]):
        print(f"  {kind:<18} {n:>8} {t / 1e3:>9.3f} {100 * t / total:>6.1f}%")
    print(f"the {min(a.top, len(by_name))} kernels that take the most time:")
    for name, (n, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[: a.top]:
        shown = name if len(name) <= 90 else name[:87] + "..."
        print(f"  {t / 1e3:>8.3f} ms {n:>5} x  {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
