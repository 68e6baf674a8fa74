// The refit benchmark (refit_bench.h).
#include "tools/cli/refit_bench.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/api/refit_stream.hpp"
#include "gpu/comm/loopback_group.h"
#include "gpu/engine/fake/fake_generate_engine.h"
#include "gpu/engine/fake/fake_train_engine.h"
#include "gpu/model/checkpoint.h"

namespace tandem::cli {
namespace {

using clock_type = std::chrono::steady_clock;

/// Runs `rank_work(r)` for every rank on its own thread; the seconds until all returned, or the
/// first rank's error.
gpu::result<double> timed_on_every_rank(int n, const std::function<std::string(int)>& rank_work) {
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  const auto start = clock_type::now();
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) ranks.emplace_back([&, r] { errors[static_cast<std::size_t>(r)] = rank_work(r); });
  for (auto& t : ranks) t.join();
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  for (int r = 0; r < n; ++r)
    if (!errors[static_cast<std::size_t>(r)].empty())
      return gpu::status{gpu::status_code::io_error, "rank " + std::to_string(r) + ": " + errors[static_cast<std::size_t>(r)]};
  return seconds;
}

}  // namespace

gpu::result<refit_bench_figures> run_refit_bench(const refit_bench_settings& s) {
  if (s.receivers < 1 || s.rounds < 1 || s.bucket_bytes < 1)
    return gpu::status{gpu::status_code::invalid_argument, "receivers, rounds and the bucket size must be positive"};
  std::int64_t bytes = s.bytes;
  if (s.model) {
    auto source = gpu::open_checkpoint(*s.model, gpu::dtype::float32);
    if (!source) return gpu::status{source.error().code(), "--model: " + source.error().message()};
    bytes = source->layout.parameter_count * s.bytes_per_parameter;
  }
  bytes -= bytes % 4;
  gpu::fake_model_options m;
  m.weight_bytes = bytes;
  m.tensors = std::max<std::int64_t>(1, std::min<std::int64_t>(64, bytes / 4));
  if (auto st = gpu::check_fake_model_options(m); !st) return st;
  gpu::fake_train_engine trainer(m);
  const gpu::bucket_plan plan(trainer.manifest(), s.bucket_bytes);
  std::vector<std::unique_ptr<gpu::fake_generate_engine>> generators;
  for (int r = 0; r < s.receivers; ++r) {
    gpu::fake_generate_options g;
    g.model = m;
    g.bucket_bytes = s.bucket_bytes;
    g.receive = s.receive;
    generators.push_back(std::make_unique<gpu::fake_generate_engine>(g));
  }
  const int n = s.receivers + 1;
  gpu::zmq_group_options options;
  options.timeout = std::chrono::seconds(120);
  auto group = gpu::join_loopback_group(n, !s.insecure, options);
  if (!group) return gpu::status{group.error().code(), "the group: " + group.error().message()};

  refit_bench_figures f;
  f.bytes = plan.total_bytes();
  f.buckets = static_cast<std::int64_t>(plan.bucket_count());
  std::int64_t largest = 0;
  for (std::size_t i = 0; i < plan.bucket_count(); ++i) largest = std::max(largest, plan.bucket_size(i));
  std::vector<std::vector<std::byte>> buffers(static_cast<std::size_t>(n), std::vector<std::byte>(static_cast<std::size_t>(largest)));
  std::fill(buffers[0].begin(), buffers[0].end(), std::byte{0x5a});
  f.broadcast_seconds = f.refit_seconds = 1e300;
  for (int round = 0; round < s.rounds; ++round) {
    auto broadcast = timed_on_every_rank(n, [&](int r) -> std::string {
      auto& comm = *(*group)[static_cast<std::size_t>(r)];
      for (std::size_t i = 0; i < plan.bucket_count(); ++i)
        if (gpu::status st = comm.broadcast(std::span(buffers[static_cast<std::size_t>(r)]).first(static_cast<std::size_t>(plan.bucket_size(i))), 0);
            !st)
          return "broadcast of bucket " + std::to_string(i) + ": " + st.message();
      return {};
    });
    if (!broadcast) return gpu::status{broadcast.error().code(), "round " + std::to_string(round) + ": " + broadcast.error().message()};
    const auto version = static_cast<std::uint64_t>(round + 1);
    auto refit = timed_on_every_rank(n, [&](int r) -> std::string {
      auto& comm = *(*group)[static_cast<std::size_t>(r)];
      if (r == 0) {
        const stream_outcome out = send_stream(comm, trainer, plan, s.checksums);
        return out.ok() ? std::string() : "send_stream: " + out.reason;
      }
      gpu::fake_generate_engine& g = *generators[static_cast<std::size_t>(r - 1)];
      if (gpu::status st = g.begin_weight_update(version); !st) {
        (void)receive_stream(comm, 0, nullptr, plan, s.checksums);  // the group stays in step
        return "begin_weight_update: " + st.message();
      }
      const stream_outcome out = receive_stream(comm, 0, &g, plan, s.checksums);
      if (!out.ok()) {
        g.abort_weight_update();
        return "receive_stream: " + out.reason;
      }
      gpu::status st = g.commit_weight_update();
      return st ? std::string() : "commit_weight_update: " + st.message();
    });
    if (!refit) return gpu::status{refit.error().code(), "round " + std::to_string(round) + ": " + refit.error().message()};
    f.broadcast_seconds = std::min(f.broadcast_seconds, *broadcast);
    f.refit_seconds = std::min(f.refit_seconds, *refit);
  }
  f.bits_delivered = std::all_of(generators.begin(), generators.end(),
                                 [&](const auto& g) { return g->weight_hash() == trainer.weight_hash(); });
  return f;
}

}  // namespace tandem::cli
