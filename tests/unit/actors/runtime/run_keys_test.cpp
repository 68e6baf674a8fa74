// A run's keys: made fresh, rendered and parsed back, handed to one member with only its own
// secret, written with mode 0600 never over an existing file, and refused (naming the file and
// line) when damaged, incomplete or readable by others.
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "actors/runtime/run_keys.hpp"
#include "support/temp_dir.h"

using tandem::run_keys;

namespace {

std::string message_of(const tandem::gpu::result<run_keys>& r) { return r ? std::string("ok") : r.error().message(); }

}  // namespace

BOOST_AUTO_TEST_SUITE(run_keys_test)

BOOST_AUTO_TEST_CASE(fresh_keys_render_and_parse_back_and_every_key_is_distinct) {
  const run_keys k = tandem::make_run_keys(3).value();
  BOOST_TEST(k.world == 3);
  BOOST_TEST_REQUIRE(k.members.size() == 3u);
  BOOST_TEST(k.members[0].public_key != k.members[1].public_key);
  BOOST_TEST(k.controller.public_key != k.members[2].public_key);
  const auto back = tandem::parse_run_keys(tandem::render_run_keys(k), "keys");
  BOOST_TEST_REQUIRE(back.has_value(), message_of(back));
  BOOST_TEST((*back == k));
}

BOOST_AUTO_TEST_CASE(a_members_credentials_hold_every_public_key_and_only_its_own_secret) {
  const run_keys k = tandem::make_run_keys(3).value();
  const run_keys c = tandem::credentials_for(k, 1);
  BOOST_TEST(c.controller.public_key == k.controller.public_key);
  BOOST_TEST(c.controller.secret_key.empty());
  BOOST_TEST(c.members[1].secret_key == k.members[1].secret_key);
  BOOST_TEST(c.members[0].secret_key.empty());
  BOOST_TEST(c.members[2].secret_key.empty());
  BOOST_TEST(c.members[2].public_key == k.members[2].public_key);
  BOOST_TEST(tandem::check_run_keys_for(c, 3, 1, "fd").is_ok());
  BOOST_TEST(tandem::check_run_keys_for(c, 3, 0, "fd").message() == "fd: member 0's secret key is missing");
  BOOST_TEST(tandem::check_run_keys_for(c, 3, -1, "fd").message() == "fd: the controller's secret key is missing");
  BOOST_TEST(tandem::check_run_keys_for(c, 4, 1, "fd").message() ==
             "fd: the keys are for a run of 3 members; this run has 4");
}

BOOST_AUTO_TEST_CASE(a_damaged_or_incomplete_keys_file_is_refused_naming_the_line) {
  const run_keys k = tandem::make_run_keys(2).value();
  const std::string good = tandem::render_run_keys(k);
  const auto refused = [](const std::string& text) { return message_of(tandem::parse_run_keys(text, "run.keys")); };
  // Another key's secret beside a public key.
  std::string swapped = good;
  swapped.replace(swapped.find(k.members[0].secret_key), 40, k.members[1].secret_key);
  BOOST_TEST(refused(swapped) == "run.keys:6: the secret key does not belong to the public key beside it");
  std::string shortened = good;
  shortened.erase(shortened.find(k.members[1].public_key), 1);
  BOOST_TEST(refused(shortened).starts_with("run.keys:7: "), refused(shortened));
  const std::size_t records = good.find("\ncontroller ") + 1;
  BOOST_TEST(refused("tandem-keys 1\nworld 2\n" + good.substr(records, good.find("\nmember 1 ") + 1 - records)) ==
             "run.keys: no key of member 1");
  BOOST_TEST(refused("hello\n") == "run.keys:1: not a tandem keys file (the first record must be 'tandem-keys 1')");
  BOOST_TEST(refused("tandem-keys 2\n") == "run.keys:1: keys file version '2' is not 1");
  BOOST_TEST(refused("tandem-keys 1\nworld 2\nmember 2 x\n") == "run.keys:3: a member rank in 0..1 must follow 'member'");
  BOOST_TEST(refused("") == "run.keys: empty: not a tandem keys file");
}

BOOST_AUTO_TEST_CASE(a_keys_file_is_written_0600_never_over_another_and_refused_when_others_can_read_it) {
  tandem::test::temp_dir dir;
  const std::string path = (dir.path() / "run.keys").string();
  const run_keys k = tandem::make_run_keys(2).value();
  BOOST_TEST_REQUIRE(tandem::write_run_keys_file(path, k).is_ok());
  struct stat st{};
  BOOST_TEST_REQUIRE(::stat(path.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0600u);
  const auto read = tandem::read_run_keys_file(path);
  BOOST_TEST_REQUIRE(read.has_value(), message_of(read));
  BOOST_TEST((*read == k));
  // Never replaced, and nothing else is left in the folder.
  const run_keys other = tandem::make_run_keys(2).value();
  BOOST_TEST(tandem::write_run_keys_file(path, other).message() ==
             path + ": exists already: run keys are never overwritten (remove it first, or use another name)");
  BOOST_TEST((*tandem::read_run_keys_file(path) == k));
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  BOOST_TEST(files == 1u);
  ::chmod(path.c_str(), 0640);
  BOOST_TEST(message_of(tandem::read_run_keys_file(path)) ==
             path + ": the run's keys are readable or writable by others (mode 0640): anyone who reads them can join the run; "
                    "chmod 600 " + path);
  BOOST_TEST(message_of(tandem::read_run_keys_file(path + ".missing")).starts_with(path + ".missing: cannot open the run's keys"));
}

BOOST_AUTO_TEST_SUITE_END()
