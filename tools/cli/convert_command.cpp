// `tandem convert --model DIR --out DIR [--dtype T] [--max-shard-size SIZE] [--replace]`: loads the
// text stack through tandem's loader and saves it with tandem's writer: another dtype or shard
// size, the wrappers' non-text tensors and side files carried through.
#include "gpu/model/checkpoint.h"
#include "gpu/model/checkpoint_writer.h"
#include "tools/cli/arguments.h"
#include "tools/cli/commands.h"
#include "tools/cli/model_resolution.h"

namespace tandem::cli {

int convert_command(const args& a, std::ostream& out, std::ostream& err) {
  const parsed_options p = parse_options(a, {"--model", "--out", "--dtype", "--max-shard-size"}, {"--replace"});
  if (!p.problem.empty()) {
    err << "tandem convert: " << p.problem << "\n";
    return exit_usage;
  }
  for (const char* required : {"--model", "--out"}) {
    if (!p.values.count(required)) {
      err << "tandem convert: missing " << required << " (see `tandem help convert`)\n";
      return exit_usage;
    }
  }
  gpu::save_options options;
  options.replace = p.flags.count("--replace") > 0;
  if (auto d = p.values.find("--dtype"); d != p.values.end()) {
    const auto t = gpu::parse_dtype(d->second);
    if (!t || !(*t == gpu::dtype::bfloat16 || *t == gpu::dtype::float32 || *t == gpu::dtype::float16)) {
      err << "tandem convert: --dtype '" << d->second << "': expected bfloat16, float32 or float16\n";
      return exit_usage;
    }
    options.type = *t;
  }
  if (auto s = p.values.find("--max-shard-size"); s != p.values.end()) {
    const auto bytes = parse_byte_size(s->second);
    if (!bytes) {
      err << "tandem convert: --max-shard-size '" << s->second << "': expected a size such as 5GB, 500MB or 1073741824\n";
      return exit_usage;
    }
    options.max_shard_bytes = *bytes;
  }
  // The slab holds the output dtype: one rounding from the file's dtype, as a float32 detour
  // would give, in half the memory for bfloat16.
  auto c = open_model_option("convert", p.values.at("--model"), options.type, err);
  if (!c) return exit_refused;
  auto weights = gpu::load_checkpoint(*c, gpu::device::cpu());
  if (!weights) {
    err << "tandem convert: " << weights.error().message() << "\n";
    return exit_refused;
  }
  out << "loaded " << c->report.text_tensors << " text tensors (" << gpu::format_bytes(c->report.text_bytes) << ") from "
      << c->directory.string() << "\n";
  if (!c->report.skipped.empty()) out << c->report.skipped_line() << "\n";
  auto saved = gpu::save_checkpoint(*c, *weights, p.values.at("--out"), options);
  if (!saved) {
    err << "tandem convert: " << saved.error().message() << "\n";
    return exit_refused;
  }
  out << "saved " << saved->text_tensors << " text tensors in " << gpu::to_string(options.type) << " and "
      << saved->carried_tensors << " carried byte for byte, " << gpu::format_bytes(saved->bytes) << " in "
      << saved->shards.size() << (saved->shards.size() == 1 ? " file" : " shards") << ", with " << saved->copied.size()
      << " side files, to " << saved->directory.string() << "\n";
  return exit_ok;
}

}  // namespace tandem::cli
