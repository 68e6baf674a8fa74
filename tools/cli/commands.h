// The tandem command-line interface: one function per subcommand, writing to the given streams
// and returning the process exit code (0 ok, 1 refused input, 2 usage error). main.cpp only
// dispatches, so tests call these directly.
#pragma once

#include <istream>
#include <ostream>
#include <string>
#include <vector>

namespace tandem::cli {

constexpr int exit_ok = 0;
constexpr int exit_refused = 1;  ///< a recipe or model was refused, or --minimize found keys
constexpr int exit_usage = 2;

using args = std::vector<std::string>;

/// Dispatches `tandem <args...>` (args exclude the program name).
int run_cli(const args& a, std::ostream& out, std::ostream& err);

int validate_command(const args& a, std::ostream& out, std::ostream& err);
int run_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem join`: one member process of a run (join_command.cpp).
int join_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem keys FILE --world N`: a run's CurveZMQ keys (keys_command.cpp).
int keys_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem inspect --model DIR [--json]` (inspect_command.cpp).
int inspect_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem convert --model DIR --out DIR ...` (convert_command.cpp).
int convert_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem logprobs --model DIR --tokens FILE ...` (logprobs_command.cpp).
int logprobs_command(const args& a, std::ostream& out, std::ostream& err);
int generate_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem loss --model DIR --tokens FILE ...` (loss_command.cpp).
int loss_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem metrics export|check|tensorboard RUN_DIR ...`: a run's metrics.jsonl as NeMo-RL JSON,
/// checked against metric gates, or as TensorBoard events (metrics_command.cpp).
int metrics_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem plot RUN_DIR [-o FILE.png] [--metrics a,b]`: a PNG of a run's metrics (plot_command.cpp).
int plot_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem tokenize --model DIR [--special] | --decode [--skip-special]`: stdin encoded as JSON
/// ids, or JSON ids decoded to text (tokenize_command.cpp).
int tokenize_command(const args& a, std::istream& in, std::ostream& out, std::ostream& err);
/// `tandem dataset check FILE`: a prompt dataset read as a run reads it (dataset_command.cpp).
int dataset_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem init --config FILE --out DIR [--seed N] [--tokenizer DIR]`: a checkpoint directory
/// with Gemma 4's random initialisation (init_command.cpp).
int init_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem bench train --model DIR ...`: train steps of the Gemma 4 engine beside the GEMM-only
/// ceiling of the same step (bench_command.cpp, train_bench.h).
int bench_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem bench generate --model DIR ...`: one batch of sampled generations beside the decode
/// step's GEMM-only ceiling and memory roofline (bench_generate_command.cpp, generate_bench.h).
int bench_generate_command(const args& a, std::ostream& out, std::ostream& err);
/// `tandem bench refit [--model DIR | --mb N] ...`: a refit over the CPU data plane beside a plain
/// broadcast of the same buckets (bench_refit_command.cpp, refit_bench.h).
int bench_refit_command(const args& a, std::ostream& out, std::ostream& err);
int help_command(const args& a, std::ostream& out, std::ostream& err);
int version_command(std::ostream& out);

}  // namespace tandem::cli
