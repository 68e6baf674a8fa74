// A run's step checkpoints on disk (orchestration/records/checkpoint_directory.h): a committed
// checkpoint is listed with its manifest and files; a partial one never is, and the next begin
// removes it; a step directory without a valid manifest, or whose files do not match it, is
// skipped with a sentence naming it; a commit over an existing step replaces it whole; removal
// takes the manifest first; a commit that cannot be written names the path and leaves the
// previous checkpoint listed; the listing is ascending and ignores other names.
#include "orchestration/records/checkpoint_directory.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "support/limited_child.h"
#include "support/temp_dir.h"

namespace fs = std::filesystem;
namespace tr = tandem::records;
using tandem::test::temp_dir;
using json = nlohmann::json;
using strings = std::vector<std::string>;

namespace {

/// The error's message of `r`, or "" when it holds a value (a check's message is formed either way).
template <class R>
std::string why(const R& r) {
  return r ? std::string() : r.error().message;
}

/// Writes `text` to `p`, making its parents.
void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

std::string text_of(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Begins step `step` in `dir`, writes `files` (relative path, contents) and commits it with
/// `manifest`; returns the committed path.
fs::path save(const fs::path& dir, std::int64_t step, const std::vector<std::pair<std::string, std::string>>& files,
              json manifest = json::object()) {
  auto partial = tr::begin_checkpoint(dir, step);
  BOOST_TEST_REQUIRE(bool(partial), why(partial));
  for (const auto& [rel, text] : files) put(*partial / rel, text);
  auto done = tr::commit_checkpoint(*partial, step, std::move(manifest));
  BOOST_TEST_REQUIRE(bool(done), why(done));
  return *done;
}

std::vector<std::int64_t> steps_of(const tr::checkpoint_listing& listing) {
  std::vector<std::int64_t> out;
  for (const auto& c : listing.complete) out.push_back(c.step);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(checkpoint_directory_test)

BOOST_AUTO_TEST_CASE(a_committed_checkpoint_is_listed_with_its_manifest_and_files) {
  const temp_dir tmp;
  const fs::path dir = tmp.path() / "checkpoints";
  const fs::path done = save(dir, 3,
                             {{"rank_1/optimizer/state.bin", "optimizer"},
                              {"rank_0/model.safetensors", "weights!"},
                              {"controller.json", "{}"}},
                             json{{"consumed_samples", 96}, {"dataloader", {{"epoch", 1}}}});
  BOOST_TEST(done == dir / "step_3");
  BOOST_TEST(tr::checkpoint_name(3) == "step_3");
  BOOST_TEST(!fs::exists(dir / "step_3.partial"));
  BOOST_TEST(!fs::exists(dir / "step_3" / "manifest.json.tmp"));

  const auto listing = tr::list_checkpoints(dir);
  BOOST_TEST(listing.skipped.empty(), (listing.skipped.empty() ? "" : listing.skipped.front()));
  BOOST_TEST_REQUIRE(listing.complete.size() == 1u);
  const auto& c = listing.complete.front();
  BOOST_TEST(c.step == 3);
  BOOST_TEST(c.path == dir / "step_3");
  BOOST_TEST(c.manifest["format"] == "tandem-checkpoint");
  BOOST_TEST(c.manifest["format_version"] == 1);
  BOOST_TEST(c.manifest["step"] == 3);
  BOOST_TEST(c.manifest["consumed_samples"] == 96);
  BOOST_TEST(c.manifest["dataloader"]["epoch"] == 1);
  const json files = json::array({{{"path", "controller.json"}, {"bytes", 2}},
                                  {{"path", "rank_0/model.safetensors"}, {"bytes", 8}},
                                  {{"path", "rank_1/optimizer/state.bin"}, {"bytes", 9}}});
  BOOST_TEST(c.manifest["files"] == files, c.manifest["files"].dump());
  BOOST_TEST(json::parse(text_of(dir / "step_3" / "manifest.json")) == c.manifest);
  BOOST_TEST(text_of(dir / "step_3" / "rank_1" / "optimizer" / "state.bin") == "optimizer");
}

BOOST_AUTO_TEST_CASE(a_partial_directory_is_never_listed_and_the_next_begin_removes_it) {
  const temp_dir tmp;
  const fs::path dir = tmp.path() / "checkpoints";
  auto partial = tr::begin_checkpoint(dir, 6);
  BOOST_TEST_REQUIRE(bool(partial), why(partial));
  BOOST_TEST(*partial == dir / "step_6.partial");
  BOOST_TEST(fs::is_directory(*partial));
  BOOST_TEST(fs::is_empty(*partial));
  put(*partial / "rank_0" / "model.safetensors", "half of it");
  // Even a partial holding a manifest that would be valid is not a checkpoint.
  save(dir, 5, {{"a.bin", "a"}});
  fs::copy_file(dir / "step_5" / "manifest.json", *partial / "manifest.json");

  auto listing = tr::list_checkpoints(dir);
  BOOST_TEST(steps_of(listing) == (std::vector<std::int64_t>{5}), boost::test_tools::per_element());
  BOOST_TEST(listing.skipped == (strings{(dir / "step_6.partial").string() + ": an unfinished save"}),
             boost::test_tools::per_element());

  auto again = tr::begin_checkpoint(dir, 6);
  BOOST_TEST_REQUIRE(bool(again), why(again));
  BOOST_TEST(*again == *partial);
  BOOST_TEST(fs::is_empty(*again));
  BOOST_TEST(fs::is_directory(dir / "step_5"));  // begin touches only its own partial
}

BOOST_AUTO_TEST_CASE(a_step_directory_without_a_valid_manifest_or_with_files_not_as_listed_is_skipped_with_a_sentence_naming_it) {
  const temp_dir tmp;
  const fs::path dir = tmp.path() / "checkpoints";
  save(dir, 2, {{"rank_0/model.bin", "good"}});
  fs::create_directories(dir / "step_4" / "rank_0");  // no manifest
  put(dir / "step_4" / "rank_0" / "model.bin", "data");
  fs::rename(save(dir, 7, {{"rank_0/model.bin", "data"}}), dir / "step_5");  // its manifest names step 7
  save(dir, 6, {{"rank_0/model.bin", "data"}, {"rank_1/model.bin", "data"}});
  fs::remove(dir / "step_6" / "rank_1" / "model.bin");  // a listed file missing
  save(dir, 8, {{"rank_0/model.bin", "data"}});
  put(dir / "step_8" / "rank_0" / "model.bin", "changed");  // a listed file of another size
  save(dir, 9, {{"rank_0/model.bin", "data"}});
  put(dir / "step_9" / "manifest.json", "{\"format\": \"tandem-chec");  // corrupt
  save(dir, 11, {{"rank_0/model.bin", "data"}});
  put(dir / "step_11" / "manifest.json", "[1, 2]");  // not an object
  save(dir, 12, {{"rank_0/model.bin", "data"}});
  put(dir / "step_12" / "manifest.json", R"({"format": "other", "format_version": 1, "step": 12, "files": []})");
  save(dir, 13, {{"rank_0/model.bin", "data"}});
  put(dir / "step_13" / "manifest.json",
      R"({"format": "tandem-checkpoint", "format_version": 1, "step": 13, "files": [{"path": "../step_2/rank_0/model.bin", "bytes": 4}]})");
  put(dir / "step_14", "a file, not a directory");

  const auto listing = tr::list_checkpoints(dir);
  BOOST_TEST(steps_of(listing) == (std::vector<std::int64_t>{2}), boost::test_tools::per_element());
  const std::string d = dir.string() + "/";
  const strings expected{
      d + "step_4: no manifest.json (an unfinished save)",
      d + "step_5: manifest.json names step 7, not 5",
      d + "step_6: rank_1/model.bin is missing",
      d + "step_8: rank_0/model.bin holds 7 bytes, the manifest says 4",
      d + "step_9: manifest.json is not valid JSON",
      d + "step_11: manifest.json is not a JSON object",
      d + "step_12: manifest.json is not a tandem-checkpoint manifest of version 1",
      d + "step_13: manifest.json lists ../step_2/rank_0/model.bin, outside the checkpoint",
      d + "step_14: not a directory",
  };
  BOOST_TEST(listing.skipped == expected, boost::test_tools::per_element());
  // The listing changes nothing.
  BOOST_TEST(fs::is_directory(dir / "step_4"));
  BOOST_TEST(text_of(dir / "step_9" / "manifest.json") == "{\"format\": \"tandem-chec");
}

BOOST_AUTO_TEST_CASE(committing_a_step_that_already_exists_replaces_it_whole) {
  const temp_dir tmp;
  const fs::path dir = tmp.path() / "checkpoints";
  save(dir, 2, {{"rank_0/old.bin", "old"}, {"stale.json", "{}"}}, json{{"round", 1}});
  save(dir, 2, {{"rank_0/new.bin", "newer"}}, json{{"round", 2}});

  const auto listing = tr::list_checkpoints(dir);
  BOOST_TEST(listing.skipped.empty());
  BOOST_TEST_REQUIRE(listing.complete.size() == 1u);
  const auto& c = listing.complete.front();
  BOOST_TEST(c.manifest["round"] == 2);
  BOOST_TEST(c.manifest["files"] == json::array({{{"path", "rank_0/new.bin"}, {"bytes", 5}}}));
  BOOST_TEST(!fs::exists(dir / "step_2" / "rank_0" / "old.bin"));
  BOOST_TEST(!fs::exists(dir / "step_2" / "stale.json"));
  BOOST_TEST(!fs::exists(dir / "step_2.partial"));  // the replaced one is gone too
  BOOST_TEST(text_of(dir / "step_2" / "rank_0" / "new.bin") == "newer");
}

BOOST_AUTO_TEST_CASE(remove_checkpoint_takes_the_manifest_first_and_leaves_nothing) {
  const temp_dir tmp;
  const fs::path dir = tmp.path() / "checkpoints";
  save(dir, 1, {{"rank_0/model.bin", "one"}});
  save(dir, 2, {{"rank_0/model.bin", "two"}, {"rank_0/locked/part.bin", "two"}});
  save(dir, 3, {{"rank_0/model.bin", "three"}});

  BOOST_TEST(!tr::remove_checkpoint(dir, 1));
  BOOST_TEST(!fs::exists(dir / "step_1"));
  BOOST_TEST(!tr::remove_checkpoint(dir, 1));   // already gone
  BOOST_TEST(!tr::remove_checkpoint(dir, 99));  // never there
  BOOST_TEST(!tr::remove_checkpoint(tmp.path() / "no_such_dir", 1));

  // A removal cut short after the manifest is gone leaves a directory the listing skips.
  if (::geteuid() != 0) {
    const fs::path locked = dir / "step_2" / "rank_0" / "locked";
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    auto e = tr::remove_checkpoint(dir, 2);
    fs::permissions(locked, fs::perms::owner_all);
    BOOST_TEST_REQUIRE(e.has_value());
    BOOST_TEST(std::string(tr::to_string(e->code)) == "cannot_write");
    BOOST_TEST(e->message.starts_with("cannot remove " + (dir / "step_2").string() + ": "), e->message);
    BOOST_TEST(!fs::exists(dir / "step_2" / "manifest.json"));
  } else {  // root removes a read-only directory's entries: take the manifest away by hand
    fs::remove(dir / "step_2" / "manifest.json");
  }
  auto listing = tr::list_checkpoints(dir);
  BOOST_TEST(steps_of(listing) == (std::vector<std::int64_t>{3}), boost::test_tools::per_element());
  BOOST_TEST(listing.skipped == (strings{(dir / "step_2").string() + ": no manifest.json (an unfinished save)"}),
             boost::test_tools::per_element());

  BOOST_TEST(!tr::remove_checkpoint(dir, 2));  // finishing it
  BOOST_TEST(!tr::remove_checkpoint(dir, 3));
  BOOST_TEST(fs::is_empty(dir));
  listing = tr::list_checkpoints(dir);
  BOOST_TEST(listing.complete.empty());
  BOOST_TEST(listing.skipped.empty());
}

BOOST_AUTO_TEST_CASE(a_commit_that_cannot_be_written_names_the_path_and_leaves_the_previous_checkpoint_listed) {
  const temp_dir tmp;
  const fs::path dir = tmp.path() / "checkpoints";
  save(dir, 1, {{"rank_0/model.bin", "first"}}, json{{"round", 1}});
  const auto still_first = [&] {
    const auto listing = tr::list_checkpoints(dir);
    BOOST_TEST_REQUIRE(listing.complete.size() == 1u);
    BOOST_TEST(listing.complete.front().manifest["round"] == 1);
    BOOST_TEST(text_of(dir / "step_1" / "rank_0" / "model.bin") == "first");
  };

  if (::geteuid() != 0) {  // a partial directory that cannot be written
    auto partial = tr::begin_checkpoint(dir, 1);
    BOOST_TEST_REQUIRE(bool(partial), why(partial));
    put(*partial / "rank_0" / "model.bin", "second");
    fs::permissions(*partial, fs::perms::owner_read | fs::perms::owner_exec);
    auto r = tr::commit_checkpoint(*partial, 1, json{{"round", 2}});
    fs::permissions(*partial, fs::perms::owner_all);
    BOOST_TEST_REQUIRE(!r);
    BOOST_TEST(std::string(tr::to_string(r.error().code)) == "cannot_create");
    BOOST_TEST(r.error().message == "cannot create " + (*partial / "manifest.json.tmp").string() + ": Permission denied");
    still_first();
  } else {  // root ignores modes: a partial path whose parent is a regular file
    put(tmp.path() / "plain_file", "x");
    const fs::path partial = tmp.path() / "plain_file" / "step_1.partial";
    auto r = tr::commit_checkpoint(partial, 1, json{{"round", 2}});
    BOOST_TEST_REQUIRE(!r);
    BOOST_TEST(std::string(tr::to_string(r.error().code)) == "cannot_write");
    BOOST_TEST(r.error().message == "cannot list " + partial.string() + ": Not a directory");
    auto b = tr::begin_checkpoint(tmp.path() / "plain_file" / "checkpoints", 1);
    BOOST_TEST_REQUIRE(!b);
    BOOST_TEST(std::string(tr::to_string(b.error().code)) == "cannot_create_directory");
    BOOST_TEST(b.error().message.starts_with("cannot create " + (tmp.path() / "plain_file" / "checkpoints").string() + ": "),
               b.error().message);
    still_first();
  }

  // The manifest cannot be written (a file size limit, which holds for root too).
  auto partial = tr::begin_checkpoint(dir, 1);
  BOOST_TEST_REQUIRE(bool(partial), why(partial));
  put(*partial / "rank_0" / "model.bin", "second");
  const auto child = tandem::test::run_limited(RLIMIT_FSIZE, 16, [&] {
    auto r = tr::commit_checkpoint(*partial, 1, json{{"round", 2}});
    return r ? std::string("committed") : r.error().message;
  });
  BOOST_TEST_REQUIRE(child.exited_cleanly, child.report);
  BOOST_TEST(child.report == "cannot write " + (*partial / "manifest.json").string() + ": File too large");
  still_first();

  // The manifest's name taken by a directory: the write fails after every file is synced.
  fs::create_directories(*partial / "manifest.json" / "inside");
  auto r = tr::commit_checkpoint(*partial, 1, json{{"round", 2}});
  BOOST_TEST_REQUIRE(!r);
  BOOST_TEST(std::string(tr::to_string(r.error().code)) == "cannot_write");
  BOOST_TEST(r.error().message.starts_with("cannot write " + (*partial / "manifest.json").string() + ": "), r.error().message);
  still_first();
  const auto listing = tr::list_checkpoints(dir);
  BOOST_TEST(listing.skipped == (strings{(dir / "step_1.partial").string() + ": an unfinished save"}),
             boost::test_tools::per_element());

  // The next begin clears the failed attempt, and the commit then goes through.
  save(dir, 1, {{"rank_0/model.bin", "second"}}, json{{"round", 2}});
  BOOST_TEST(tr::list_checkpoints(dir).complete.front().manifest["round"] == 2);
}

BOOST_AUTO_TEST_CASE(a_commit_of_a_misnamed_directory_or_a_manifest_that_is_not_an_object_is_refused) {
  const temp_dir tmp;
  const fs::path dir = tmp.path() / "checkpoints";
  auto partial = tr::begin_checkpoint(dir, 4);
  BOOST_TEST_REQUIRE(bool(partial), why(partial));
  auto r = tr::commit_checkpoint(*partial, 5, json::object());
  BOOST_TEST_REQUIRE(!r);
  BOOST_TEST(r.error().message == "cannot commit " + partial->string() + " as step 5: it is not named step_5.partial");
  r = tr::commit_checkpoint(*partial, 4, json::array());
  BOOST_TEST_REQUIRE(!r);
  BOOST_TEST(r.error().message == "cannot write " + (*partial / "manifest.json").string() + ": the manifest is not a JSON object");
  BOOST_TEST(!fs::exists(dir / "step_4"));
  BOOST_TEST(!tr::begin_checkpoint(dir, -1));
  // A trailing separator on the partial path is fine.
  r = tr::commit_checkpoint(partial->string() + "/", 4, json::object());
  BOOST_TEST_REQUIRE(bool(r), why(r));
  BOOST_TEST(*r == dir / "step_4");
}

BOOST_AUTO_TEST_CASE(the_listing_is_ascending_by_step_and_ignores_unrelated_entries) {
  const temp_dir tmp;
  const fs::path dir = tmp.path() / "checkpoints";
  BOOST_TEST(tr::list_checkpoints(dir).complete.empty());  // no directory yet: nothing, silently
  BOOST_TEST(tr::list_checkpoints(dir).skipped.empty());
  for (std::int64_t step : {10, 2, 33, 0}) save(dir, step, {{"model.bin", std::to_string(step)}});
  put(dir / "notes.txt", "x");
  put(dir / "step_3.tmp", "x");
  put(dir / "step_", "x");
  fs::create_directories(dir / "step_x");
  fs::create_directories(dir / "step_07");  // not how step 7 is named
  fs::create_directories(dir / "best");
  fs::create_symlink("step_33", dir / "latest");

  const auto listing = tr::list_checkpoints(dir);
  BOOST_TEST(steps_of(listing) == (std::vector<std::int64_t>{0, 2, 10, 33}), boost::test_tools::per_element());
  BOOST_TEST(listing.skipped.empty(), (listing.skipped.empty() ? "" : listing.skipped.front()));
  for (const auto& c : listing.complete) BOOST_TEST(c.path == dir / tr::checkpoint_name(c.step));
}

BOOST_AUTO_TEST_SUITE_END()
