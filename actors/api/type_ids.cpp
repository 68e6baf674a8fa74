// Registration of tandem's type-ID block with an actor-system configuration.
#include "actors/api/type_ids.hpp"

namespace tandem {

void add_tandem_types(caf::actor_system_config& cfg) { cfg.add_message_types<caf::id_block::tandem>(); }

}  // namespace tandem
