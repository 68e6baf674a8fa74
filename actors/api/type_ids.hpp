// tandem's CAF type-ID block: every atom and message struct of the actor interfaces, and the one
// function that registers them with an actor-system configuration. Atom texts are at most 10
// characters (CAF 0.17). A missing registration fails only at run time, so the actor tests build
// their configuration through add_tandem_types() too.
#pragma once

#include <caf/actor_system_config.hpp>
#include <caf/atom.hpp>
#include <caf/type_id.hpp>

#include "actors/api/messages.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(tandem, caf::first_custom_type_id)

  // policy worker
  CAF_ADD_ATOM(tandem, tandem, logprobs_atom, "logprobs")
  CAF_ADD_ATOM(tandem, tandem, train_atom, "train")
  CAF_ADD_ATOM(tandem, tandem, manifest_atom, "manifest")
  CAF_ADD_ATOM(tandem, tandem, stream_atom, "stream")  // policy root and rollout workers: a streamed refit
  CAF_ADD_ATOM(tandem, tandem, save_atom, "save")
  CAF_ADD_ATOM(tandem, tandem, load_atom, "load")
  // rollout worker
  CAF_ADD_ATOM(tandem, tandem, generate_atom, "generate")
  CAF_ADD_ATOM(tandem, tandem, check_atom, "check")
  CAF_ADD_ATOM(tandem, tandem, commit_atom, "commit")
  CAF_ADD_ATOM(tandem, tandem, abort_atom, "abort")
  CAF_ADD_ATOM(tandem, tandem, bump_atom, "bump")
  CAF_ADD_ATOM(tandem, tandem, version_atom, "version")
  // refit coordinator
  CAF_ADD_ATOM(tandem, tandem, handshake_atom, "handshake")
  CAF_ADD_ATOM(tandem, tandem, refit_atom, "refit")
  CAF_ADD_ATOM(tandem, tandem, deadline_atom, "deadline")
  // driver; "lost" is the supervisor's worker-lost notice (actors/supervisor/supervisor.hpp)
  CAF_ADD_ATOM(tandem, tandem, step_atom, "step")
  CAF_ADD_ATOM(tandem, tandem, sft_step_atom, "sft_step")
  CAF_ADD_ATOM(tandem, tandem, snapshot_atom, "snapshot")
  CAF_ADD_ATOM(tandem, tandem, member_lost_atom, "lost")
  // environment
  CAF_ADD_ATOM(tandem, tandem, score_atom, "score")
  // engine executors (actors/api/engine_call.hpp)
  CAF_ADD_ATOM(tandem, tandem, engine_run_atom, "engine_run")
  CAF_ADD_ATOM(tandem, tandem, engine_done_atom, "engine_ok")
  // validation (actors/driver/validation.hpp)
  CAF_ADD_ATOM(tandem, tandem, validate_atom, "validate")

  CAF_ADD_TYPE_ID(tandem, (tandem::generate_job))
  CAF_ADD_TYPE_ID(tandem, (tandem::trajectory))
  CAF_ADD_TYPE_ID(tandem, (tandem::generate_result))
  CAF_ADD_TYPE_ID(tandem, (tandem::score_job))
  CAF_ADD_TYPE_ID(tandem, (tandem::env_feedback))
  CAF_ADD_TYPE_ID(tandem, (tandem::score_result))
  CAF_ADD_TYPE_ID(tandem, (tandem::logprobs_job))
  CAF_ADD_TYPE_ID(tandem, (tandem::logprobs_result))
  CAF_ADD_TYPE_ID(tandem, (tandem::train_job))
  CAF_ADD_TYPE_ID(tandem, (tandem::train_report))
  CAF_ADD_TYPE_ID(tandem, (tandem::save_job))
  CAF_ADD_TYPE_ID(tandem, (tandem::save_report))
  CAF_ADD_TYPE_ID(tandem, (tandem::load_job))
  CAF_ADD_TYPE_ID(tandem, (tandem::load_report))
  CAF_ADD_TYPE_ID(tandem, (tandem::manifest_reply))
  CAF_ADD_TYPE_ID(tandem, (tandem::manifest_check))
  CAF_ADD_TYPE_ID(tandem, (tandem::manifest_accepted))
  CAF_ADD_TYPE_ID(tandem, (tandem::refit_ack))
  CAF_ADD_TYPE_ID(tandem, (tandem::handshake_report))
  CAF_ADD_TYPE_ID(tandem, (tandem::refit_report))
  CAF_ADD_TYPE_ID(tandem, (tandem::step_report))
  CAF_ADD_TYPE_ID(tandem, (tandem::driver_snapshot))
  CAF_ADD_TYPE_ID(tandem, (tandem::stream_job))
  CAF_ADD_TYPE_ID(tandem, (tandem::stream_report))
  CAF_ADD_TYPE_ID(tandem, (tandem::validation_sample))
  CAF_ADD_TYPE_ID(tandem, (tandem::validation_report))

CAF_END_TYPE_ID_BLOCK(tandem)

namespace tandem {

/// Registers every message type of the tandem type-ID block with `cfg` (call before the
/// actor_system is constructed). The lead's process configuration and every actor test call it.
void add_tandem_types(caf::actor_system_config& cfg);

}  // namespace tandem
