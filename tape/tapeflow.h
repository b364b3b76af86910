// tapeflow: the umbrella header of the tape core. `namespace tf = tapeflow;`
#pragma once

#include "tape/autodiff/gradient_tape.h"
#include "tape/autodiff/hessian.h"
#include "tape/autodiff/jacobian.h"
#include "tape/autodiff/newton.h"
#include "tape/core/dtype.h"
#include "tape/core/random.h"
#include "tape/core/shape.h"
#include "tape/core/tensor.h"
#include "tape/core/variable.h"
#include "tape/ops/array_ops.h"
#include "tape/ops/index_ops.h"
#include "tape/ops/linalg_ops.h"
#include "tape/ops/math_ops.h"
#include "tape/ops/nn_ops.h"
#include "tape/ops/reduction_ops.h"
#include "tape/runtime/op_registry.h"
