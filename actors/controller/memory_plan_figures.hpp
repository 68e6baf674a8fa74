// The dry run's memory plan of one device (orchestration/topology/memory_plan.h), per phase, as
// the controller puts it beside the device memory in use as each turn ended, in every step's
// record (memory/*_planned_gib) and line.
#pragma once

namespace tandem {

/// Bytes per phase; zero: no plan (a CPU run, whose device memory is the host's).
struct memory_plan_figures {
  double training_bytes = 0;
  double generation_bytes = 0;
};

}  // namespace tandem
