// A config with random initial weights on a device, for the benchmarks (bench_model.h).
#include "tools/cli/bench_model.h"

#include "gpu/model/initial_weights.h"
#include "gpu/model/json_text.h"

namespace tandem::cli {

gpu::result<bench_model> random_bench_model(const std::filesystem::path& dir, gpu::dtype type, const gpu::device& dev,
                                            std::uint64_t seed) {
  auto text = gpu::read_text_file(dir / "config.json");
  if (!text) return text.error();
  auto source = gpu::open_checkpoint(dir, type);
  if (!source) return source.error();
  auto range = gpu::initializer_range(*text, (dir / "config.json").string());
  if (!range) return range.error();
  auto weights = gpu::slab::create("parameters", source->layout.total_bytes(), dev);
  if (!weights) return gpu::status(weights.error().code(), "the weights: " + weights.error().message());
  gpu::exec_context ctx;
  ctx.dev = dev;
  if (auto st = gpu::fill_initial_weights(ctx, source->layout, *weights, seed, *range); !st)
    return gpu::status(st.code(), "the initial weights: " + st.message());
  return bench_model{std::move(*source), std::move(*weights)};
}

}  // namespace tandem::cli
