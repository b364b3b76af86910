// Direct chunk I/O with our own (vectorised, bit-identical) Fletcher-32, bypassing HDF5's filter
// pipeline and chunk cache, which cost several copies and a slow checksum per chunk.
// Applies to "run" chunkings: chunk dims [1, ..., 1, c, d_{k+1}, ..., d_{r-1}] (every chunk is one
// contiguous run of the row-major array) with Fletcher-32 as the only filter. Not public API.
#pragma once

#include <hdf5.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tapeflow::io::internal {

// HDF5's Fletcher-32 (H5_checksum_fletcher32: big-endian 16-bit words, folded every 360 words),
// bit for bit, at memory speed.
std::uint32_t fletcher32(const unsigned char* data, std::size_t len);

// True if `chunk` is a run chunking of `shape` (same rank, rank >= 1, no zero dims).
bool is_run_chunking(const std::vector<std::int64_t>& shape, const std::vector<hsize_t>& chunk);

// Writes `data` (row-major, element_size bytes each) into a chunked dataset created with a run
// chunking and the Fletcher-32 filter, one H5Dwrite_chunk per chunk. Errors: runtime_error naming
// `file` and `object`.
void write_run_chunks(hid_t dataset, const std::vector<std::int64_t>& shape, const std::vector<hsize_t>& chunk,
                      std::size_t element_size, const std::byte* data, const std::string& file,
                      const std::string& object);

// Reads such a dataset with H5Dread_chunk, checking each chunk's stored size (before reading it)
// and its checksum. `out` holds product(shape) elements (its capacity may grow by 4 bytes).
// Errors: runtime_error naming `file`, `object` and the chunk (missing chunk, wrong stored size,
// filter skipped, checksum mismatch).
void read_run_chunks(hid_t dataset, const std::vector<std::int64_t>& shape, const std::vector<hsize_t>& chunk,
                     std::size_t element_size, std::vector<std::byte>& out, const std::string& file,
                     const std::string& object);

}  // namespace tapeflow::io::internal
