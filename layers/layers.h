// layers: the umbrella header of tapeflow::layers (Layer, initializers, activations, Dense,
// BatchNormalization, Dropout, Flatten, Reshape, Activation, LeakyReLU).
#pragma once

#include "layers/activations.h"
#include "layers/dense.h"
#include "layers/initializers.h"
#include "layers/layer.h"
