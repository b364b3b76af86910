// models: the umbrella header of tapeflow::models (Model, Sequential, losses, metrics, callbacks,
// ready-made architectures, the Functional API, configs, whole-model saving, TensorFlow.js, ONNX export,
// the TensorBoard callback).
#pragma once

#include "models/adversarial.h"
#include "models/architectures.h"
#include "models/callbacks.h"
#include "models/callbacks/model_checkpoint.h"
#include "models/callbacks/reduce_lr_on_plateau.h"
#include "models/callbacks/tensorboard.h"
#include "models/checkpoint.h"
#include "models/config.h"
#include "models/export/onnx.h"
#include "models/functional.h"
#include "models/gan.h"
#include "models/logs.h"
#include "models/losses.h"
#include "models/metrics.h"
#include "models/model.h"
#include "models/saving.h"
#include "models/saving_model.h"
#include "models/sequential.h"
#include "models/tfjs.h"
