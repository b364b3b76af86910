// Reads TFRecord files (TensorBoard event files) back in tests: the payloads, each record's length
// and payload CRCs checked (masked CRC-32C, models/io/event_file_writer.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tapeflow::testing {

// The payloads of every record of `path`, in order. A framing or CRC error fails the calling test
// (gtest ADD_FAILURE naming the file and the offset) and stops the reading there.
std::vector<std::string> read_tfrecords(const std::string& path);

// The files named events.out.tfevents.* in `dir` (not recursive), sorted.
std::vector<std::filesystem::path> event_files(const std::filesystem::path& dir);

}  // namespace tapeflow::testing
