// "Worker" names two roles only: the policy worker and the rollout worker actors. The process that
// hosts them on one device is a member of the run (`tandem join`, actors/member/), so a log line, a
// flag or a type about processes never reads like one about a role. This test holds the
// process-level sources (the member process, the controller, the supervisor, the bridge, the
// runtime settings, the join command and the launchers) to that, and the source tree's file names
// too.
#include <boost/test/unit_test.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

/// Where "worker" may stand: after a role (policy, rollout), the environment's scoring pool
/// (environment, scoring), the recipe key env.num_workers, or as a field of a role's struct
/// (t.worker: the rollout worker that generated a trajectory).
bool names_a_role(const std::string& text, std::size_t at) {
  static const std::vector<std::string> before = {"policy_", "policy ",  "policy-",  "rollout_",  "rollout ",
                                                  "rollout-", "environment_", "environment ", "scoring ", "num_", "."};
  for (const auto& b : before)
    if (at >= b.size() && text.compare(at - b.size(), b.size(), b) == 0) return true;
  return false;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// "file:line: text" for every "worker" in `text` that does not name a role.
std::vector<std::string> process_workers(const std::string& file, const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const std::string l = lower(line);
    for (std::size_t at = l.find("worker"); at != std::string::npos; at = l.find("worker", at + 1))
      if (!names_a_role(l, at)) {
        out.push_back(file + ":" + std::to_string(number) + ": " + line);
        break;
      }
  }
  return out;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The process-level sources, relative to the source root.
std::vector<fs::path> process_level_files(const fs::path& root) {
  std::vector<fs::path> out;
  for (const char* dir : {"actors/member", "actors/controller", "actors/supervisor", "actors/bridge", "actors/runtime",
                          "tools/launch"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir))
      if (e.is_regular_file()) out.push_back(e.path().lexically_relative(root));
  for (const char* file : {"tools/cli/join_command.cpp", "tools/cli/run_command.cpp", "tools/cli/run_preparation.cpp",
                           "tools/cli/run_output.cpp"})
    out.emplace_back(file);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(process_names_test)

BOOST_AUTO_TEST_CASE(the_scan_tells_a_role_from_a_process) {
  BOOST_TEST(process_workers("x.cpp", "spawn_rollout_worker(sys); // the policy worker and rollout-worker\n").empty());
  BOOST_TEST(process_workers("x.cpp", "ec.workers = recipe.env.num_workers; // environment worker 2\n").empty());
  const std::vector<std::string> expected = {"x.cpp:2: log_line(\"tandem worker 3: joined\");",
                                             "x.cpp:3: struct worker_options {"};
  BOOST_TEST(process_workers("x.cpp", "// ok\nlog_line(\"tandem worker 3: joined\");\nstruct worker_options {\n") == expected,
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(process_level_sources_call_the_process_a_member_and_keep_worker_for_the_roles) {
  const fs::path root = TANDEM_SOURCE_DIR;
  const auto files = process_level_files(root);
  BOOST_TEST(files.size() > 20u);  // the scan saw the process layer
  for (const auto& f : files)
    for (const auto& hit : process_workers(f.generic_string(), slurp(root / f))) BOOST_ERROR(hit);
}

BOOST_AUTO_TEST_CASE(only_the_role_sources_have_worker_in_their_file_names) {
  const fs::path root = TANDEM_SOURCE_DIR;
  const fs::path build = fs::weakly_canonical(TANDEM_BINARY_DIR);
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path& p = it->path();
    // Hidden folders and build trees (this test's own, and any other configured in the checkout).
    if (it->is_directory() && (p.filename().string().starts_with(".") || fs::weakly_canonical(p) == build ||
                               fs::exists(p / "CMakeCache.txt"))) {
      it.disable_recursion_pending();
      continue;
    }
    const std::string rel = p.lexically_relative(root).generic_string();
    const std::string name = lower(p.filename().string());
    const auto at = name.find("worker");
    if (at != std::string::npos && !names_a_role(name, at)) BOOST_ERROR(rel + ": a file name that says worker for something other than a role");
  }
}

BOOST_AUTO_TEST_SUITE_END()
