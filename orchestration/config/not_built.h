// What a well-formed recipe asks for that this build cannot run yet. `tandem validate` lists these
// settings as notes (a recipe for a later build stays checkable); `tandem run` and `--dry-run`
// refuse the recipe with the same list. The rules live on the schema's keys (key_spec::unbuilt).
#pragma once

#include <string>

#include "orchestration/config/config_error.h"

namespace tandem::config {

struct resolved_recipe;

/// One entry per key whose value asks for something not built, in schema order, each located
/// where the value was set (the recipe file itself, no line, for a schema default).
config_errors unbuilt_settings(const resolved_recipe& r);

/// The keys a layer of the recipe sets that the engines of runtime.engine ignore: with fake, those
/// that only configure the Gemma 4 engines (key_spec::fake_ignores); with gemma4, those that only
/// configure the fake engines (key_spec::gemma4_ignores). Schema defaults are never noted.
config_errors engine_ignored_settings(const resolved_recipe& r);

/// "file:line:column: note: key: message", one per line.
std::string to_notes(const config_errors& notes);

/// The data files the recipe names that do not exist (checked by `tandem run` only, so a recipe
/// written for another machine stays checkable).
config_errors missing_data_files(const resolved_recipe& r);

}  // namespace tandem::config
