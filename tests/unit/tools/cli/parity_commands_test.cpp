// `tandem logprobs`, `tandem loss` and `tandem generate` (tools/cli/*_command.cpp): their JSON
// output on a small checkpoint, consistency between them (logprobs scores generated tokens with
// the generator's bits), recompute modes giving the same bits, and one located error for bad
// token files and options.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gpu/core/device_query.h"
#include "gpu/model/safetensors_file.h"
#include "support/checkpoint_fixture.h"
#include "support/cli_runner.h"
#include "support/temp_dir.h"

namespace tg = tandem::gpu;
using tandem::test::checkpoint_builder;
using tandem::test::cli;
using tandem::test::cli_result;
using tandem::test::preset_config;
using tandem::test::temp_dir;

namespace {

std::string model_dir(const temp_dir& t) {
  checkpoint_builder b(t.path() / "ckpt");
  const std::string config = preset_config("tiny-all");
  b.set_config(config);
  b.add_text_stack(*tg::parse_model_config(config, "config.json"), tg::dtype::float32, 3);
  b.write();
  return b.dir().string();
}

std::string tokens_file(const temp_dir& t, const std::string& json) { return t.write("tokens.json", json); }

}  // namespace

BOOST_AUTO_TEST_SUITE(cli_parity_commands)

BOOST_AUTO_TEST_CASE(logprobs_prints_one_array_per_sequence_and_loss_is_their_negated_mean) {
  temp_dir t;
  const std::string model = model_dir(t), tokens = tokens_file(t, "[[2, 17, 33, 250, 4], [5], [9, 9, 0]]");
  const cli_result lp = cli({"logprobs", "--model", model, "--tokens", tokens});
  BOOST_TEST(lp.code == 0, lp.err);
  const auto rows = nlohmann::json::parse(lp.out);
  BOOST_REQUIRE(rows.size() == 3u);
  BOOST_TEST(rows[0].size() == 4u);
  BOOST_TEST(rows[1].size() == 0u);
  BOOST_TEST(rows[2].size() == 2u);
  double sum = 0;
  for (const auto& row : rows)
    for (const auto& v : row) {
      BOOST_TEST(v.get<double>() < 0);
      sum += v.get<double>();
    }
  const cli_result loss = cli({"loss", "--model", model, "--tokens", tokens});
  BOOST_TEST(loss.code == 0, loss.err);
  const auto l = nlohmann::json::parse(loss.out);
  BOOST_TEST(l["tokens"] == 6);
  BOOST_TEST(l["loss"].get<double>() == -sum / 6, boost::test_tools::tolerance(1e-6));

  const cli_result masked = cli({"logprobs", "--model", model, "--tokens", tokens, "--temperature", "0.5", "--top-k", "1"});
  BOOST_TEST(masked.code == 0, masked.err);
  for (const auto& row : nlohmann::json::parse(masked.out))
    for (const auto& v : row) BOOST_TEST((v.is_null() || v.get<double>() == 0.0), "top-k 1 leaves the argmax at logprob 0, else null");
}

BOOST_AUTO_TEST_CASE(loss_gradients_name_every_trainable_tensor_and_agree_bitwise_across_recompute_modes) {
  temp_dir t;
  const std::string model = model_dir(t), tokens = tokens_file(t, "[[2, 17, 33, 250, 4, 8, 8], [5, 6, 7]]");
  const cli_result none = cli({"loss", "--model", model, "--tokens", tokens, "--gradients"});
  BOOST_TEST(none.code == 0, none.err);
  const auto g = nlohmann::json::parse(none.out)["gradients"];
  BOOST_TEST(g.size() == 145u - 6u);  // every layout tensor but the six layer_scalar buffers
  BOOST_TEST(!g.contains("model.layers.0.layer_scalar"));
  BOOST_TEST(g["model.layers.2.self_attn.q_proj.weight"]["shape"] == nlohmann::json::array({128, 64}));
  BOOST_TEST(g["model.layers.2.self_attn.q_proj.weight"]["data"].size() == 128u * 64u);
  for (const char* mode : {"selective", "full"}) {
    const cli_result r = cli({"loss", "--model", model, "--tokens", tokens, "--gradients", "--recompute", mode});
    BOOST_TEST(r.code == 0, r.err);
    BOOST_TEST(r.out == none.out, mode << " gives other bits than none");
  }
}

BOOST_AUTO_TEST_CASE(bad_token_files_and_options_are_refused_with_one_located_error) {
  temp_dir t;
  const std::string model = model_dir(t);
  struct bad {
    std::string json, part;
  };
  for (const bad& b : {bad{"[[1, 2], [3, 256]]", "sequence 1, token 1: 256 is not a token id in [0, 256)"},
                       bad{"[[1, -2]]", "sequence 0, token 1: -2 is not a token id"},
                       bad{"[[1, 2.5]]", "sequence 0, token 1: 2.5 is not a token id"},
                       bad{"{\"a\": 1}", "expected a JSON array of token-id arrays"},
                       bad{"[[1, 2]", "invalid JSON at line 1"},
                       bad{"[7]", "sequence 0: expected an array of token ids"}}) {
    const std::string tokens = tokens_file(t, b.json);
    for (const char* command : {"logprobs", "loss"}) {
      const cli_result r = cli({command, "--model", model, "--tokens", tokens});
      BOOST_TEST(r.code == 1, command << " " << b.json);
      BOOST_TEST(std::count(r.err.begin(), r.err.end(), '\n') == 1, r.err);
      BOOST_TEST(r.err.find(tokens + ": " ) != std::string::npos, r.err);
      BOOST_TEST(r.err.find(b.part) != std::string::npos, r.err);
    }
  }
  const std::string ok = tokens_file(t, "[[1, 2]]");
  BOOST_TEST(cli({"loss", "--model", model, "--tokens", ok, "--recompute", "some"}).code == 2);
  BOOST_TEST(cli({"logprobs", "--model", model, "--tokens", ok, "--top-p", "1.5"}).code == 2);
  BOOST_TEST(cli({"logprobs", "--model", model, "--tokens", ok, "--temperature", "hot"}).code == 2);
  BOOST_TEST(cli({"logprobs", "--model", "tiny-all", "--tokens", ok}).code == 1);  // a preset has no weights
  BOOST_TEST(cli({"loss", "--model", model, "--tokens", tokens_file(t, "[[1], []]")}).code == 1);
}

BOOST_AUTO_TEST_CASE(backend_and_dtype_choose_where_logprobs_loss_and_generate_compute_and_are_refused_by_name) {
  temp_dir t;
  const std::string model = model_dir(t), tokens = tokens_file(t, "[[2, 17, 33, 250, 4], [9, 9, 0]]");
  for (const char* command : {"logprobs", "loss", "generate"}) {
    const auto with = [&](std::vector<std::string> extra) {
      std::vector<std::string> a{command, "--model", model, "--tokens", tokens};
      if (std::string(command) == "generate") a.insert(a.end(), {"--max-new-tokens", "3", "--greedy"});
      a.insert(a.end(), extra.begin(), extra.end());
      return cli(a);
    };
    const cli_result plain = with({});
    const cli_result explicit_cpu = with({"--backend", "cpu", "--dtype", "fp32"});
    BOOST_TEST(explicit_cpu.code == 0, explicit_cpu.err);
    BOOST_TEST(explicit_cpu.out == plain.out, "the CPU in float32 is the default");
    const cli_result bf16 = with({"--dtype", "bf16"});
    BOOST_TEST(bf16.code == 1);
    BOOST_TEST(bf16.err == std::string("tandem ") + command + ": --dtype bf16 runs on --backend cuda: the CPU computes in float32\n");
    const cli_result tpu = with({"--backend", "tpu"});
    BOOST_TEST(tpu.code == 2);
    BOOST_TEST(tpu.err == std::string("tandem ") + command + ": --backend 'tpu': expected cpu or cuda\n");
    const cli_result fp16 = with({"--dtype", "fp16"});
    BOOST_TEST(fp16.code == 2);
    BOOST_TEST(fp16.err == std::string("tandem ") + command + ": --dtype 'fp16': expected fp32 or bf16\n");
    if (tg::query_backend().devices.empty()) {  // here: the device is named; a GPU machine's gpu tests run it
      const cli_result cuda = with({"--backend", "cuda"});
      BOOST_TEST(cuda.code == 1);
      BOOST_TEST((cuda.err.find("cuda:0") != std::string::npos || cuda.err.find("no CUDA backend") != std::string::npos), cuda.err);
    }
  }
}

BOOST_AUTO_TEST_CASE(logprobs_trace_writes_every_named_activation_and_never_overwrites_a_file) {
  temp_dir t;
  const std::string model = model_dir(t), tokens = tokens_file(t, "[[2, 17, 33, 250, 4], [9, 9, 0]]");
  const std::string trace = (t.path() / "trace.safetensors").string();
  const cli_result plain = cli({"logprobs", "--model", model, "--tokens", tokens});
  const cli_result traced = cli({"logprobs", "--model", model, "--tokens", tokens, "--trace", trace});
  BOOST_REQUIRE_MESSAGE(traced.code == 0, traced.err);
  BOOST_TEST(traced.out == plain.out, "tracing changes no logprob");
  auto file = tg::st_file::open(trace);
  BOOST_REQUIRE_MESSAGE(file.has_value(), (file.has_value() ? "" : file.error().message()));
  const auto c = *tg::parse_model_config(preset_config("tiny-all"), "config.json");
  for (const std::string& key : {std::string("embed"), std::string("final_norm"), std::string("layers.0.layer_out"),
                                 "layers." + std::to_string(c.num_hidden_layers - 1) + ".layer_out"}) {
    const tg::st_tensor* e = file->header().find(key);
    BOOST_REQUIRE_MESSAGE(e != nullptr, "no " << key);
    BOOST_TEST((e->type == tg::st_dtype::f32));
    BOOST_TEST(e->shape == (std::vector<std::int64_t>{8, c.hidden_size}), key << ": the 8 packed tokens");
  }
  BOOST_TEST(file->header().metadata.at("format") == "tandem trace");
  const cli_result again = cli({"logprobs", "--model", model, "--tokens", tokens, "--trace", trace});
  BOOST_TEST(again.code == 1);
  BOOST_TEST(again.err == "tandem logprobs: --trace " + trace + ": the file exists (it is never overwritten)\n");
}

BOOST_AUTO_TEST_CASE(generate_is_reproducible_with_a_seed_and_logprobs_scores_its_tokens_with_the_same_bits) {
  temp_dir t;
  const std::string model = model_dir(t), prompts = tokens_file(t, "[[2, 17, 33], [5], [9, 9, 0, 4]]");
  const std::vector<std::string> sampled = {"generate", "--model", model, "--tokens", prompts, "--max-new-tokens", "6",
                                            "--temperature", "0.7", "--top-k", "20", "--top-p", "0.9", "--seed", "5"};
  const cli_result a = cli(sampled), b = cli(sampled);
  BOOST_TEST(a.code == 0, a.err);
  BOOST_TEST(a.out == b.out);
  const auto rows = nlohmann::json::parse(a.out);
  BOOST_REQUIRE(rows.size() == 3u);
  const std::vector<std::vector<int>> prompt_tokens = {{2, 17, 33}, {5}, {9, 9, 0, 4}};
  nlohmann::json full = nlohmann::json::array();
  for (std::size_t i = 0; i < rows.size(); ++i) {
    BOOST_TEST(rows[i]["finish"] == "length");
    BOOST_TEST(rows[i]["tokens"].size() == 6u);
    auto seq = prompt_tokens[i];
    for (const auto& x : rows[i]["tokens"]) seq.push_back(x.get<int>());
    full.push_back(seq);
  }
  const std::string full_file = t.write("full.json", full.dump());
  const cli_result lp = cli({"logprobs", "--model", model, "--tokens", full_file, "--temperature", "0.7", "--top-k", "20",
                             "--top-p", "0.9"});
  BOOST_TEST(lp.code == 0, lp.err);
  const auto scored = nlohmann::json::parse(lp.out);
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t k = 0; k < 6; ++k)
      BOOST_TEST(scored[i][prompt_tokens[i].size() - 1 + k].get<float>() == rows[i]["logprobs"][k].get<float>(),
                 "prompt " << i << ", token " << k);
  const cli_result other = cli({"generate", "--model", model, "--tokens", prompts, "--max-new-tokens", "6", "--seed", "6"});
  BOOST_TEST(other.code == 0, other.err);
  BOOST_TEST(other.out != a.out);
}

BOOST_AUTO_TEST_CASE(generate_stops_after_a_stop_token_and_refuses_bad_options) {
  temp_dir t;
  const std::string model = model_dir(t), prompts = tokens_file(t, "[[2, 17, 33]]");
  const cli_result greedy = cli({"generate", "--model", model, "--tokens", prompts, "--max-new-tokens", "4", "--greedy"});
  BOOST_TEST(greedy.code == 0, greedy.err);
  const auto first = nlohmann::json::parse(greedy.out)[0]["tokens"][1].get<int>();
  const cli_result stopped = cli({"generate", "--model", model, "--tokens", prompts, "--max-new-tokens", "4", "--greedy",
                                  "--stop", "250", "--stop", std::to_string(first)});
  BOOST_TEST(stopped.code == 0, stopped.err);
  const auto row = nlohmann::json::parse(stopped.out)[0];
  BOOST_TEST(row["finish"] == "stop");
  BOOST_TEST(row["tokens"].back().get<int>() == first);
  BOOST_TEST(row["tokens"].size() <= 2u);
  BOOST_TEST(cli({"generate", "--model", model, "--tokens", prompts}).code == 2);
  BOOST_TEST(cli({"generate", "--model", model, "--tokens", prompts, "--max-new-tokens", "0"}).code == 2);
  BOOST_TEST(cli({"generate", "--model", model, "--tokens", prompts, "--max-new-tokens", "3", "--greedy", "--top-k", "3"}).code == 2);
  BOOST_TEST(cli({"generate", "--model", model, "--tokens", prompts, "--max-new-tokens", "3", "--stop", "x"}).code == 2);
  const cli_result vocab = cli({"generate", "--model", model, "--tokens", prompts, "--max-new-tokens", "3", "--stop", "256"});
  BOOST_TEST(vocab.code == 1);
  BOOST_TEST(vocab.err.find("request 0: stop token 256 is outside the vocabulary") != std::string::npos, vocab.err);
  BOOST_TEST(cli({"generate", "--model", model, "--tokens", tokens_file(t, "[[1], []]"), "--max-new-tokens", "2"}).code == 1);
}

BOOST_AUTO_TEST_SUITE_END()

