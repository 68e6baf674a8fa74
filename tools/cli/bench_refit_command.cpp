// `tandem bench refit [--model DIR | --mb N] [--dtype bf16|fp32] [--receivers R] [--bucket-mb M] [--rounds N]
//  [--checksums] [--receive staging|in_place] [--insecure] [--json FILE]`: the refit of a model's
// bytes over the CPU data plane and the refit stream protocol beside a plain broadcast of the same
// buckets over the same group, measured in the same run (refit_bench.h).
#include <cstdio>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"
#include "tools/cli/fixed_digits.h"
#include "tools/cli/refit_bench.h"

namespace tandem::cli {
namespace {

constexpr const char* usage =
    "usage: tandem bench refit [--model DIR | --mb N] [--dtype bf16|fp32] [--receivers R] [--bucket-mb M]\n"
    "                          [--rounds N] [--checksums] [--receive staging|in_place] [--insecure] [--json FILE]\n";

}  // namespace

int bench_refit_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_options p = parse_options(a, {"--model", "--mb", "--dtype", "--receivers", "--bucket-mb", "--rounds", "--receive", "--json"},
                                         {"--checksums", "--insecure"});
  if (!p.problem.empty()) {
    err << "tandem bench refit: " << p.problem << "\n" << usage;
    return exit_usage;
  }
  if (p.values.count("--model") == p.values.count("--mb")) {
    err << "tandem bench refit: give --model DIR or --mb N (the bytes refit), one of them\n" << usage;
    return exit_usage;
  }
  refit_bench_settings s;
  if (const auto it = p.values.find("--model"); it != p.values.end()) s.model = it->second;
  s.checksums = p.flags.count("--checksums") > 0;
  s.insecure = p.flags.count("--insecure") > 0;
  if (const auto it = p.values.find("--dtype"); it != p.values.end()) {
    if (it->second != "bf16" && it->second != "fp32") {
      err << "tandem bench refit: --dtype '" << it->second << "': expected bf16 or fp32\n" << usage;
      return exit_usage;
    }
    s.bytes_per_parameter = it->second == "bf16" ? 2 : 4;
  }
  if (const auto it = p.values.find("--receive"); it != p.values.end()) {
    if (it->second != "staging" && it->second != "in_place") {
      err << "tandem bench refit: --receive '" << it->second << "': expected staging or in_place\n" << usage;
      return exit_usage;
    }
    s.receive = it->second == "in_place" ? gpu::refit_receive::in_place : gpu::refit_receive::staging;
  }
  const struct {
    const char* name;
    long long min, max;
    std::function<void(long long)> set;
  } counts[] = {{"--mb", 1, 1 << 20, [&](long long v) { s.bytes = v << 20; }},
                {"--receivers", 1, 64, [&](long long v) { s.receivers = static_cast<int>(v); }},
                {"--bucket-mb", 1, 65536, [&](long long v) { s.bucket_bytes = v << 20; }},
                {"--rounds", 1, 1000, [&](long long v) { s.rounds = static_cast<int>(v); }}};
  for (const auto& c : counts) {
    const auto it = p.values.find(c.name);
    if (it == p.values.end()) continue;
    const auto v = parse_integer(it->second);
    if (!v || *v < c.min || *v > c.max) {
      err << "tandem bench refit: " << c.name << " '" << it->second << "': expected a whole number from " << c.min << " to " << c.max
          << "\n";
      return exit_usage;
    }
    c.set(*v);
  }
  const auto f = run_refit_bench(s);
  if (!f) {
    err << "tandem bench refit: " << f.error().message() << "\n";
    return exit_refused;
  }
  const double gb = static_cast<double>(f->bytes) / 1e9;
  out << "tandem bench refit: " << (s.model ? s.model->string() + " (" + std::to_string(s.bytes_per_parameter) + " bytes a parameter)"
                                            : std::to_string(s.bytes >> 20) + " MiB")
      << ": " << f->bytes << " bytes in " << f->buckets << " buckets of up to " << (s.bucket_bytes >> 20) << " MiB, from a policy root to "
      << s.receivers << " rollout worker" << (s.receivers > 1 ? "s" : "") << " over the CPU data plane (ZeroMQ on loopback, "
      << (s.insecure ? "CurveZMQ off" : "CurveZMQ") << "), checksums " << (s.checksums ? "on" : "off") << ", received "
      << (s.receive == gpu::refit_receive::in_place ? "in place" : "into a staging copy") << "; the fastest of " << s.rounds << " rounds\n"
      << "  broadcast of the same buckets over the same group (the ceiling): " << fixed(f->broadcast_seconds * 1e3, 1) << " ms, "
      << fixed(gb / f->broadcast_seconds, 2) << " GB/s\n"
      << "  refit (stream, staged and committed on every rollout worker): " << fixed(f->refit_seconds * 1e3, 1) << " ms, "
      << fixed(gb / f->refit_seconds, 2) << " GB/s, " << fixed(100.0 * f->broadcast_seconds / f->refit_seconds, 1)
      << "% of the broadcast\n"
      << "  every rollout worker's weights hash as the policy's: " << (f->bits_delivered ? "yes" : "NO") << "\n";
  if (const auto it = p.values.find("--json"); it != p.values.end()) {
    nlohmann::json j = {{"bytes", f->bytes},
                        {"buckets", f->buckets},
                        {"receivers", s.receivers},
                        {"checksums", s.checksums},
                        {"receive", gpu::to_string(s.receive)},
                        {"curve", !s.insecure},
                        {"broadcast_seconds", f->broadcast_seconds},
                        {"refit_seconds", f->refit_seconds},
                        {"bits_delivered", f->bits_delivered}};
    std::ofstream file(it->second);
    file << j.dump(2) << "\n";
    if (!file) {
      err << "tandem bench refit: cannot write " << it->second << "\n";
      return exit_refused;
    }
  }
  return f->bits_delivered ? exit_ok : exit_refused;
}

}  // namespace tandem::cli
