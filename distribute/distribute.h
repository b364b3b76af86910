// Umbrella header of tapeflow::distribute (data-parallel training over Open MPI).
#pragma once

#include "distribute/context.h"                    // IWYU pragma: export
#include "distribute/distributed_gradient_tape.h"  // IWYU pragma: export
#include "distribute/distributed_optimizer.h"      // IWYU pragma: export
