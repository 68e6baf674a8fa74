// The check language of metric_check.h: a recursive-descent parser over one expression, and
// its evaluation over a run's series.
#include "orchestration/records/metric_check.h"

#include <algorithm>
#include <charconv>
#include <optional>
#include <vector>

namespace tandem::records {
namespace {

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool starts_name(char c) { return is_letter(c) || c == '_'; }
bool continues_name(char c) {
  return starts_name(c) || is_digit(c) || c == '/' || c == '.' || c == '-' || c == '@' || c == ':';
}

/// A metric name as a check writes it: bare when the grammar allows, else quoted.
std::string shown(const std::string& metric) {
  bool bare = !metric.empty() && starts_name(metric[0]);
  for (const char c : metric) bare = bare && continues_name(c);
  return bare ? metric : "\"" + metric + "\"";
}

using kind = check_operand::kind;

std::optional<kind> function_named(std::string_view name) {
  if (name == "mean") return kind::mean;
  if (name == "median") return kind::median;
  if (name == "min") return kind::min;
  if (name == "max") return kind::max;
  if (name == "ratio_above") return kind::ratio_above;
  return std::nullopt;
}

const char* function_name(kind k) {
  switch (k) {
    case kind::mean: return "mean";
    case kind::median: return "median";
    case kind::min: return "min";
    case kind::max: return "max";
    case kind::ratio_above: return "ratio_above";
    default: return "";
  }
}

class parser {
 public:
  explicit parser(std::string_view s) : s_(s) {}

  metrics_result<metric_check> check() {
    metric_check c;
    if (!operand(c.left)) return *error_;
    skip();
    if (!compare(c.compare)) return *error_;
    if (!operand(c.right)) return *error_;
    skip();
    if (i_ < s_.size()) return fail("the end of the check after '" + c.right.text + "'");
    c.text = c.left.text + " " + to_string(c.compare) + " " + c.right.text;
    return c;
  }

 private:
  void skip() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool at(char c) const { return i_ < s_.size() && s_[i_] == c; }

  metrics_error fail(const std::string& expected) {
    const std::string where = i_ < s_.size() ? "at column " + std::to_string(i_ + 1) : "at its end";
    error_ = metrics_error{metrics_errc::bad_expression, "'" + std::string(s_) + "' " + where + ": expected " + expected};
    return *error_;
  }

  bool expect(char c) {
    skip();
    if (at(c)) {
      ++i_;
      return true;
    }
    fail(std::string("'") + c + "'");
    return false;
  }

  /// number = [+-] digits [. digits] [e [+-] digits], with a digit before or after the point.
  std::optional<double> number(std::string& text) {
    const std::size_t start = i_;
    std::size_t j = i_;
    if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
    std::size_t digits = 0;
    while (j < s_.size() && is_digit(s_[j])) ++j, ++digits;
    if (j < s_.size() && s_[j] == '.') {
      ++j;
      while (j < s_.size() && is_digit(s_[j])) ++j, ++digits;
    }
    if (digits == 0) return std::nullopt;
    if (j < s_.size() && (s_[j] == 'e' || s_[j] == 'E')) {
      std::size_t k = j + 1;
      if (k < s_.size() && (s_[k] == '+' || s_[k] == '-')) ++k;
      if (k < s_.size() && is_digit(s_[k])) {
        while (k < s_.size() && is_digit(s_[k])) ++k;
        j = k;
      }
    }
    text = std::string(s_.substr(start, j - start));
    const std::string plain = text[0] == '+' ? text.substr(1) : text;
    double v = 0;
    const auto [end, ec] = std::from_chars(plain.data(), plain.data() + plain.size(), v);
    if (ec != std::errc() || end != plain.data() + plain.size()) return std::nullopt;  // out of range
    i_ = j;
    return v;
  }

  /// A bare name or a quoted one; nullopt (and `quoted` false) when there is none here.
  std::optional<std::string> metric(bool& quoted) {
    quoted = false;
    if (at('"')) {
      const std::size_t close = s_.find('"', i_ + 1);
      if (close == std::string_view::npos) {
        fail("a closing '\"'");
        return std::nullopt;
      }
      std::string name(s_.substr(i_ + 1, close - i_ - 1));
      if (name.empty()) {
        fail("a metric name between the quotes");
        return std::nullopt;
      }
      i_ = close + 1;
      quoted = true;
      return name;
    }
    if (i_ >= s_.size() || !starts_name(s_[i_])) return std::nullopt;
    const std::size_t start = i_;
    while (i_ < s_.size() && continues_name(s_[i_])) ++i_;
    return std::string(s_.substr(start, i_ - start));
  }

  bool operand(check_operand& o) {
    skip();
    if (i_ < s_.size() && (is_digit(s_[i_]) || s_[i_] == '.' || s_[i_] == '+' || s_[i_] == '-')) {
      const auto v = number(o.text);
      if (!v) {
        fail("a number");
        return false;
      }
      o.what = kind::number;
      o.number = *v;
      return true;
    }
    bool quoted = false;
    const std::size_t name_at = i_;
    auto name = metric(quoted);
    if (!name) {
      if (!error_) fail("a number, a metric with a step (train/reward[20]) or a function (mean, median, min, max, ratio_above)");
      return false;
    }
    skip();
    if (const auto f = function_named(*name); f && !quoted && at('(')) {
      ++i_;
      skip();
      bool inner_quoted = false;
      auto inner = metric(inner_quoted);
      if (!inner) {
        if (!error_) fail("a metric name");
        return false;
      }
      o.what = *f;
      o.metric = *inner;
      o.text = std::string(function_name(*f)) + "(" + shown(o.metric);
      if (*f == kind::ratio_above) {
        if (!expect(',')) return false;
        skip();
        std::string threshold;
        const auto v = number(threshold);
        if (!v) {
          fail("a number (the threshold)");
          return false;
        }
        o.number = *v;
        o.text += ", " + threshold;
      }
      if (!expect(')')) return false;
      o.text += ")";
      return true;
    }
    if (!at('[')) {
      i_ = name_at + (quoted ? name->size() + 2 : name->size());
      skip();
      if (function_named(*name) && !quoted)
        fail("'(' after " + *name);
      else
        fail("'[' and a step after the metric " + shown(*name) + " (" + shown(*name) + "[20], or mean(" + shown(*name) +
             "), median, min, max)");
      return false;
    }
    ++i_;
    skip();
    const std::size_t start = i_;
    while (i_ < s_.size() && is_digit(s_[i_])) ++i_;
    std::int64_t step = 0;
    const auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + i_, step);
    if (start == i_ || ec != std::errc() || step < 0) {
      i_ = start;
      fail("a step (a whole number >= 0)");
      return false;
    }
    if (!expect(']')) return false;
    o.what = kind::at_step;
    o.metric = *name;
    o.step = step;
    o.text = shown(o.metric) + "[" + std::to_string(step) + "]";
    return true;
  }

  bool compare(check_compare& c) {
    const auto two = s_.substr(i_, 2);
    if (two == "<=") c = check_compare::less_equal;
    else if (two == ">=") c = check_compare::greater_equal;
    else if (two == "==") c = check_compare::equal;
    else if (at('<')) c = check_compare::less;
    else if (at('>')) c = check_compare::greater;
    else {
      fail("a comparison: <, <=, >, >= or ==");
      return false;
    }
    i_ += (c == check_compare::less || c == check_compare::greater) ? 1 : 2;
    return true;
  }

  std::string_view s_;
  std::size_t i_ = 0;
  std::optional<metrics_error> error_;
};

}  // namespace

const char* to_string(check_compare c) {
  switch (c) {
    case check_compare::less: return "<";
    case check_compare::less_equal: return "<=";
    case check_compare::greater: return ">";
    case check_compare::greater_equal: return ">=";
    case check_compare::equal: return "==";
  }
  return "?";
}

metrics_result<metric_check> parse_check(std::string_view expression) { return parser(expression).check(); }

std::string format_number(double v) {
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, v);
  return ec == std::errc() ? std::string(buffer, end) : "?";
}

std::string check_outcome::values(const metric_check& c) const {
  std::string s;
  if (c.left.what != check_operand::kind::number) s = c.left.text + " = " + format_number(left);
  if (c.right.what != check_operand::kind::number)
    s += (s.empty() ? "" : ", ") + c.right.text + " = " + format_number(right);
  return s;
}

metrics_result<double> evaluate(const check_operand& o, const metric_table& table) {
  if (o.what == kind::number) return o.number;
  const auto it = table.find(o.metric);
  if (it == table.end())
    return metrics_error{metrics_errc::missing_metric, "no metric '" + o.metric + "' (metrics: " + metric_names(table) + ")"};
  const metric_series& series = it->second;  // never empty: a series exists through its values
  if (o.what == kind::at_step) {
    const auto v = series.find(o.step);
    if (v != series.end()) return v->second;
    const std::string count = std::to_string(series.size()) + (series.size() == 1 ? " step" : " steps");
    return metrics_error{metrics_errc::missing_step, "metric '" + o.metric + "' has no step " + std::to_string(o.step) +
                                                         " (it has " + count + ", from " +
                                                         std::to_string(series.begin()->first) + " to " +
                                                         std::to_string(series.rbegin()->first) + ")"};
  }
  std::vector<double> values;
  values.reserve(series.size());
  for (const auto& [step, v] : series) values.push_back(v);
  const double n = static_cast<double>(values.size());
  switch (o.what) {
    case kind::mean: {
      double sum = 0;
      for (const double v : values) sum += v;
      return sum / n;
    }
    case kind::median: {
      std::sort(values.begin(), values.end());
      const std::size_t mid = values.size() / 2;
      return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
    }
    case kind::min: return *std::min_element(values.begin(), values.end());
    case kind::max: return *std::max_element(values.begin(), values.end());
    case kind::ratio_above: {
      const auto above = std::count_if(values.begin(), values.end(), [&](double v) { return v >= o.number; });
      return static_cast<double>(above) / n;
    }
    default: return o.number;
  }
}

metrics_result<check_outcome> evaluate(const metric_check& c, const metric_table& table) {
  auto left = evaluate(c.left, table);
  if (!left) return left.error();
  auto right = evaluate(c.right, table);
  if (!right) return right.error();
  check_outcome out;
  out.left = *left;
  out.right = *right;
  switch (c.compare) {
    case check_compare::less: out.holds = out.left < out.right; break;
    case check_compare::less_equal: out.holds = out.left <= out.right; break;
    case check_compare::greater: out.holds = out.left > out.right; break;
    case check_compare::greater_equal: out.holds = out.left >= out.right; break;
    case check_compare::equal: out.holds = out.left == out.right; break;
  }
  return out;
}

}  // namespace tandem::records
