// libFuzzer target over the control-plane codec (orchestration/control/codec.hpp). Any byte
// sequence must decode to a message or to an error, never crash or allocate wildly; a frame that
// decodes must re-encode to exactly its own bytes (the encoding is canonical), and decoding that
// again must give an equal message. Built and run by run_fuzz.sh codec.
//
// With TANDEM_CODEC_FUZZ_SEEDS=<folder> set, the binary instead writes one valid frame of every
// message kind into <folder> (the seed corpus) and exits.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <span>
#include <string>
#include <vector>

#include "orchestration/control/codec.hpp"

namespace tc = tandem::control;

namespace {

[[noreturn]] void fail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "codec_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

/// A non-trivial message of kind `k`, so mutations start inside every kind's structure.
tc::message seed(tc::message_kind k) {
  using K = tc::message_kind;
  const std::vector<tc::manifest_entry> entries = {{"model.embed_tokens.weight", {256, 64}, tandem::plain::dtype::bfloat16},
                                                    {"norm.weight", {64}, tandem::plain::dtype::float32}};
  switch (k) {
    case K::hello: return tc::hello{3, 8, 12345, "node-1", "cuda:3", tc::protocol_version, {true, false}};
    case K::welcome: return tc::welcome{{true, true}, 0, 2, 1, 2, "policy:\n  model_name: tiny\n", "run-1", 500, 10000};
    case K::heartbeat: return tc::heartbeat{-1, 42};
    case K::data_endpoint: return tc::data_endpoint{2, "tcp://127.0.0.1:41234", "tcp://127.0.0.1:41235", {std::byte{1}, std::byte{2}}};
    case K::peer_table: return tc::peer_table{{{0, "tcp://127.0.0.1:1", "tcp://127.0.0.1:3"}, {1, "tcp://127.0.0.1:2", ""}}, {1, 0}, {0}, {}};
    case K::manifest: return tc::manifest{0, entries};
    case K::manifest_check: return tc::manifest_check{1 << 20, entries};
    case K::manifest_result: return tc::manifest_result{1, false, "entry 1: dtype", 0, 0, 0};
    case K::generate_request:
      return tc::generate_request{{2, {{7, {2, 3, 4}, {0.7, 50, 0.9}, {1, 3, 1, 0, 0, 0}, 64, {1}},
                                       {8, {2}, {0.7, 50, 0.9}, {1, 3, 1, 1, 2, 0}, 64, {1}}}}};
    case K::generate_result:
      return tc::generate_result{2, {{7, {5, 1}, {-0.5f, -0.25f}, tc::finish_reason::stop_token, 2}}};
    case K::logprob_request:
      return tc::logprob_request{3, {1, 2, {{2, 3, 4, 5}, {0, 2, 4}}, {1, 1}, {-0.5f, -1.5f}, {2, 2}, {1.0, 0, 1.0}, false}};
    case K::logprob_result: return tc::logprob_result{3, {"policy-0", 2, {0, 1}, 4}};
    case K::train_request:
      return tc::train_request{3, {1, 2, {0.5, -0.5}, {1, 1}, {{1, {1, 1}}, {1, {1, 1}}}, 64, {1.0, 0, 1.0}}};
    case K::train_result: {
      tc::train_result r{3, {}};
      r.report.worker = "policy-0";
      r.report.version = 4;
      r.report.micro_batches = 2;
      r.report.loss = 0.25;
      r.report.optimizer.grad_norm = 1.5;
      r.report.weights_digest = 0x1234;
      return r;
    }
    case K::refit_begin: return tc::refit_begin{4, 3, 1 << 20, tc::refit_transport::broadcast, 0, true};
    case K::refit_ack: return tc::refit_ack{1, 4, tc::refit_stage::staged, false, "bucket 2: checksum mismatch", 4, 3};
    case K::refit_commit: return tc::refit_commit{4};
    case K::refit_abort: return tc::refit_abort{4};
    case K::error: return tc::error{7, "member 2 missed heartbeats", 2, 13};
    case K::shutdown: return tc::shutdown{"done"};
    case K::goodbye: return tc::goodbye{1, "shutdown"};
    case K::save_request: return tc::save_request{9, {4, "/runs/r/final_weights"}};
    case K::save_result: return tc::save_result{9, {"policy-0", 4, "/runs/r/final_weights", 77}};
    case K::load_request: return tc::load_request{10, {4, "/runs/r/checkpoints/step_4/weights"}};
    case K::load_result: return tc::load_result{10, {"policy-1", 4, 77}};
  }
  fail("no seed for kind", std::to_string(static_cast<int>(k)));
}

void write_seeds(const std::string& folder) {
  for (std::uint16_t code = 1; code <= tc::kind_count; ++code) {
    const auto k = static_cast<tc::message_kind>(code);
    const auto f = tc::encode(seed(k));
    if (!f.ok()) fail("seed does not encode", f.error().text);
    std::ofstream out(folder + "/" + std::string(tc::to_string(k)), std::ios::binary);
    out.write(reinterpret_cast<const char*>(f.value().data()), static_cast<std::streamsize>(f.value().size()));
    if (!out) fail("cannot write a seed into", folder);
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* folder = std::getenv("TANDEM_CODEC_FUZZ_SEEDS")) {
    write_seeds(folder);
    std::exit(0);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto bytes = std::as_bytes(std::span<const std::uint8_t>(data, size));
  const auto decoded = tc::decode(bytes);
  if (!decoded.ok()) {
    const tc::codec_error& e = decoded.error();
    if (e.text.empty()) fail("an error without text", "");
    if (e.offset > size) fail("an error offset beyond the frame", e.text);
    return 0;
  }
  const auto again = tc::encode(decoded.value());
  if (!again.ok()) fail("a decoded message does not re-encode", again.error().text);
  const tc::frame& f = again.value();
  if (f.size() != size || !std::equal(f.begin(), f.end(), bytes.begin())) {
    fail("re-encoding changed the bytes of a", std::string(tc::to_string(tc::kind_of(decoded.value()))));
  }
  const auto redecoded = tc::decode(std::span<const std::byte>(f.data(), f.size()));
  if (!redecoded.ok()) fail("a re-encoded frame does not decode", redecoded.error().text);
  // Messages holding a NaN never compare equal; identical bytes (checked above) cover them.
  if (!(redecoded.value() == decoded.value())) {
    const auto third = tc::encode(redecoded.value());
    if (!third.ok() || third.value() != f) {
      fail("decode(encode(m)) differs from m, a", std::string(tc::to_string(tc::kind_of(decoded.value()))));
    }
  }
  return 0;
}
