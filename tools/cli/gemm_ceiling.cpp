// The GEMM-only ceiling of a step (gemm_ceiling.h).
#include "tools/cli/gemm_ceiling.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "gpu/core/device_buffer.h"
#include "gpu/core/memory.h"
#include "gpu/ops/linear.h"

namespace tandem::cli {
namespace {

using clock_type = std::chrono::steady_clock;

// The median time of one product (with `backward`, and both its gradients).
gpu::result<double> time_gemm(const gpu::exec_context& ctx, gpu::dtype type, const gemm_shape& g, bool backward) {
  gpu::device_buffer x, w, y, dx, dw;
  if (auto s = gpu::allocate_buffers(ctx, type, {{&x, {g.rows, g.inner}}, {&w, {g.outer, g.inner}}, {&y, {g.rows, g.outer}}}); !s)
    return s;
  if (backward)
    if (auto s = gpu::allocate_buffers(ctx, type, {{&dx, {g.rows, g.inner}}, {&dw, {g.outer, g.inner}}}); !s) return s;
  std::vector<double> times;
  for (int rep = 0; rep < 4; ++rep) {
    const auto start = clock_type::now();
    if (auto s = gpu::ops::linear_forward(ctx, x, w, y); !s) return s;
    if (backward)
      if (auto s = gpu::ops::linear_backward(ctx, x, w, y, dx, dw); !s) return s;
    if (auto s = gpu::wait_for_device(ctx); !s) return s;
    if (rep > 0) times.push_back(std::chrono::duration<double>(clock_type::now() - start).count());  // the first warms up
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

std::vector<gemm_shape> step_gemms(const gpu::model_config& c, const gpu::model_layout& layout, std::int64_t rows) {
  std::vector<gemm_shape> out;
  for (const auto& e : layout.tensors) {
    if (e.shape.size() < 2 || e.name.starts_with("embed_tokens")) continue;
    const std::int64_t outer = e.shape[e.shape.size() - 2], inner = e.shape.back();
    if (e.shape.size() == 3) {  // [experts, out, in]: each expert sees top_k / num_experts of the rows
      const std::int64_t share = std::max<std::int64_t>(1, rows * c.top_k_experts / c.num_experts);
      for (std::int64_t x = 0; x < e.shape[0]; ++x) out.push_back({share, inner, outer});
    } else {
      out.push_back({rows, inner, outer});
    }
  }
  out.push_back({rows, c.hidden_size, c.vocab_size});
  return out;
}

gpu::result<double> gemm_ceiling_seconds(const gpu::exec_context& ctx, gpu::dtype type, const std::vector<gemm_shape>& gemms,
                                         bool backward) {
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, double> timed;
  double total = 0;
  for (const gemm_shape& g : gemms) {
    const auto key = std::tuple(g.rows, g.inner, g.outer);
    auto it = timed.find(key);
    if (it == timed.end()) {
      auto t = time_gemm(ctx, type, g, backward);
      if (!t) return t.error();
      it = timed.emplace(key, *t).first;
    }
    total += it->second;
  }
  return total;
}

}  // namespace tandem::cli
