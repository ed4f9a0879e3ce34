// families.hpp (arch/families, internal): the build function of every family; family.cpp
// dispatches on model_config::family.
#pragma once

#include "arch/families/weights.hpp"

namespace troupe::arch {

status build_llama(const model_source& m, graph::graph& g);

} // namespace troupe::arch
