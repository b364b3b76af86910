// tapeflow: everything in one include. Users write `namespace tf = tapeflow;`.
//   tape/       tensors, ops, GradientTape, jacobians/hessians, custom gradients, function tracing
//   layers/     Keras-style layers (tapeflow::layers)
//   optimizers/ Keras-style optimizers and schedules (tapeflow::optimizers)
//   data/       datasets and the Fashion-MNIST reader
//   models/     Model/Sequential, losses, metrics, callbacks, checkpoints, ready-made architectures
#pragma once

#include "data/dataset.h"
#include "data/fashion_mnist.h"
#include "data/fashion_mnist_tensors.h"
#include "data/idx.h"
#include "layers/layers.h"
#include "models/models.h"
#include "optimizers/optimizers.h"
#include "tape/tapeflow.h"
