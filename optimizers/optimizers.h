// optimizers: the umbrella header of tapeflow::optimizers (Optimizer, SGD, Adam, AdamW, RMSprop,
// Adagrad, learning-rate schedules).
#pragma once

#include "optimizers/adam.h"
#include "optimizers/optimizer.h"
#include "optimizers/rmsprop.h"
#include "optimizers/schedules.h"
#include "optimizers/serialization.h"
#include "optimizers/sgd.h"
