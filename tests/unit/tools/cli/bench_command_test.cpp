// `tandem bench train` (tools/cli/bench_command.cpp, train_bench.h): it trains a small config from
// random initial weights, prints the step time beside its GEMM-only ceiling and the memory split,
// writes the same figures as JSON with the byte counts the options imply, and refuses bad options
// and an absent device by name. `tandem bench generate` (bench_generate_command.cpp,
// generate_bench.h) generates exactly the asked tokens and reports its decode step beside both
// of its ceilings, op by op with --profile, and with --agreement a train engine's scores of a
// sampled batch (generate_agreement.h). `tandem bench refit` (bench_refit_command.cpp,
// refit_bench.h) delivers every byte to every worker and reports the refit beside a broadcast of
// the same buckets. Figures are read, never compared with a time.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "gpu/core/device_query.h"
#include "gpu/model/config.h"
#include "gpu/model/layout.h"
#include "gpu/model/model_flops.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace tg = tandem::gpu;
using tandem::test::cli;
using tandem::test::temp_dir;

namespace {

const std::string tiny = std::string(TANDEM_SOURCE_DIR) + "/configs/models/tiny-dense";

nlohmann::json read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_bench_command)

BOOST_AUTO_TEST_CASE(bench_train_prints_the_step_beside_its_gemm_ceiling_and_the_memory_split) {
  temp_dir t;
  const auto json = t.path() / "bench.json";
  const auto r = cli({"bench", "train", "--model", tiny, "--tokens", "48", "--micro-batch", "2", "--steps", "2", "--warmup", "1",
                      "--json", json.string()});
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  for (const char* line : {"tokens/s", "model TFLOP/s", "GEMM-only ceiling", "memory: fixed", "on cpu", "micro-batch 2 x 48 tokens",
                           "memory by phase"})
    BOOST_TEST(r.out.find(line) != std::string::npos, "missing '" << line << "' in:\n" << r.out);
  const nlohmann::json j = read_json(json);
  const auto c = *tg::load_model_config(tiny);
  const auto layout = tg::build_layout(c, tg::dtype::float32);
  const auto params = j.at("parameters").get<std::int64_t>();
  BOOST_TEST(params == layout.parameter_count);
  BOOST_TEST(j.at("weights_bytes").get<std::int64_t>() == layout.total_bytes());
  BOOST_TEST(j.at("gradients_bytes").get<std::int64_t>() == layout.total_bytes());
  BOOST_TEST(j.at("optimizer_bytes").get<std::int64_t>() == 2 * layout.total_bytes(), "two float32 moments");
  BOOST_TEST(j.at("flops_per_step").get<double>() == 3 * tg::forward_flops(c, layout, 2, 48));
  BOOST_TEST(j.at("step_ms_median").get<double>() > 0);
  BOOST_TEST(j.at("gemm_ceiling_ms").get<double>() > 0);
  BOOST_TEST(j.at("activation_peak_bytes").get<std::int64_t>() > 0);
  BOOST_TEST(std::isfinite(j.at("last_loss").get<double>()));
  BOOST_TEST(j.at("offloaded_bytes").get<std::int64_t>() == j.at("optimizer_bytes").get<std::int64_t>());
  BOOST_TEST(j.at("loss_after_restore").get<double>() < j.at("first_loss").get<double>(), "the restored state trains on");
  // Random initial weights: the loss starts near log(vocab).
  BOOST_TEST(std::abs(j.at("first_loss").get<double>() - std::log(static_cast<double>(c.vocab_size))) < 1.0, j.dump());
}

BOOST_AUTO_TEST_CASE(bench_train_profile_charges_the_timed_steps_to_their_ops) {
  temp_dir t;
  const auto json = t.path() / "bench.json";
  const auto r = cli({"bench", "train", "--model", tiny, "--tokens", "32", "--steps", "2", "--warmup", "1", "--profile", "--json",
                      json.string()});
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  BOOST_TEST(r.out.find("profile of the timed steps") != std::string::npos, r.out);
  const nlohmann::json j = read_json(json);
  std::map<std::string, std::pair<std::int64_t, double>> by_name;
  double total = 0;
  for (const auto& row : j.at("profile")) {
    by_name[row.at("name").get<std::string>()] = {row.at("calls").get<std::int64_t>(), row.at("ms").get<double>()};
    total += row.at("ms").get<double>();
    BOOST_TEST(row.at("ms").get<double>() >= 0);
  }
  // Every op of a step is there, as often in each step; the host's time between the steps once a step.
  for (const char* op : {"linear_forward", "linear_backward", "rmsnorm_forward", "attention_forward", "adamw_step"})
    BOOST_TEST(by_name.count(op) == 1, "no " << op << " in " << j.at("profile").dump());
  BOOST_TEST(by_name["(host, between steps)"].first == 2);
  BOOST_TEST(by_name["adamw_step"].first % 2 == 0);
  // The charges add up to the timed steps (the profile covers them, with the host's gaps).
  BOOST_TEST(total <= 2 * j.at("step_ms_mean").get<double>() * 1.5 + 5, total << " ms against steps of " << j.at("step_ms_mean"));
  BOOST_TEST(total >= 2 * j.at("step_ms_mean").get<double>() * 0.5, total << " ms against steps of " << j.at("step_ms_mean"));
}

BOOST_AUTO_TEST_CASE(bfloat16_optimizer_state_is_a_master_and_two_moments_of_two_bytes) {
  temp_dir t;
  const auto json = t.path() / "bench.json";
  const auto r = cli({"bench", "train", "--model", tiny, "--tokens", "16", "--steps", "1", "--warmup", "0", "--recompute", "full",
                      "--optimizer-dtype", "bf16", "--json", json.string()});
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  BOOST_TEST(r.out.find("bfloat16 master weights and AdamW moments, recompute full") != std::string::npos, r.out);
  const nlohmann::json j = read_json(json);
  BOOST_TEST(j.at("optimizer_bytes").get<std::int64_t>() * 2 == j.at("weights_bytes").get<std::int64_t>() * 3, "6 bytes a parameter beside float32 weights");
}

BOOST_AUTO_TEST_CASE(bench_generate_samples_every_token_and_reports_the_decode_step_beside_its_two_ceilings) {
  temp_dir t;
  const auto json = t.path() / "bench.json";
  const auto r = cli({"bench", "generate", "--model", tiny, "--batch", "5", "--prompt-len", "7", "--new-tokens", "9", "--prefill-budget",
                      "16", "--json", json.string()});
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  for (const char* line : {"generated tokens/s", "decode GEMM-only ceiling", "decode roofline", "on cpu", "batch 5 x (7-token prompt + 9 new tokens)",
                           "top-k 50"})
    BOOST_TEST(r.out.find(line) != std::string::npos, "missing '" << line << "' in:\n" << r.out);
  const nlohmann::json j = read_json(json);
  const auto c = *tg::load_model_config(tiny);
  const auto layout = tg::build_layout(c, tg::dtype::float32);
  BOOST_TEST(j.at("parameters").get<std::int64_t>() == layout.parameter_count);
  BOOST_TEST(j.at("weights_bytes").get<std::int64_t>() == layout.total_bytes());
  // 9 tokens each, the last 8 at least by steps of one sampled row per sequence (decode steps),
  // once the 35 prompt rows went through at 16 a step.
  BOOST_TEST(j.at("decode_steps").get<std::int64_t>() >= 8);
  BOOST_TEST(j.at("decode_steps").get<std::int64_t>() <= 9);
  BOOST_TEST(j.at("preemptions").get<std::int64_t>() == 0);
  BOOST_TEST(j.at("decode_step_ms_median").get<double>() > 0);
  BOOST_TEST(j.at("host_waits_per_decode_step").get<double>() == 0.0, "the CPU backend never waits for a device");
  BOOST_TEST(j.at("decode_gemm_ceiling_ms").get<double>() > 0);
  BOOST_TEST(j.at("copy_gb_per_s").get<double>() > 0);
  // A decode step reads every weight but the per-layer table's unread rows, and the K/V it sees.
  BOOST_TEST(j.at("decode_bytes").get<double>() > 0.9 * static_cast<double>(layout.total_bytes()) - 1);
  // Random initial weights sample near-uniformly among the top 50.
  BOOST_TEST(std::abs(j.at("mean_logprob").get<double>() + std::log(50.0)) < 0.5, j.dump());
}

BOOST_AUTO_TEST_CASE(bench_generate_profiles_the_decode_steps_and_the_trainer_scores_every_sample_bit_for_bit) {
  temp_dir t;
  const auto json = t.path() / "bench.json";
  const auto r = cli({"bench", "generate", "--model", tiny, "--batch", "4", "--prompt-len", "6", "--new-tokens", "10", "--profile",
                      "--agreement", "--json", json.string()});
  BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
  for (const char* line : {"profile of ", "linear_forward", "sampling_forward", "train/generate agreement (4 sequences sampled at temperature 0.7"})
    BOOST_TEST(r.out.find(line) != std::string::npos, "missing '" << line << "' in:\n" << r.out);
  const nlohmann::json a = read_json(json).at("agreement");
  BOOST_TEST(a.at("tokens").get<std::int64_t>() == 40);
  // On one device with the same weights, the generator's sampled logprobs are the trainer's bits.
  BOOST_TEST(a.at("identical").get<std::int64_t>() == 40, a.dump());
  BOOST_TEST(a.at("token_mult_prob_error_mean").get<double>() == 1.0);
  BOOST_TEST(a.at("token_mult_prob_error_max").get<double>() == 1.0);
}

BOOST_AUTO_TEST_CASE(bench_refit_streams_every_bucket_to_every_worker_beside_a_broadcast_of_the_same_buckets) {
  temp_dir t;
  const auto json = t.path() / "refit.json";
  for (const char* receive : {"staging", "in_place"}) {
    const auto r = cli({"bench", "refit", "--mb", "3", "--bucket-mb", "1", "--receivers", "2", "--rounds", "1", "--checksums",
                        "--receive", receive, "--json", json.string()});
    BOOST_REQUIRE_MESSAGE(r.code == 0, r.err);
    for (const char* line : {"3145728 bytes in 3 buckets of up to 1 MiB, from a policy root to 2 rollout workers",
                             "(ZeroMQ on loopback, CurveZMQ), checksums on", "broadcast of the same buckets over the same group",
                             "% of the broadcast", "every rollout worker's weights hash as the policy's: yes"})
      BOOST_TEST(r.out.find(line) != std::string::npos, "missing '" << line << "' in:\n" << r.out);
    const nlohmann::json j = read_json(json);
    BOOST_TEST(j.at("bytes").get<std::int64_t>() == 3 << 20);
    BOOST_TEST(j.at("buckets").get<std::int64_t>() == 3);
    BOOST_TEST(j.at("receive").get<std::string>() == (std::string(receive) == "in_place" ? "in place" : "staging"));
    BOOST_TEST(j.at("bits_delivered").get<bool>());
    BOOST_TEST(j.at("refit_seconds").get<double>() > 0);
    BOOST_TEST(j.at("broadcast_seconds").get<double>() > 0);
  }
  // --model: the config's parameters at two bytes each (bfloat16), in 512 MiB buckets.
  const auto m = cli({"bench", "refit", "--model", tiny, "--rounds", "1", "--insecure"});
  BOOST_REQUIRE_MESSAGE(m.code == 0, m.err);
  const auto layout = tg::build_layout(*tg::load_model_config(tiny), tg::dtype::float32);
  BOOST_TEST(m.out.find(std::to_string(layout.parameter_count * 2) + " bytes in 1 buckets") != std::string::npos, m.out);
  BOOST_TEST(m.out.find("CurveZMQ off") != std::string::npos, m.out);
}

BOOST_AUTO_TEST_CASE(bad_options_are_usage_errors_naming_the_option) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"bench"}, "missing what to benchmark"},
      {{"bench", "decode"}, "unknown benchmark 'decode'"},
      {{"bench", "generate"}, "missing --model DIR"},
      {{"bench", "generate", "--model", tiny, "--batch", "0"}, "--batch '0': expected a whole number from 1"},
      {{"bench", "generate", "--model", tiny, "--top-p", "2"}, "top_p"},
      {{"bench", "generate", "--model", tiny, "--backend", "tpu"}, "--backend 'tpu': expected cpu or cuda"},
      {{"bench", "train"}, "missing --model DIR"},
      {{"bench", "train", "--model", tiny, "--tokens", "1"}, "--tokens '1': expected a whole number from 2"},
      {{"bench", "train", "--model", tiny, "--steps", "x"}, "--steps 'x'"},
      {{"bench", "train", "--model", tiny, "--backend", "tpu"}, "--backend 'tpu': expected cpu or cuda"},
      {{"bench", "train", "--model", tiny, "--recompute", "some"}, "--recompute 'some'"},
      {{"bench", "train", "--model", tiny, "--optimizer-dtype", "fp16"}, "--optimizer-dtype 'fp16'"},
      {{"bench", "train", "--model", tiny, "--dtype", "fp8"}, "--dtype 'fp8': expected fp32 or bf16"},
      {{"bench", "refit"}, "give --model DIR or --mb N (the bytes refit), one of them"},
      {{"bench", "refit", "--model", tiny, "--mb", "4"}, "give --model DIR or --mb N"},
      {{"bench", "refit", "--mb", "0"}, "--mb '0': expected a whole number from 1"},
      {{"bench", "refit", "--mb", "4", "--receive", "elsewhere"}, "--receive 'elsewhere': expected staging or in_place"},
      {{"bench", "refit", "--mb", "4", "--dtype", "fp8"}, "--dtype 'fp8': expected bf16 or fp32"},
  };
  for (const auto& [a, message] : cases) {
    const auto r = cli(a);
    BOOST_TEST(r.code == 2, a.back());
    BOOST_TEST(r.err.find(message) != std::string::npos, "expected '" << message << "' in: " << r.err);
  }
  const auto bf16 = cli({"bench", "train", "--model", tiny, "--dtype", "bf16"});
  BOOST_TEST(bf16.code == 1, "a combination not built is a refusal, not a usage error");
  BOOST_TEST(bf16.err.find("--dtype bf16 runs on --backend cuda") != std::string::npos, bf16.err);
  const auto missing = cli({"bench", "train", "--model", "/no/such/model"});
  BOOST_TEST(missing.code == 1);
  BOOST_TEST(missing.err.find("/no/such/model") != std::string::npos, missing.err);
}

BOOST_AUTO_TEST_CASE(the_cuda_backend_without_a_device_is_refused_naming_it) {
  if (!tg::query_backend().devices.empty()) return;  // a GPU machine runs it for real
  const auto r = cli({"bench", "train", "--model", tiny, "--tokens", "16", "--steps", "1", "--backend", "cuda"});
  BOOST_TEST(r.code == 1);
  BOOST_TEST((r.err.find("cuda:0") != std::string::npos || r.err.find("no CUDA backend") != std::string::npos), r.err);
}

BOOST_AUTO_TEST_SUITE_END()
