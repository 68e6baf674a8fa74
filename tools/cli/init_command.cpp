// `tandem init --config FILE --out DIR [--seed N] [--tokenizer DIR]`: a new checkpoint directory
// with random weights for a Gemma 4 config.json, as a model starts before any training (Gemma 4's
// initialisation, gpu/model/initial_weights.h: every matrix and embedding drawn from
// N(0, initializer_range^2), every norm scale, layer_scalar and router scale 1, a pure function of
// the config and the seed, so any machine writes the same bytes). The directory gets the config.json as given,
// a generation_config.json (the one beside the config, else its bos/eos/pad ids), the tokenizer
// files of --tokenizer DIR (tokenizer.json, tokenizer_config.json, special_tokens_map.json), and
// model.safetensors in float32. It is written under a temporary name and renamed into place, so
// a failed init leaves nothing behind; an existing DIR is refused.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include <nlohmann/json.hpp>

#include "gpu/model/config.h"
#include "gpu/model/json_text.h"
#include "gpu/model/initial_weights.h"
#include "gpu/model/layout.h"
#include "gpu/model/safetensors_writer.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;

bool write_text(const fs::path& p, const std::string& text, std::string& problem) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  f.close();
  if (!f) problem = "cannot write " + p.string();
  return static_cast<bool>(f);
}

}  // namespace

int init_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_options p = parse_options(a, {"--config", "--out", "--seed", "--tokenizer"}, {});
  if (!p.problem.empty()) {
    err << "tandem init: " << p.problem << "\n";
    return exit_usage;
  }
  if (!p.values.count("--config") || !p.values.count("--out")) {
    err << "tandem init: needs --config FILE and --out DIR (see `tandem help init`)\n";
    return exit_usage;
  }
  std::uint64_t seed = 1;
  if (p.values.count("--seed")) {
    const std::string& s = p.values.at("--seed");
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || errno != 0 || s[0] == '-') {
      err << "tandem init: --seed " << s << ": not a non-negative integer\n";
      return exit_usage;
    }
    seed = v;
  }
  fs::path config_path = p.values.at("--config");
  std::error_code ec;
  if (fs::is_directory(config_path, ec)) config_path /= "config.json";
  const fs::path out_dir = p.values.at("--out");
  if (fs::exists(out_dir, ec)) {
    err << "tandem init: --out " << out_dir.string() << ": already exists (init writes a new directory)\n";
    return exit_refused;
  }
  auto text = gpu::read_text_file(config_path);
  if (!text) {
    err << "tandem init: " << text.error().message() << "\n";
    return exit_refused;
  }
  auto config = gpu::parse_model_config(*text, config_path.string());
  if (!config) {
    err << "tandem init: " << config.error().message() << "\n";
    return exit_refused;
  }
  const auto range = gpu::initializer_range(*text, config_path.string());
  if (!range) {
    err << "tandem init: " << range.error().message() << "\n";
    return exit_refused;
  }
  const double std_dev = *range;
  std::vector<fs::path> tokenizer_files;
  if (p.values.count("--tokenizer")) {
    const fs::path t = p.values.at("--tokenizer");
    for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"})
      if (fs::is_regular_file(t / name, ec)) tokenizer_files.push_back(t / name);
    if (tokenizer_files.empty() || tokenizer_files.front().filename() != "tokenizer.json") {
      err << "tandem init: --tokenizer " << t.string() << ": no tokenizer.json there\n";
      return exit_refused;
    }
  }

  const fs::path tmp = out_dir.string() + ".init-tmp";
  fs::remove_all(tmp, ec);
  std::string problem;
  auto done = [&]() -> bool {
    if (!fs::create_directories(tmp, ec)) {
      problem = "cannot create " + tmp.string() + ": " + ec.message();
      return false;
    }
    if (!write_text(tmp / "config.json", *text, problem)) return false;
    const fs::path generation = config_path.parent_path() / "generation_config.json";
    if (fs::is_regular_file(generation, ec)) {
      fs::copy_file(generation, tmp / "generation_config.json", ec);
      if (ec) {
        problem = "cannot copy " + generation.string() + ": " + ec.message();
        return false;
      }
    } else {
      nlohmann::json g = {{"eos_token_id", config->eos_token_ids}};
      if (config->bos_token_id) g["bos_token_id"] = *config->bos_token_id;
      if (config->pad_token_id) g["pad_token_id"] = *config->pad_token_id;
      if (!write_text(tmp / "generation_config.json", g.dump(2) + "\n", problem)) return false;
    }
    for (const auto& f : tokenizer_files) {
      fs::copy_file(f, tmp / f.filename(), ec);
      if (ec) {
        problem = "cannot copy " + f.string() + ": " + ec.message();
        return false;
      }
    }
    const gpu::model_layout layout = gpu::build_layout(*config, gpu::dtype::float32);
    std::vector<gpu::st_write_item> items;
    for (std::size_t k = 0; k < layout.tensors.size(); ++k) {
      const auto& e = layout.tensors[k];
      gpu::st_write_item item;
      item.name = gpu::hf_full_name(*config, e);
      item.type = gpu::st_dtype::f32;
      item.shape = e.shape;
      item.fill = [&e, k, seed, std_dev](std::int64_t byte_offset, std::span<std::byte> bytes) {
        std::vector<float> values(bytes.size() / 4);
        gpu::initial_values(e, k, seed, std_dev, byte_offset / 4, values);
        std::memcpy(bytes.data(), values.data(), values.size() * 4);
        return gpu::status::ok();
      };
      items.push_back(std::move(item));
    }
    if (auto s = gpu::write_st_file(tmp / "model.safetensors", items, {{"format", "pt"}}); !s) {
      problem = s.message();
      return false;
    }
    if (auto s = gpu::sync_path(tmp); !s) {
      problem = s.message();
      return false;
    }
    fs::rename(tmp, out_dir, ec);
    if (ec) {
      problem = "cannot rename " + tmp.string() + " to " + out_dir.string() + ": " + ec.message();
      return false;
    }
    return true;
  }();
  if (!done) {
    fs::remove_all(tmp, ec);
    err << "tandem init: " << problem << "\n";
    return exit_refused;
  }
  std::int64_t parameters = 0;
  for (const auto& e : gpu::build_layout(*config, gpu::dtype::float32).tensors) parameters += e.elements();
  out << "wrote " << out_dir.string() << ": " << parameters << " parameters (seed " << seed << ", std " << std_dev << ")"
      << (tokenizer_files.empty() ? "" : ", with the tokenizer of " + p.values.at("--tokenizer")) << "\n";
  return exit_ok;
}

}  // namespace tandem::cli
