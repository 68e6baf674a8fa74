// The module graph of DESIGN.md §2 as include rules, checked over the whole source tree: gpu/ and
// orchestration/ are independent leaves, actors/ do not reach into tools/, CAF stays out of .cu
// files, and no include climbs with "../". Include roots already stop most wrong edges at compile
// time; this scan also catches system headers (CUDA, CAF, ZeroMQ, yaml-cpp) no include path hides.
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

/// An include the rules refuse: file relative to the scanned root ('/'-separated), 1-based line.
struct violation {
  std::string file;
  int line = 0;
  std::string include;  ///< as written: <caf/all.hpp> or "gpu/model/config.h"
  std::string reason;

  std::string to_string() const { return file + ":" + std::to_string(line) + ": #include " + include + ": " + reason; }
};

/// Files under `folder` ("" for every file) may not include headers matching `pattern` (a name,
/// or a prefix ending in '*'), except headers matching `allowed` (the same form) in files under
/// `allowed_under` (a path prefix: a folder, or one file).
struct include_rule {
  std::string folder;
  std::string pattern;
  std::string reason;
  std::string allowed_under = {};
  std::string allowed = {};
};

/// The fake engines stay behind the engine factory (the RL loop knows no fakes); the parity task they
/// train on (gpu/engine/parity_task.h) is no fake: any module may include it. `tandem bench refit`
/// times the transport and the stream protocol, whatever the bytes mean: it refits the fake
/// engines' weights, as the tests do.
const char* const fake_engines_rule =
    "only the engine factory (actors/runtime/engine_factory.cpp), the refit benchmark (tools/cli/refit_bench.cpp), the "
    "fake engines and tests include gpu/engine/fake/";

const std::vector<include_rule>& rules() {
  static const std::vector<include_rule> r = {
      {"gpu/", "orchestration/*", "gpu/ may not include orchestration/"},
      {"gpu/", "actors/*", "gpu/ may not include actors/"},
      {"gpu/", "tools/*", "gpu/ may not include tools/"},
      {"gpu/", "caf/*", "gpu/ may not include CAF"},
      {"gpu/", "zmq.h", "gpu/ may not include ZeroMQ"},
      {"gpu/", "zmq.hpp", "gpu/ may include ZeroMQ only as <zmq.hpp> under gpu/comm/ (the CPU data plane)",
       "gpu/comm/", "zmq.hpp"},
      {"gpu/", "yaml-cpp/*", "gpu/ may not include yaml-cpp"},
      {"orchestration/", "gpu/*", "orchestration/ may not include gpu/"},
      {"orchestration/", "actors/*", "orchestration/ may not include actors/"},
      {"orchestration/", "tools/*", "orchestration/ may not include tools/"},
      {"orchestration/", "caf/*", "orchestration/ may not include CAF"},
      {"orchestration/", "cuda*", "orchestration/ may not include CUDA"},
      {"orchestration/", "cublas*", "orchestration/ may not include cuBLAS"},
      {"orchestration/", "nccl.h", "orchestration/ may not include NCCL"},
      {"orchestration/", "zmq*", "orchestration/ may include ZeroMQ only as <zmq.hpp> under orchestration/control/",
       "orchestration/control/", "zmq.hpp"},
      {"plain/", "gpu/*", "plain/ is a leaf: it may include only the standard library"},
      {"plain/", "orchestration/*", "plain/ is a leaf: it may include only the standard library"},
      {"plain/", "actors/*", "plain/ is a leaf: it may include only the standard library"},
      {"plain/", "tools/*", "plain/ is a leaf: it may include only the standard library"},
      {"plain/", "caf/*", "plain/ is a leaf: it may include only the standard library"},
      {"plain/", "zmq*", "plain/ is a leaf: it may include only the standard library"},
      {"plain/", "cuda*", "plain/ is a leaf: it may include only the standard library"},
      {"actors/", "tools/*", "actors/ may not include tools/"},
      {"gpu/", "gpu/engine/fake/*", fake_engines_rule, "gpu/engine/fake/", "gpu/engine/fake/*"},
      {"actors/", "gpu/engine/fake/*", fake_engines_rule, "actors/runtime/engine_factory.cpp", "gpu/engine/fake/*"},
      {"tools/", "gpu/engine/fake/*", fake_engines_rule, "tools/cli/refit_bench.cpp", "gpu/engine/fake/*"},
      {"", "../*", "relative includes are forbidden; include from the module root"},
  };
  return r;
}

bool matches(const std::string& header, const std::string& pattern) {
  if (pattern.ends_with('*')) return header.starts_with(pattern.substr(0, pattern.size() - 1));
  return header == pattern;
}

bool is_source(const fs::path& p) {
  static const std::set<std::string> ext = {".h", ".hpp", ".hh", ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".inl", ".ipp"};
  return ext.count(p.extension().string()) > 0;
}

/// The rules `text` (the contents of `file`, relative to the root) breaks, in line order.
std::vector<violation> scan_text(const std::string& file, const std::string& text) {
  std::vector<violation> out;
  const bool cuda_file = file.ends_with(".cu") || file.ends_with(".cuh");
  std::istringstream in(text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    std::size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] != '#') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0) continue;
    i = line.find_first_not_of(" \t", i + 7);
    if (i == std::string::npos || (line[i] != '<' && line[i] != '"')) continue;
    const std::size_t end = line.find(line[i] == '<' ? '>' : '"', i + 1);
    if (end == std::string::npos) continue;
    const std::string header = line.substr(i + 1, end - i - 1);
    const std::string written = line.substr(i, end - i + 1);
    for (const auto& r : rules()) {
      if (!file.starts_with(r.folder) || !matches(header, r.pattern)) continue;
      if (!r.allowed_under.empty() && file.starts_with(r.allowed_under) && matches(header, r.allowed)) continue;
      out.push_back({file, number, written, r.reason});
    }
    if (cuda_file && matches(header, "caf/*")) out.push_back({file, number, written, "CAF stays out of .cu files"});
  }
  return out;
}

struct scan_result {
  std::vector<violation> violations;
  std::size_t files = 0;
};

/// Every source file under `root`, skipping hidden folders and the build folder.
scan_result scan_tree(const fs::path& root) {
  scan_result out;
  const fs::path build = fs::weakly_canonical(TANDEM_BINARY_DIR);
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path& p = it->path();
    if (it->is_directory() && (p.filename().string().starts_with(".") || fs::weakly_canonical(p) == build)) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file() || !is_source(p)) continue;
    std::ifstream in(p);
    std::stringstream text;
    text << in.rdbuf();
    auto found = scan_text(p.lexically_relative(root).generic_string(), text.str());
    out.violations.insert(out.violations.end(), found.begin(), found.end());
    ++out.files;
  }
  return out;
}

std::vector<std::string> texts(const std::vector<violation>& v) {
  std::vector<std::string> out;
  for (const auto& x : v) out.push_back(x.to_string());
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(layering_test)

BOOST_AUTO_TEST_CASE(no_source_file_includes_across_a_forbidden_module_edge) {
  const scan_result r = scan_tree(TANDEM_SOURCE_DIR);
  BOOST_TEST(r.files > 20u);  // the scan saw the tree
  for (const auto& v : r.violations) BOOST_ERROR(v.to_string());
}

BOOST_AUTO_TEST_CASE(the_scanner_reports_each_forbidden_include_with_file_line_and_rule) {
  const std::string gpu_file =
      "// a kernel\n#include \"gpu/core/dtype.h\"\n#include <caf/all.hpp>\n  #  include \"orchestration/config/recipe.h\"\n"
      "// #include <zmq.h>\n#include <yaml-cpp/yaml.h>\n#include <zmq.hpp>\n";
  const std::vector<std::string> expected = {
      "gpu/ops/cuda/fake.cu:3: #include <caf/all.hpp>: gpu/ may not include CAF",
      "gpu/ops/cuda/fake.cu:3: #include <caf/all.hpp>: CAF stays out of .cu files",
      "gpu/ops/cuda/fake.cu:4: #include \"orchestration/config/recipe.h\": gpu/ may not include orchestration/",
      "gpu/ops/cuda/fake.cu:6: #include <yaml-cpp/yaml.h>: gpu/ may not include yaml-cpp",
      "gpu/ops/cuda/fake.cu:7: #include <zmq.hpp>: gpu/ may include ZeroMQ only as <zmq.hpp> under gpu/comm/ (the CPU data plane)"};
  BOOST_TEST(texts(scan_text("gpu/ops/cuda/fake.cu", gpu_file)) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_cpu_data_plane_in_gpu_comm_may_use_zmq_hpp_but_not_zmq_h) {
  const std::string text = "#include <zmq.hpp>\n#include <zmq.h>\n";
  const std::vector<std::string> expected = {"gpu/comm/zmq_group.cpp:2: #include <zmq.h>: gpu/ may not include ZeroMQ"};
  BOOST_TEST(texts(scan_text("gpu/comm/zmq_group.cpp", text)) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(orchestration_may_use_zmq_hpp_only_under_control_and_never_cuda_or_caf) {
  const std::string text = "#include <zmq.hpp>\n#include <zmq.h>\n#include <cuda_runtime.h>\n#include <cublasLt.h>\n"
                           "#include <nccl.h>\n#include <caf/actor.hpp>\n#include \"gpu/model/config.h\"\n#include <yaml-cpp/yaml.h>\n";
  const std::vector<std::string> control = {
      "orchestration/control/codec.cpp:2: #include <zmq.h>: orchestration/ may include ZeroMQ only as <zmq.hpp> under "
      "orchestration/control/",
      "orchestration/control/codec.cpp:3: #include <cuda_runtime.h>: orchestration/ may not include CUDA",
      "orchestration/control/codec.cpp:4: #include <cublasLt.h>: orchestration/ may not include cuBLAS",
      "orchestration/control/codec.cpp:5: #include <nccl.h>: orchestration/ may not include NCCL",
      "orchestration/control/codec.cpp:6: #include <caf/actor.hpp>: orchestration/ may not include CAF",
      "orchestration/control/codec.cpp:7: #include \"gpu/model/config.h\": orchestration/ may not include gpu/"};
  BOOST_TEST(texts(scan_text("orchestration/control/codec.cpp", text)) == control, boost::test_tools::per_element());
  const auto config = scan_text("orchestration/config/render.cpp", text);
  BOOST_REQUIRE_EQUAL(config.size(), 7u);
  BOOST_TEST(config[0].to_string() ==
             "orchestration/config/render.cpp:1: #include <zmq.hpp>: orchestration/ may include ZeroMQ only as <zmq.hpp> "
             "under orchestration/control/");
}

BOOST_AUTO_TEST_CASE(plain_is_a_leaf_that_includes_only_the_standard_library_and_every_module_may_include_it) {
  BOOST_TEST(scan_text("plain/sampling.h", "#include <cstdint>\n#include \"plain/fields.h\"\n").empty());
  const std::vector<std::string> expected = {
      "plain/rng.h:1: #include \"gpu/core/dtype.h\": plain/ is a leaf: it may include only the standard library",
      "plain/rng.h:2: #include <caf/all.hpp>: plain/ is a leaf: it may include only the standard library"};
  BOOST_TEST(texts(scan_text("plain/rng.h", "#include \"gpu/core/dtype.h\"\n#include <caf/all.hpp>\n")) == expected,
             boost::test_tools::per_element());
  for (const char* file : {"gpu/ops/logprobs.h", "orchestration/control/messages.hpp", "actors/api/messages.hpp"})
    BOOST_TEST(scan_text(file, "#include \"plain/sampling.h\"\n").empty(), file);
}

BOOST_AUTO_TEST_CASE(actors_may_use_caf_but_not_tools_and_nobody_climbs_with_dot_dot) {
  BOOST_TEST(scan_text("actors/api/errors.hpp", "#include <caf/error.hpp>\n#include \"gpu/core/status.h\"\n").empty());
  const std::vector<std::string> expected = {"actors/driver.cpp:2: #include \"tools/cli/commands.h\": actors/ may not include tools/"};
  BOOST_TEST(texts(scan_text("actors/driver.cpp", "#include <caf/all.hpp>\n#include \"tools/cli/commands.h\"\n")) == expected,
             boost::test_tools::per_element());
  const std::vector<std::string> relative = {
      "tests/unit/x_test.cpp:1: #include \"../../gpu/core/dtype.h\": relative includes are forbidden; include from the "
      "module root"};
  BOOST_TEST(texts(scan_text("tests/unit/x_test.cpp", "#include \"../../gpu/core/dtype.h\"\n")) == relative,
             boost::test_tools::per_element());
  BOOST_TEST(scan_text("tools/cli/main.cpp", "#include <caf/all.hpp>\n#include <zmq.h>\n#include \"gpu/model/layout.h\"\n").empty());
  BOOST_TEST(scan_text("tests/actors/x_test.cpp", "#include <caf/test/dsl.hpp>\n").empty());
  BOOST_TEST(texts(scan_text("tests/gpu/x_test.cu", "#include <caf/all.hpp>\n")) ==
                 std::vector<std::string>{"tests/gpu/x_test.cu:1: #include <caf/all.hpp>: CAF stays out of .cu files"},
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(only_the_engine_factory_the_fake_engines_and_tests_include_the_fake_engines) {
  const std::string text = "#include \"gpu/engine/fake/fake_train_engine.h\"\n";
  BOOST_TEST(scan_text("actors/runtime/engine_factory.cpp", text).empty());
  BOOST_TEST(scan_text("gpu/engine/fake/fake_train_engine.cpp", text).empty());
  BOOST_TEST(scan_text("tests/unit/actors/runtime/engine_factory_test.cpp", text).empty());
  BOOST_TEST(scan_text("tools/cli/refit_bench.cpp", text).empty());
  const std::string reason =
      ": #include \"gpu/engine/fake/fake_train_engine.h\": only the engine factory (actors/runtime/engine_factory.cpp), the "
      "refit benchmark (tools/cli/refit_bench.cpp), the fake engines and tests include gpu/engine/fake/";
  for (const std::string file : {"actors/controller/rl_loop.cpp", "actors/runtime/engine_factory.hpp",
                                 "actors/runtime/recipe_settings.hpp", "gpu/engine/gemma4_train_engine.cpp",
                                 "tools/cli/run_command.cpp"})
    BOOST_TEST(texts(scan_text(file, text)) == std::vector<std::string>{file + ":1" + reason},
               boost::test_tools::per_element());
  BOOST_TEST(scan_text("actors/controller/rl_loop.cpp", "#include \"gpu/engine/parity_task.h\"\n").empty());
}

BOOST_AUTO_TEST_CASE(the_tree_scan_finds_a_forbidden_include_in_a_file_on_disk) {
  std::random_device rd;
  const fs::path root = fs::temp_directory_path() /
                        ("tandem_layering_test_" + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) +
                         "_" + std::to_string(rd()));
  fs::create_directories(root / "gpu" / "core");
  fs::create_directories(root / "orchestration" / "control");
  fs::create_directories(root / ".hidden");
  std::ofstream(root / "gpu" / "core" / "fake.cuh") << "#pragma once\n#include <caf/all.hpp>\n";
  std::ofstream(root / "orchestration" / "control" / "socket.cpp") << "#include <zmq.hpp>\n";
  std::ofstream(root / "gpu" / "core" / "notes.txt") << "#include <caf/all.hpp>\n";      // not a source file
  std::ofstream(root / ".hidden" / "skipped.cpp") << "#include \"../x.h\"\n";        // hidden folders are skipped
  const scan_result r = scan_tree(root);
  std::error_code ec;
  fs::remove_all(root, ec);
  BOOST_TEST(r.files == 2u);
  const std::vector<std::string> expected = {"gpu/core/fake.cuh:2: #include <caf/all.hpp>: gpu/ may not include CAF",
                                             "gpu/core/fake.cuh:2: #include <caf/all.hpp>: CAF stays out of .cu files"};
  BOOST_TEST(texts(r.violations) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
