// The text of `tandem run --dry-run`: placement, step arithmetic and per-phase memory budgets.
#pragma once

#include <string>

#include "orchestration/config/resolve.h"
#include "orchestration/topology/memory_plan.h"
#include "orchestration/topology/model_facts.h"
#include "orchestration/topology/placement.h"

namespace tandem::topology {

std::string render_plan(const config::resolved_recipe& r, const model_facts& m, const placement_plan& p,
                        const memory_plan& mem);

}  // namespace tandem::topology
