// layers: the umbrella header of tapeflow::layers (Layer, initializers, activations, Dense,
// BatchNormalization, Dropout, Flatten, Reshape, Activation, LeakyReLU).
#pragma once

#include "layers/activation.h"
#include "layers/activations.h"
#include "layers/batch_normalization.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/flatten.h"
#include "layers/initializers.h"
#include "layers/layer.h"
#include "layers/reshape.h"
