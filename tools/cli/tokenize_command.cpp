// `tandem tokenize --model DIR [--special] | --decode [--skip-special]`: stdin's text as a JSON
// list of token ids, or a JSON list of ids on stdin as text, with the tokenizer.json of DIR
// (a checkpoint directory, or the file itself).
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "orchestration/tokenizer/tokenizer.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"

namespace tandem::cli {
namespace {

namespace fs = std::filesystem;

/// The tokenizer.json of `model`: the file itself, or DIR/tokenizer.json.
std::optional<fs::path> tokenizer_file(const std::string& model, std::ostream& err) {
  const fs::path p(model);
  std::error_code ec;
  if (fs::is_regular_file(p, ec)) return p;
  if (!fs::is_directory(p, ec)) {
    err << "tandem tokenize: --model " << model << ": no such directory or file\n";
    return std::nullopt;
  }
  if (fs::is_regular_file(p / "tokenizer.json", ec)) return p / "tokenizer.json";
  if (fs::is_regular_file(p / "tokenizer.model", ec))
    err << "tandem tokenize: " << model << " has only tokenizer.model (SentencePiece), which tandem does not read yet; "
        << "a tokenizer.json is needed\n";
  else
    err << "tandem tokenize: " << model << " has no tokenizer.json\n";
  return std::nullopt;
}

}  // namespace

int tokenize_command(const args& a, std::istream& in, std::ostream& out, std::ostream& err) {
  const parsed_options p = parse_options(a, {"--model"}, {"--decode", "--special", "--skip-special"});
  if (!p.problem.empty()) {
    err << "tandem tokenize: " << p.problem << "\n";
    return exit_usage;
  }
  if (!p.values.count("--model")) {
    err << "tandem tokenize: missing --model (see `tandem help tokenize`)\n";
    return exit_usage;
  }
  const bool decode = p.flags.count("--decode") > 0;
  if (decode && p.flags.count("--special")) {
    err << "tandem tokenize: --special adds tokens when encoding; with --decode, --skip-special leaves them out\n";
    return exit_usage;
  }
  if (!decode && p.flags.count("--skip-special")) {
    err << "tandem tokenize: --skip-special applies to --decode\n";
    return exit_usage;
  }
  const auto file = tokenizer_file(p.values.at("--model"), err);
  if (!file) return exit_refused;
  const auto t = tokenizer::tokenizer::load(*file);
  if (!t) {
    err << "tandem tokenize: " << t.error().message << "\n";
    return exit_refused;
  }
  const std::string input((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (!decode) {
    const auto ids = t->encode(input, p.flags.count("--special") > 0);
    if (!ids) {
      err << "tandem tokenize: stdin: " << ids.error().message << "\n";
      return exit_refused;
    }
    out << nlohmann::json(ids.value()).dump() << "\n";
    return exit_ok;
  }
  std::vector<std::int32_t> ids;
  try {
    const auto j = nlohmann::json::parse(input);
    if (!j.is_array()) throw std::invalid_argument("expected a JSON list of ids");
    for (std::size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_number_integer() || j[i].get<std::int64_t>() < INT32_MIN || j[i].get<std::int64_t>() > INT32_MAX)
        throw std::invalid_argument("item " + std::to_string(i) + " is not a 32-bit integer id: " + j[i].dump());
      ids.push_back(j[i].get<std::int32_t>());
    }
  } catch (const std::exception& e) {
    err << "tandem tokenize --decode: stdin: " << e.what() << "\n";
    return exit_refused;
  }
  const auto text = t->decode(ids, p.flags.count("--skip-special") > 0);
  if (!text) {
    err << "tandem tokenize --decode: stdin: " << text.error().message << "\n";
    return exit_refused;
  }
  out << text.value();
  return exit_ok;
}

}  // namespace tandem::cli
