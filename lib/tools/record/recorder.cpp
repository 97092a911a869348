#include "tickrail/tools/record/recorder.hpp"

#include <boost/lockfree/spsc_queue.hpp>

#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "core/thread.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"

namespace tickrail::record {

void RecorderConfig::validate() const {
  if (path.empty()) throw Error(Errc::config_error, "path: no output file");
  if (block_ticks == 0 || block_ticks > kMaxBlockTicks) {
    throw Error(Errc::config_error, "block_ticks: " + std::to_string(block_ticks) + " is outside 1.." +
                                        std::to_string(kMaxBlockTicks));
  }
  if (queue_blocks < 2 || queue_blocks > 4096) {
    throw Error(Errc::config_error, "queue_blocks: " + std::to_string(queue_blocks) + " is outside 2..4096");
  }
  if (flush_after.count() <= 0 || flush_after.count() > 60'000) {
    throw Error(Errc::config_error, "flush_after_ms: must be within 1..60000");
  }
  if (writer.zstd_level < 1 || writer.zstd_level > 19) {
    throw Error(Errc::config_error, "zstd_level: " + std::to_string(writer.zstd_level) + " is outside 1..19");
  }
}


struct ChannelRecorder::Impl {
  Impl(const RecorderConfig& c, const RecordingMeta& m)
      : config(c), meta(m), writer(c.path, m, c.writer), full(c.queue_blocks), empty(c.queue_blocks) {}

  RecorderConfig config;
  RecordingMeta meta;
  RecordingWriter writer;
  std::vector<Tick> storage;       // every block's ticks, allocated once
  std::vector<Block> blocks;
  boost::lockfree::spsc_queue<Block*> full;   // polling thread -> tr-rec
  boost::lockfree::spsc_queue<Block*> empty;  // tr-rec -> polling thread
  std::atomic<bool> draining{false};          // close(): write what is queued, then end
  std::atomic<std::uint64_t> recorded{0}, lost{0}, blocks_written{0}, bytes{0}, missing{0};
  mutable std::mutex error_mutex;
  std::string error;
  std::jthread thread;

  void fail(ChannelRecorder& owner, std::string why, std::uint32_t ticks) {
    {
      std::lock_guard lock(error_mutex);
      error = std::move(why);
    }
    owner.failed_.store(true, std::memory_order_release);
    lost.fetch_add(ticks, std::memory_order_relaxed);
  }

  // tr-rec: writes each full block, returns it; sleeps briefly when there is nothing (the
  // polling thread cannot wake it without a system call, which its path must not make).
  void run(ChannelRecorder& owner) {
    const double ns_per_cycle = 1.0 / meta.cycles_per_ns;
    for (;;) {
      Block* b = nullptr;
      if (!full.pop(b)) {
        if (draining.load(std::memory_order_acquire) && !full.read_available()) return;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        continue;
      }
      if (!owner.failed_.load(std::memory_order_relaxed)) {
        try {
          const auto since = static_cast<double>(b->first_cycles - meta.start_cycles) * ns_per_cycle;
          writer.append(std::span<const Tick>(b->ticks, b->count),
                        meta.start_ns + static_cast<std::uint64_t>(since));
          recorded.fetch_add(b->count, std::memory_order_relaxed);
          blocks_written.fetch_add(1, std::memory_order_relaxed);
          bytes.store(writer.bytes(), std::memory_order_relaxed);
          missing.store(writer.missing(), std::memory_order_relaxed);
        } catch (const std::system_error& e) {
          // The writer's messages carry the errno text already: without the category's tail
          // ("...: No space left on device: No space left on device" otherwise).
          std::string m = e.what();
          const std::string tail = ": " + e.code().message();
          if (m.size() > tail.size() && m.ends_with(tail)) m.resize(m.size() - tail.size());
          fail(owner, std::move(m), b->count);
        } catch (const std::exception& e) {
          fail(owner, e.what(), b->count);
        }
      } else {
        lost.fetch_add(b->count, std::memory_order_relaxed);  // counted, never hidden
      }
      b->count = 0;
      (void)empty.push(b);  // cannot fail: the queue holds every block
    }
  }
};

ChannelRecorder::ChannelRecorder(const RecorderConfig& config, const RecordingMeta& meta)
    : block_ticks_(config.block_ticks) {
  config.validate();
  impl_ = std::make_unique<Impl>(config, meta);
  Impl& s = *impl_;
  s.storage.resize(static_cast<std::size_t>(config.block_ticks) * config.queue_blocks);
  s.blocks.resize(config.queue_blocks);
  for (std::uint32_t i = 0; i < config.queue_blocks; ++i) {
    s.blocks[i].ticks = s.storage.data() + static_cast<std::size_t>(i) * config.block_ticks;
    (void)s.empty.push(&s.blocks[i]);
  }
  flush_cycles_ = Clock::instance().ns_to_cycles(static_cast<double>(config.flush_after.count()) * 1e6);
  const detail::Placement where = detail::Placement::for_endpoint(config.housekeeping_cpus, "recorder");
  s.thread = detail::start_thread("tr-rec", where, [this](std::stop_token) { impl_->run(*this); });
}

ChannelRecorder::~ChannelRecorder() {
  try {
    close(EndReason::stopped);
  } catch (...) {  // the destructor cannot report; close() did or would have
  }
}

bool ChannelRecorder::take_block() noexcept {
  if (!impl_->empty.pop(cur_)) {
    cur_ = nullptr;
    return false;
  }
  cur_->count = 0;
  cur_->first_cycles = Clock::now();
  return true;
}

void ChannelRecorder::hand_over() noexcept {
  (void)impl_->full.push(cur_);  // cannot fail: the queue holds every block
  cur_ = nullptr;
}

std::uint32_t ChannelRecorder::room() noexcept {
  if (cur_ == nullptr && !take_block()) return 0;
  return block_ticks_ - cur_->count;
}

void ChannelRecorder::flush_due(std::uint64_t now) noexcept {
  if (cur_ != nullptr && cur_->count != 0 && now - cur_->first_cycles >= flush_cycles_) hand_over();
}

void ChannelRecorder::close(EndReason reason) {
  if (closed_) return;
  closed_ = true;
  Impl& s = *impl_;
  if (cur_ != nullptr && cur_->count != 0) hand_over();
  s.draining.store(true, std::memory_order_release);
  s.thread.join();
  if (failed()) throw Error(Errc::closed, error());
  s.writer.close(reason, dropped_.load(std::memory_order_relaxed) + s.lost.load(std::memory_order_relaxed));
  s.bytes.store(s.writer.bytes(), std::memory_order_relaxed);
}

RecorderStats ChannelRecorder::stats() const {
  const Impl& s = *impl_;
  RecorderStats r;
  r.received = received_.load(std::memory_order_relaxed);
  r.recorded = s.recorded.load(std::memory_order_relaxed);
  r.dropped = dropped_.load(std::memory_order_relaxed) + s.lost.load(std::memory_order_relaxed);
  r.out_of_order = out_of_order_.load(std::memory_order_relaxed);
  r.blocks = s.blocks_written.load(std::memory_order_relaxed);
  r.bytes = s.bytes.load(std::memory_order_relaxed);
  r.missing = s.missing.load(std::memory_order_relaxed);
  r.failed = failed();
  return r;
}

std::string ChannelRecorder::error() const {
  std::lock_guard lock(impl_->error_mutex);
  return impl_->error;
}

}  // namespace tickrail::record
