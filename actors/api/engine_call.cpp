// The engine executor's behaviour (engine_call.hpp).
#include "actors/api/engine_call.hpp"

namespace tandem {

caf::behavior engine_executor(caf::event_based_actor*, std::string) {
  return {[](engine_run_atom, engine_task& task) {
    task.run();
    return engine_done_atom_v;
  }};
}

}  // namespace tandem
