// The MPI datatype and reduction of tapeflow dtypes and ops (not public API).
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>

#include "models/replica_context.h"
#include "tape/core/dtype.h"

namespace tapeflow::distribute::internal {

// Errors: std::invalid_argument for bool (not reducible).
inline MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kBool: return MPI_C_BOOL;
  }
  throw std::invalid_argument(std::string("distribute: unsupported dtype ") + dtype_name(d));
}

// kAverage is a sum followed by a division.
inline MPI_Op mpi_op(models::ReduceOp op) {
  switch (op) {
    case models::ReduceOp::kAverage:
    case models::ReduceOp::kSum: return MPI_SUM;
    case models::ReduceOp::kMin: return MPI_MIN;
    case models::ReduceOp::kMax: return MPI_MAX;
  }
  return MPI_SUM;
}

}  // namespace tapeflow::distribute::internal
