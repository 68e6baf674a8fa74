// A colocated member's device turns (device_turns.hpp).
#include "actors/runtime/device_turns.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "gpu/core/host_link.h"
#include "gpu/core/memory.h"

namespace tandem {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) { return std::chrono::duration<double>(clock_type::now() - start).count(); }

/// Bytes copied each way to measure the host link.
constexpr std::int64_t host_link_probe_bytes = std::int64_t{256} << 20;

gpu::status failed(const char* turn, const char* engine, const gpu::status& s) {
  return {s.code(), std::string("device turn ") + turn + ": " + engine + ": " + s.message()};
}

}  // namespace

gpu::result<std::shared_ptr<device_turns>> device_turns::create(
    std::shared_ptr<gpu::train_engine> train,
    const std::function<gpu::result<std::shared_ptr<gpu::generate_engine>>()>& make_generator, const gpu::exec_context& ctx,
    bool offload_optimizer) {
  std::shared_ptr<device_turns> turns(new device_turns(std::move(train), ctx.dev, offload_optimizer));
  if (offload_optimizer) {  // the offloads' yardstick, measured where they will run
    auto m = gpu::measure_host_link(ctx, host_link_probe_bytes, 3);
    if (!m) return gpu::status{m.error().code(), "the host link of " + ctx.dev.to_string() + ": " + m.error().message()};
    turns->figures_.host_link_gb_per_s = std::min(m->to_device_gb_per_s, m->to_host_gb_per_s);
  }
  // The first generation turn: the trainer's state leaves before the generator's cache is made.
  if (gpu::status s = turns->hand_to_generation(); !s) return s;
  auto generator = make_generator();
  if (!generator) return generator.error();
  turns->generate_ = std::move(*generator);
  turns->startup_ = turns->take_figures();
  return turns;
}

device_turns::device_turns(std::shared_ptr<gpu::train_engine> train, gpu::device dev, bool offload_optimizer)
    : train_(std::move(train)), dev_(dev), offload_optimizer_(offload_optimizer) {}

std::uint64_t device_turns::in_use() const {
  if (dev_.is_cpu()) return 0;
  auto bytes = gpu::device_memory_in_use(dev_);
  return bytes ? static_cast<std::uint64_t>(*bytes) : 0;
}

gpu::status device_turns::hand_to_generation() {
  if (offload_optimizer_ && train_->memory_state() == gpu::train_memory_state::resident) {
    const auto start = clock_type::now();
    if (gpu::status s = train_->offload_state(); !s) return failed("to generation", "offloading the training state", s);
    figures_.offload_seconds += seconds_since(start);
    figures_.offloaded_bytes += static_cast<std::uint64_t>(train_->offloaded_state_bytes());
    ++figures_.offloads;
  }
  if (generate_ && !generate_->cache_resident()) {
    const auto start = clock_type::now();
    if (gpu::status s = generate_->restore_cache(); !s) return failed("to generation", "making the KV cache", s);
    figures_.cache_restore_seconds += seconds_since(start);
  }
  turn_ = turn::generating;
  return gpu::status::ok();
}

gpu::status device_turns::for_generation() {
  const std::lock_guard lock(mutex_);
  if (turn_ == turn::generating) return gpu::status::ok();
  figures_.training_in_use_bytes = in_use();
  return hand_to_generation();
}

gpu::status device_turns::for_training() {
  const std::lock_guard lock(mutex_);
  if (turn_ == turn::training) return gpu::status::ok();
  figures_.generation_in_use_bytes = in_use();
  if (generate_->cache_resident()) {
    const auto start = clock_type::now();
    if (gpu::status s = generate_->release_cache(); !s) return failed("to training", "releasing the KV cache", s);
    figures_.cache_release_seconds += seconds_since(start);
  }
  if (train_->memory_state() == gpu::train_memory_state::offloaded) {
    const auto start = clock_type::now();
    if (gpu::status s = train_->restore_state(); !s) return failed("to training", "restoring the training state", s);
    figures_.restore_seconds += seconds_since(start);
    figures_.restored_bytes += static_cast<std::uint64_t>(train_->offloaded_state_bytes());
    ++figures_.restores;
  }
  turn_ = turn::training;
  return gpu::status::ok();
}

plain::device_turn_figures device_turns::take_figures() {
  const std::lock_guard lock(mutex_);
  plain::device_turn_figures out = figures_;
  figures_ = {};
  figures_.host_link_gb_per_s = out.host_link_gb_per_s;
  figures_.training_in_use_bytes = out.training_in_use_bytes;
  figures_.generation_in_use_bytes = out.generation_in_use_bytes;
  return out;
}

}  // namespace tandem
