// TensorBoard event files: the writer under the TensorBoard callback, and the record framing and
// checksum it uses.
//
// Format:   a file "events.out.tfevents.<seconds>.<host>.<pid>.<n>" of TFRecord records, each
//           uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes, the payload, and
//           uint32 masked CRC-32C of the payload; every payload is a serialized tensorboard `Event`
//           proto (field numbers from tensorboard/compat/proto/event.proto, summary.proto,
//           histogram.proto; compiled by protoc from models/io/tensorboard_event.proto, kept out of
//           this header). The first event holds file_version "brain.Event:2".
// Values:   scalars as Summary.Value.simple_value (float32), histograms as HistogramProto, images
//           as Summary.Image holding PNG bytes: the forms TensorBoard's EventAccumulator reads as
//           Scalars / Histograms / Images (and its scalars / histograms / images dashboards show).
// Threads:  one writer is not for concurrent use.
// Ref:      tensorboard.summary.writer.event_file_writer.EventFileWriter,
//           tensorflow/core/lib/io/record_writer.cc (framing), tensorflow/core/lib/hash/crc32c.h (mask)
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace tapeflow::io {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF) of `data`.
// crc32c("123456789") == 0xE3069283.
std::uint32_t crc32c(std::string_view data);
// TFRecord's masked CRC: ((crc >> 15) | (crc << 17)) + 0xA282EAD8 (mod 2^32), of crc32c(data).
std::uint32_t masked_crc32c(std::string_view data);
// One TFRecord record holding `payload` (length, masked CRC of the length, payload, masked CRC of it).
std::string tfrecord(std::string_view payload);

// PNG bytes of an 8-bit image, rows top to bottom, `channels` interleaved (1 gray, 2 gray + alpha,
// 3 RGB, 4 RGBA). Errors: std::invalid_argument for a size that does not match pixels.size(), sides
// < 1 or channels outside 1..4.
std::string encode_png(std::span<const std::uint8_t> pixels, int height, int width, int channels);

// Writes one event file in `log_dir`.
// Errors:   std::runtime_error naming log_dir (or the file) and the system's reason if the directory
//           cannot be made or the file cannot be created or written (at construction, add_*, flush).
//           add_histogram: std::invalid_argument for no values or a non-finite one (naming the tag).
// Facts:    the directory is made (with parents) if missing. Events are buffered and written by
//           flush(), which the destructor also calls (errors there are logged, not thrown); a reader
//           sees complete records only.
// Ref:      tf.summary.create_file_writer (the file it makes), torch.utils.tensorboard.SummaryWriter
class EventFileWriter {
 public:
  // Makes log_dir (with parents) if missing and creates a new event file there holding the
  // file_version event. Errors: std::runtime_error naming log_dir and the system's reason.
  explicit EventFileWriter(const std::string& log_dir);
  ~EventFileWriter();
  EventFileWriter(const EventFileWriter&) = delete;
  EventFileWriter& operator=(const EventFileWriter&) = delete;

  // A scalar: Summary.Value{tag, simple_value = float(value)} at `step`.
  void add_scalar(const std::string& tag, double value, std::int64_t step);
  // A histogram of `values`: min, max, num, sum, sum of squares and 30 equal-width buckets over
  // [min, max] (one bucket when all values are equal), as tf.summary.histogram's default; the
  // limits are each bucket's right edge.
  void add_histogram(const std::string& tag, std::span<const double> values, std::int64_t step);
  // An image given as PNG bytes (encode_png) of height x width x channels.
  void add_image(const std::string& tag, const std::string& png, int height, int width, int channels,
                 std::int64_t step);
  // Writes buffered events to the file and flushes it.
  void flush();
  // The file's path.
  const std::string& path() const { return path_; }

 private:
  void write_event(const std::string& serialized_event);
  std::string log_dir_, path_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file_;
  std::string pending_;
};

}  // namespace tapeflow::io
