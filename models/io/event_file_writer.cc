// TensorBoard event files: Event protos (protoc-generated from tensorboard_event.proto) framed as
// TFRecords with Boost.CRC's CRC-32C; PNG through stb_image_write (the project's one copy of its
// implementation).
#include "models/io/event_file_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include <boost/crc.hpp>
#include <spdlog/spdlog.h>

#include "io/tensorboard_event.pb.h"  // protoc output in the build tree (models/CMakeLists.txt)
#include "tape/runtime/logging.h"

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

namespace tapeflow::io {
namespace {

namespace pb = tapeflow::tensorboard;

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void append_to_string(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<std::size_t>(size));
}

}  // namespace

std::uint32_t crc32c(std::string_view data) {
  // Castagnoli's polynomial 0x1EDC6F41 (0x82F63B78 reflected), reflected in and out.
  boost::crc_optimal<32, 0x1EDC6F41, 0xFFFFFFFF, 0xFFFFFFFF, true, true> crc;
  crc.process_bytes(data.data(), data.size());
  return crc.checksum();
}

std::uint32_t masked_crc32c(std::string_view data) {
  const std::uint32_t crc = crc32c(data);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

std::string tfrecord(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + 16);
  put_le(out, payload.size(), 8);
  put_le(out, masked_crc32c(out), 4);
  out.append(payload);
  put_le(out, masked_crc32c(payload), 4);
  return out;
}

std::string encode_png(std::span<const std::uint8_t> pixels, int height, int width, int channels) {
  if (height < 1 || width < 1 || channels < 1 || channels > 4 ||
      pixels.size() != static_cast<std::size_t>(height) * static_cast<std::size_t>(width) * static_cast<std::size_t>(channels))
    throw std::invalid_argument("encode_png: need height, width >= 1, channels 1..4 and height*width*channels pixels, got " +
                                std::to_string(height) + " x " + std::to_string(width) + " x " +
                                std::to_string(channels) + " for " + std::to_string(pixels.size()) + " bytes");
  std::string png;
  if (!stbi_write_png_to_func(append_to_string, &png, width, height, channels, pixels.data(), width * channels))
    throw std::runtime_error("encode_png: stb_image_write failed for a " + std::to_string(height) + " x " +
                             std::to_string(width) + " x " + std::to_string(channels) + " image");
  return png;
}

EventFileWriter::EventFileWriter(const std::string& log_dir) : log_dir_(log_dir), file_(nullptr, &std::fclose) {
  std::error_code ec;
  std::filesystem::create_directories(log_dir, ec);
  if (ec || !std::filesystem::is_directory(log_dir))
    throw std::runtime_error("EventFileWriter: cannot make the log directory '" + log_dir +
                             "': " + (ec ? ec.message() : std::string("not a directory")));
  static std::atomic<int> counter{0};
  const auto seconds = static_cast<long long>(std::floor(wall_time()));
  path_ = (std::filesystem::path(log_dir) / ("events.out.tfevents." + std::to_string(seconds) + "." + host_name() +
                                             "." + std::to_string(getpid()) + "." + std::to_string(counter++)))
              .string();
  file_.reset(std::fopen(path_.c_str(), "wbx"));
  if (!file_)
    throw std::runtime_error("EventFileWriter: cannot create an event file in the log directory '" + log_dir +
                             "' (" + path_ + "): " + std::strerror(errno));
  pb::Event event;
  event.set_wall_time(wall_time());
  event.set_file_version("brain.Event:2");
  write_event(event.SerializeAsString());
  flush();
}

EventFileWriter::~EventFileWriter() {
  try {
    flush();
  } catch (const std::exception& e) {
    logger()->error("{}", e.what());
  }
}

void EventFileWriter::write_event(const std::string& serialized_event) { pending_ += tfrecord(serialized_event); }

void EventFileWriter::flush() {
  if (!file_) return;
  if (!pending_.empty()) {
    if (std::fwrite(pending_.data(), 1, pending_.size(), file_.get()) != pending_.size() || std::fflush(file_.get()) != 0)
      throw std::runtime_error("EventFileWriter: cannot write the event file '" + path_ + "': " + std::strerror(errno));
    pending_.clear();
  }
}

namespace {
pb::Event summary_event(std::int64_t step) {
  pb::Event event;
  event.set_wall_time(wall_time());
  event.set_step(step);
  return event;
}
}  // namespace

void EventFileWriter::add_scalar(const std::string& tag, double value, std::int64_t step) {
  pb::Event event = summary_event(step);
  pb::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->set_simple_value(static_cast<float>(value));
  write_event(event.SerializeAsString());
}

void EventFileWriter::add_histogram(const std::string& tag, std::span<const double> values, std::int64_t step) {
  if (values.empty()) throw std::invalid_argument("EventFileWriter::add_histogram: '" + tag + "': no values");
  double lo = values[0], hi = values[0], sum = 0, sum_squares = 0;
  for (const double x : values) {
    if (!std::isfinite(x))
      throw std::invalid_argument("EventFileWriter::add_histogram: '" + tag + "': non-finite value " + std::to_string(x));
    lo = std::min(lo, x), hi = std::max(hi, x), sum += x, sum_squares += x * x;
  }
  constexpr int kBuckets = 30;  // tf.summary.histogram's default
  const int buckets = hi > lo ? kBuckets : 1;
  std::vector<double> counts(static_cast<std::size_t>(buckets), 0.0);
  const double width = (hi - lo) / buckets;
  for (const double x : values) {
    const int i = buckets == 1 ? 0 : std::min(buckets - 1, static_cast<int>((x - lo) / width));
    counts[static_cast<std::size_t>(i)] += 1;
  }
  pb::Event event = summary_event(step);
  pb::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  pb::HistogramProto* h = v->mutable_histo();
  h->set_min(lo), h->set_max(hi), h->set_num(static_cast<double>(values.size()));
  h->set_sum(sum), h->set_sum_squares(sum_squares);
  for (int i = 0; i < buckets; ++i) {
    h->add_bucket_limit(i + 1 == buckets ? hi : lo + width * (i + 1));
    h->add_bucket(counts[static_cast<std::size_t>(i)]);
  }
  write_event(event.SerializeAsString());
}

void EventFileWriter::add_image(const std::string& tag, const std::string& png, int height, int width, int channels,
                                std::int64_t step) {
  pb::Event event = summary_event(step);
  pb::Summary::Value* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  pb::Summary::Image* image = v->mutable_image();
  image->set_height(height), image->set_width(width), image->set_colorspace(channels);
  image->set_encoded_image_string(png);
  write_event(event.SerializeAsString());
}

}  // namespace tapeflow::io
