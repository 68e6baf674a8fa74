// The external environment: rewards computed by a process the recipe names (env.external.command,
// run as `/bin/sh -c COMMAND`), so users write them in any language. The protocol is JSON lines on
// the process's stdin and stdout, one request and one answer per trajectory:
//
//   tandem -> process  {"id": 17, "prompt_index": 4, "sample_index": 1, "record": 913,
//                       "prompt_tokens": [2, 105, ...], "response_tokens": [...], "finish": "stop",
//                       "answer": "42"}
//   (record: the prompt's index in its prompt set, a dataset's record order; answer: the record's
//   reference answer, left out when the task has none)
//   process -> tandem  {"reward": 1.0}     (optionally "done": false and "next_observation": [ids])
//
// Each scoring worker has its own process, started on first use and restarted after a failure. A
// process that does not answer within the timeout, answers something other than such an object,
// a reward that is not a finite number, or exits, fails the trajectory's scoring with an error
// naming the command, the trajectory and its prompt (tools/external_reward_example.py is a model).
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "actors/environment/scoring.hpp"

namespace tandem {

struct external_environment_settings {
  std::string command;                            ///< for /bin/sh -c
  std::chrono::milliseconds timeout{60'000};      ///< per answer
  std::size_t processes = 1;                      ///< at most this many at once (the scoring workers)
};

/// A scoring function over a pool of `settings.processes` processes (shared by the copies the
/// scoring workers hold; each call takes a free one).
scoring_function external_scoring(external_environment_settings settings);

}  // namespace tandem
