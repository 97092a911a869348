// ChannelRecorder: records the ticks an app's own subscriber receives, in-process.
//
// The polling thread hands each tick to on_tick(); ticks fill a block in memory, and full
// blocks go to a writer thread ("tr-rec") through a Boost.Lockfree spsc_queue of block pointers;
// the writer returns emptied blocks through a second queue. A queue of blocks, not of ticks: one
// push per few thousand ticks, so that the two threads share no cache line per tick (the target
// is 10 M ticks/s on a 2-core host). The polling thread never waits on the disk: when no empty
// block is left, on_tick() refuses the tick and counts it (dropped()); a caller that would rather
// hold the ticks in its ring (policy block) asks room() before polling.
//
// Threads: one polling thread calls on_tick(), room(), flush_due() and close(); stats() from any
// thread. on_tick(), room() and flush_due() never block, allocate, throw, log or make a system
// call. Everything else is control plane.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "tickrail/tick.hpp"
#include "tickrail/tools/record/recording.hpp"

namespace tickrail::record {

struct RecorderConfig {
  std::string path;
  WriterOptions writer{};
  // 8192 x 32 blocks (16 MiB): the fastest of the sizes measured (BENCHMARKS.md, "Recording").
  std::uint32_t block_ticks = 8192;     // ticks per block (1..kMaxBlockTicks)
  std::uint32_t queue_blocks = 32;      // blocks in memory: how much disk stall is absorbed
  std::chrono::milliseconds flush_after{100};  // a partial block goes to disk after this long
  std::string housekeeping_cpus;        // where tr-rec runs ("" : off the polling thread's cpus)
  void validate() const;                // throws Error(config_error) naming the key
};

struct RecorderStats {
  std::uint64_t received = 0;   // ticks given to on_tick()
  std::uint64_t recorded = 0;   // ticks written to the file
  std::uint64_t dropped = 0;    // ticks refused: no empty block, or the writer failed
  std::uint64_t out_of_order = 0;  // ticks whose sequence number did not increase (not kept)
  std::uint64_t blocks = 0;
  std::uint64_t bytes = 0;      // file size so far
  std::uint64_t missing = 0;    // sequence numbers never received (gaps)
  bool failed = false;          // the writer hit an error: error() says which
};

class ChannelRecorder {
 public:
  // Creates the file (RecordingWriter's errors) and starts tr-rec.
  ChannelRecorder(const RecorderConfig& config, const RecordingMeta& meta);
  // Closes as close(EndReason::stopped) would, without reporting errors.
  ~ChannelRecorder();
  ChannelRecorder(const ChannelRecorder&) = delete;
  ChannelRecorder& operator=(const ChannelRecorder&) = delete;

  // Polling thread. Keeps the tick; false when it could not (counted in dropped() or
  // out_of_order).
  bool on_tick(const Tick& t) noexcept {
    if (t.seq <= last_seq_) [[unlikely]] {
      out_of_order_.store(out_of_order_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return false;
    }
    if (cur_ == nullptr && !take_block()) [[unlikely]] {
      dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      return false;
    }
    cur_->ticks[cur_->count++] = t;
    last_seq_ = t.seq;
    received_.store(received_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (cur_->count == block_ticks_) hand_over();
    return true;
  }
  // Polling thread: how many ticks on_tick() will take for sure now (0: none). A policy-block
  // poller polls at most this many, so that the ring, not the recorder, holds the rest.
  [[nodiscard]] std::uint32_t room() noexcept;
  // Polling thread: hands a partial block to the writer once its first tick is flush_after old.
  // `now` is Clock::now(). Call it when a poll brought nothing.
  void flush_due(std::uint64_t now) noexcept;

  // Polling thread: hands the partial block, waits for the writer to drain, writes the trailer
  // and fsyncs. Throws the writer's error, if it had one (the file then has no trailer and ends
  // at its last complete block). Idempotent.
  void close(EndReason reason);

  [[nodiscard]] RecorderStats stats() const;
  [[nodiscard]] bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  [[nodiscard]] std::string error() const;  // the writer's error ("" when none)
  [[nodiscard]] std::uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }

  struct Block {
    std::uint32_t count = 0;
    std::uint64_t first_cycles = 0;  // Clock::now() when its first tick came
    Tick* ticks = nullptr;
  };
  struct Impl;

 private:
  bool take_block() noexcept;
  void hand_over() noexcept;

  std::unique_ptr<Impl> impl_;
  Block* cur_ = nullptr;
  std::uint32_t block_ticks_;
  std::uint64_t last_seq_ = 0;
  std::uint64_t flush_cycles_ = 0;
  std::atomic<std::uint64_t> received_{0}, dropped_{0}, out_of_order_{0};
  std::atomic<bool> failed_{false};
  bool closed_ = false;
};

}  // namespace tickrail::record
