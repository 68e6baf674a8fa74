// The GEMM-only ceiling of a step (gemm_ceiling.h).
#include "tools/cli/gemm_ceiling.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <tuple>

#include "gpu/core/captured_work.h"
#include "gpu/core/device_buffer.h"
#include "gpu/core/memory.h"
#include "gpu/ops/linear.h"

namespace tandem::cli {
namespace {

using clock_type = std::chrono::steady_clock;

// The operands of one distinct shape: the rows in, the rows out and, for the backward, their gradient.
struct shape_buffers {
  gpu::device_buffer x, y, dx;
};

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
  // Every product reads weights of its own, as the step reads each of its weights once (one
  // buffer reused across layers would sit in L2 and flatter the ceiling); the rows in and out are
  // shared by products of one shape, as a step's activations are hot anyway.
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t>, shape_buffers> rows;
  std::vector<gpu::device_buffer> w(gemms.size()), dw(backward ? gemms.size() : 0);
  for (std::size_t i = 0; i < gemms.size(); ++i) {
    const gemm_shape& g = gemms[i];
    if (auto s = gpu::allocate_buffers(ctx, type, {{&w[i], {g.outer, g.inner}}}); !s) return s;
    if (backward)
      if (auto s = gpu::allocate_buffers(ctx, type, {{&dw[i], {g.outer, g.inner}}}); !s) return s;
    auto [it, fresh] = rows.try_emplace(std::tuple(g.rows, g.inner, g.outer));
    if (!fresh) continue;
    if (auto s = gpu::allocate_buffers(ctx, type, {{&it->second.x, {g.rows, g.inner}}, {&it->second.y, {g.rows, g.outer}}}); !s)
      return s;
    if (backward)
      if (auto s = gpu::allocate_buffers(ctx, type, {{&it->second.dx, {g.rows, g.inner}}}); !s) return s;
  }
  // The whole list back to back: run once (every product's plan and scratch made), captured as one
  // graph, then the median of 3 replays, each waited for once. A product enqueued by the host costs
  // it more than a decode step's product costs the device; replayed, the list times the device.
  const auto pass = [&](const gpu::exec_context& c) -> gpu::status {
    for (std::size_t i = 0; i < gemms.size(); ++i) {
      const gemm_shape& g = gemms[i];
      shape_buffers& b = rows.at(std::tuple(g.rows, g.inner, g.outer));
      if (auto s = gpu::ops::linear_forward(c, b.x, w[i], b.y); !s) return s;
      if (backward)
        if (auto s = gpu::ops::linear_backward(c, b.x, w[i], b.y, b.dx, dw[i]); !s) return s;
    }
    return gpu::status::ok();
  };
  if (auto s = pass(ctx); !s) return s;
  if (auto s = gpu::wait_for_device(ctx); !s) return s;
  auto captured = gpu::captured_work::capture(ctx, pass);
  if (!captured) return captured.error();
  std::vector<double> times;
  for (int rep = 0; rep < 3; ++rep) {
    const auto start = clock_type::now();
    if (auto s = captured->replay(ctx); !s) return s;
    if (auto s = gpu::wait_for_device(ctx); !s) return s;
    times.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace tandem::cli
