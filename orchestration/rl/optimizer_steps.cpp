// Global batches and their data-parallel shards (optimizer_steps.h).
#include "orchestration/rl/optimizer_steps.h"

#include <string>

#include "orchestration/config/checked_int.h"

namespace tandem::rl {

namespace {

rl_error below_one(const char* name, std::int64_t v) {
  return {rl_errc::invalid_input, std::string(name) + " is " + std::to_string(v) + ", below 1"};
}

}  // namespace

rl_result<sample_range> rank_shard(std::int64_t n, std::int64_t parts, std::int64_t r) {
  if (n < 0) return rl_error{rl_errc::invalid_input, "a shard of " + std::to_string(n) + " samples"};
  if (parts < 1) return below_one("the number of data-parallel ranks", parts);
  if (r < 0 || r >= parts)
    return rl_error{rl_errc::invalid_input, "rank " + std::to_string(r) + " is outside [0, " +
                                                std::to_string(parts) + ")"};
  const auto end = config::checked_mul(n, r + 1);  // r + 1 <= parts, so n*r fits when this does
  if (!end)
    return rl_error{rl_errc::count_overflow, "sharding " + std::to_string(n) + " samples over " +
                                                 std::to_string(parts) + " ranks overflows int64"};
  return sample_range{n * r / parts, *end / parts};
}

rl_result<std::vector<global_batch>> split_optimizer_steps(std::int64_t step_samples,
                                                           std::int64_t train_global_batch_size,
                                                           std::int64_t data_parallel_size) {
  if (step_samples < 1) return below_one("the step's sample count", step_samples);
  if (train_global_batch_size < 1) return below_one("train_global_batch_size", train_global_batch_size);
  if (data_parallel_size < 1) return below_one("the data-parallel size", data_parallel_size);
  if (data_parallel_size > train_global_batch_size)
    return rl_error{rl_errc::invalid_input, "a global batch of train_global_batch_size = " +
                                                std::to_string(train_global_batch_size) +
                                                " samples cannot give each of " + std::to_string(data_parallel_size) +
                                                " data-parallel ranks a sample"};
  if (step_samples % train_global_batch_size != 0)
    return rl_error{rl_errc::does_not_divide,
                    "the step's " + std::to_string(step_samples) +
                        " samples do not split into whole global batches of train_global_batch_size = " +
                        std::to_string(train_global_batch_size) + " samples"};
  const std::int64_t steps = step_samples / train_global_batch_size;
  std::vector<global_batch> out;
  out.reserve(static_cast<std::size_t>(steps));
  for (std::int64_t s = 0; s < steps; ++s) {
    global_batch b;
    b.samples = {s * train_global_batch_size, (s + 1) * train_global_batch_size};  // <= step_samples
    b.rank_shards.reserve(static_cast<std::size_t>(data_parallel_size));
    for (std::int64_t r = 0; r < data_parallel_size; ++r) {
      auto shard = rank_shard(train_global_batch_size, data_parallel_size, r);
      if (!shard) return shard.error();
      b.rank_shards.push_back({b.samples.begin + shard->begin, b.samples.begin + shard->end});
    }
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace tandem::rl
