// What a policy rank is asked to save and what it answers: one definition for the policy
// workers' messages and the control plane (orchestration/control/messages.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "plain/fields.h"

namespace tandem::plain {

/// Save the rank's weights (and optimizer state) into `directory`, through the train engine's
/// save(): for the Gemma 4 engines a Hugging Face checkpoint directory, written beside it and
/// renamed into place, replacing what is there.
struct save_job {
  static constexpr const char* type_name = "save_job";
  std::uint64_t version = 0;  ///< the weights to save; refused (stale_version) unless current
  std::string directory;      ///< absolute, on a filesystem the rank can write
  bool operator==(const save_job&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, save_job& x) {
    return f(named("version", x.version), named("directory", x.directory));
  }
};

struct save_report {
  static constexpr const char* type_name = "save_report";
  std::string worker;         ///< the policy rank that saved
  std::uint64_t version = 0;  ///< the version saved
  std::string directory;      ///< where it is, complete
  bool operator==(const save_report&) const = default;

  template <class F>
  static decltype(auto) fields(F&& f, save_report& x) {
    return f(named("worker", x.worker), named("version", x.version), named("directory", x.directory));
  }
};

}  // namespace tandem::plain
