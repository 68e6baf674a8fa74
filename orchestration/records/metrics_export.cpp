// Reading metrics.jsonl into series (nested keys flattened with '/') and writing NeMo-RL's JSON.
#include "orchestration/records/metrics_export.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <nlohmann/json.hpp>

#include "orchestration/records/file_error.h"

namespace tandem::records {
namespace {

using json = nlohmann::json;

const char* kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::null: return "null";
    default: return "a number";
  }
}

/// nlohmann's message without its "[json.exception.parse_error.101] " prefix.
std::string parse_message(const char* what) {
  std::string s(what);
  if (s.starts_with("[json.exception.")) {
    const auto end = s.find("] ");
    if (end != std::string::npos) s = s.substr(end + 2);
  }
  return s;
}

/// Adds the numbers under `v` as series named `prefix`/key... (`v` the record itself when `top`);
/// returns the first name seen twice in this record (empty when none).
std::string flatten(const json& v, bool top, const std::string& prefix, std::map<std::string, double>& out) {
  if (v.is_object()) {
    for (const auto& [key, child] : v.items()) {
      if (top && key == "step") continue;
      if (auto twice = flatten(child, false, top ? key : prefix + "/" + key, out); !twice.empty()) return twice;
    }
    return {};
  }
  if (!v.is_number()) return {};  // booleans, strings, arrays, null: not a series
  if (!out.emplace(prefix, v.get<double>()).second) return prefix;
  return {};
}

std::optional<std::int64_t> step_of(const json& record) {
  const auto it = record.find("step");
  if (it == record.end()) return std::nullopt;
  if (it->is_number_unsigned() && it->get<std::uint64_t>() <= INT64_MAX)
    return static_cast<std::int64_t>(it->get<std::uint64_t>());
  if (it->is_number_integer() && it->get<std::int64_t>() >= 0) return it->get<std::int64_t>();
  return std::nullopt;
}

bool blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

}  // namespace

const char* to_string(metrics_errc code) {
  switch (code) {
    case metrics_errc::cannot_read: return "cannot_read";
    case metrics_errc::malformed_record: return "malformed_record";
    case metrics_errc::duplicate_step: return "duplicate_step";
    case metrics_errc::duplicate_metric: return "duplicate_metric";
    case metrics_errc::bad_expression: return "bad_expression";
    case metrics_errc::missing_metric: return "missing_metric";
    case metrics_errc::missing_step: return "missing_step";
  }
  return "unknown";
}

std::filesystem::path metrics_file_of(const std::filesystem::path& run_dir_or_file) {
  std::error_code ec;
  if (std::filesystem::is_directory(run_dir_or_file, ec)) return run_dir_or_file / "metrics.jsonl";
  return run_dir_or_file;
}

metrics_result<metric_table> parse_metrics(std::string_view text, const std::string& file) {
  metric_table table;
  std::map<std::int64_t, std::size_t> line_of_step;
  std::size_t line_number = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (blank(line)) continue;
    const std::string where = file + ":" + std::to_string(line_number) + ": ";
    const auto malformed = [&](const std::string& what) {
      return metrics_error{metrics_errc::malformed_record, where + what};
    };
    json record;
    try {
      record = json::parse(line);
    } catch (const json::parse_error& e) {
      return malformed("not JSON: " + parse_message(e.what()));
    }
    if (!record.is_object()) return malformed(std::string("a record is a JSON object, not ") + kind_of(record));
    const auto step = step_of(record);
    if (!step) {
      if (!record.contains("step")) return malformed("no \"step\" (a whole number >= 0)");
      return malformed("\"step\" is " + record["step"].dump() + ", not a whole number >= 0");
    }
    if (const auto [it, fresh] = line_of_step.emplace(*step, line_number); !fresh)
      return metrics_error{metrics_errc::duplicate_step, where + "step " + std::to_string(*step) +
                                                             " again (first at line " + std::to_string(it->second) +
                                                             "; two runs in one file?)"};
    std::map<std::string, double> values;
    if (auto twice = flatten(record, true, "", values); !twice.empty())
      return metrics_error{metrics_errc::duplicate_metric,
                           where + "metric '" + twice + "' twice in one record (a key with '/' and a nested one?)"};
    for (const auto& [name, value] : values) table[name][*step] = value;
  }
  return table;
}

metrics_result<metric_table> read_metrics(const std::filesystem::path& path) {
  const auto cannot_read = [&](int reason) {
    return metrics_error{metrics_errc::cannot_read, "cannot read " + path.string() + ": " + os_reason(reason)};
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return cannot_read(EISDIR);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return cannot_read(errno);
  std::string text;
  char buffer[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n > 0) {
      text.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno != EINTR) {
      const int reason = errno;
      ::close(fd);
      return cannot_read(reason);
    }
  }
  ::close(fd);
  return parse_metrics(text, path.string());
}

std::string nemo_rl_json(const metric_table& table, int indent) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [name, series] : table) {
    nlohmann::ordered_json steps = nlohmann::ordered_json::object();
    for (const auto& [step, value] : series) steps[std::to_string(step)] = value;
    out[name] = std::move(steps);
  }
  return out.dump(indent);
}

std::map<std::int64_t, std::vector<std::pair<std::string, double>>> values_by_step(const metric_table& table) {
  std::map<std::int64_t, std::vector<std::pair<std::string, double>>> steps;
  for (const auto& [name, series] : table)
    for (const auto& [step, value] : series) steps[step].emplace_back(name, value);
  return steps;
}

std::string metric_names(const metric_table& table, std::size_t limit) {
  std::string s;
  std::size_t n = 0;
  for (const auto& [name, series] : table) {
    if (n++ == limit) {
      s += ", ... (" + std::to_string(table.size() - limit) + " more)";
      break;
    }
    s += (s.empty() ? "" : ", ") + name;
  }
  return s.empty() ? "none" : s;
}

}  // namespace tandem::records
