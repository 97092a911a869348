// RC subscriber: owns a registered ring that its publisher RDMA-WRITEs into, and reads it by
// polling memory (Subscriber::poll reads the ring inline through ring()) or, in CQ-polling
// mode, by busy-polling its receive CQ for WRITE WITH IMMEDIATE completions (poll()).
//
// Threads: the polling thread runs the data path (rc_subscriber_datapath.cpp: poll(),
// return_credit()). A CM thread (rc_subscriber.cpp) waits, in bounded poll() calls, for
// rdma_cm events after the connection is up (DISCONNECTED, DEVICE_REMOVAL) and raises a flag
// that state() reads, so that neither poll() nor state() ever makes a system call.
//
// With start = snapshot or policy = conflate (memory polling only: a lap is what memory polling
// sees), the subscriber reads the publisher's last-value table with RDMA READ
// (common/table_reader.hpp) and delivers it through TableDelivery, polled out of line while it
// does (and always, under conflate: it looks for laps there).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/silence.hpp"
#include "tickrail/memory.hpp"
#include "transport/rdma/cm.hpp"
#include "transport/rdma/rc/protocol.hpp"
#include "transport/rdma/common/table_reader.hpp"
#include "transport/rdma/verbs.hpp"
#include "transport/table_delivery.hpp"
#include "transport/transport.hpp"

namespace tickrail::rdma::rc {

// Why the subscriber lost its publisher, besides the notice line (which says evicted/closed).
enum class PeerLoss : std::uint32_t { none = 0, disconnected, device_removed, qp_error };

class RcSubscriber final : public detail::SubscriberTransport {
 public:
  // Tests only: a request this library would never send (another version, an absurd ring).
  struct Overrides {
    std::optional<std::uint16_t> version;
    std::optional<std::uint8_t> capacity_log2;
  };

  // Resolves and connects (each step bounded by rdma.connect_timeout). Throws Error: unknown
  // device or address, no listener, rejected (in words: version, channel, token, geometry,
  // allow-list), timed out, too little locked memory for the ring.
  explicit RcSubscriber(const SubscriberConfig& config, const detail::Placement& where = {},
                        const Overrides& overrides = {});
  RcSubscriber(const SubscriberConfig& config, const Overrides& overrides)
      : RcSubscriber(config, {}, overrides) {}
  ~RcSubscriber() override;

  RingReader* ring() noexcept override {
    return is_memory_mode(mode_) && !closed_ && !table_polled() ? &reader_ : nullptr;
  }
  // From the connection until the snapshot is delivered.
  bool in_snapshot() const noexcept override {
    return config_.start == StartMode::snapshot && delivery_ != nullptr && delivery_->busy() &&
           delivery_->why() == detail::TableDelivery::Why::snapshot;
  }
  bool ready() noexcept override { return !closed_; }  // connected in the constructor
  std::size_t poll(detail::TickSink sink, std::size_t limit) noexcept override;
  std::uint64_t return_credit(std::uint64_t next_seq) noexcept override;
  std::uint64_t credited() const noexcept override {
    return closed_ || loss_.load(std::memory_order_relaxed) != 0 ? ~std::uint64_t{0} : last_credit_;
  }
  SubscriberState state() const noexcept override;
  SubscriberCounters counters() const noexcept override;
  std::uint64_t next_sequence() const noexcept override;
  std::uint64_t after_end() const noexcept override {
    return capacity_ + (delivery_ != nullptr ? 2 * delivery_->geometry().entries() : 0);
  }
  std::string reason() const override;
  const SubscriberConfig& config() const noexcept override { return config_; }
  detail::WakeCounter* wakeups() noexcept override { return &wakeups_; }
  void close() noexcept override;

  [[nodiscard]] WriteMode mode() const noexcept { return mode_; }
  [[nodiscard]] std::uint64_t first_sequence() const noexcept { return first_seq_; }
  [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }
  [[nodiscard]] const std::string& publisher() const noexcept { return where_; }

  // Tests only: one RDMA WRITE (8 bytes) or READ (64 bytes) at the granted table's address +
  // `offset`, with its rkey; waits up to 5 s for the completion and returns its status
  // (IBV_WC_GENERAL_ERR if none came). A failed access puts the connection in error.
  ibv_wc_status probe_table(bool write, std::uint64_t offset);

 private:
  // Every verbs and rdma_cm object of the connection, declared in creation order so that they
  // are destroyed as rc_pingpong tears down (QP, CQs, MR, memory, PD, id, channel).
  struct Connection {
    rdma::EventChannel channel;
    std::optional<rdma::CmId> id;
    std::optional<rdma::ProtectionDomain> pd;
    MappedRegion region;
    std::optional<rdma::MemoryRegion> mr;
    MappedRegion table_buffer;  // a table subscriber's READ target (TableReader)
    std::optional<rdma::MemoryRegion> table_buffer_mr;
    std::optional<rdma::CompletionQueue> send_cq;
    std::optional<rdma::CompletionQueue> recv_cq;
    std::optional<rdma::CmQueuePair> qp;
    std::uint32_t max_inline = 0;
    std::uint32_t recv_depth = 0;
  };

  // One attempt: returns the connection, or throws; `geometry_max` receives the publisher's
  // largest ring when it refused ours for its size.
  std::unique_ptr<Connection> connect(std::uint64_t capacity, const Overrides& overrides,
                                      std::uint64_t& geometry_max);
  // Its steps, in order.
  rdma::Address resolve_route(Connection& c, const std::string& what);
  void register_ring(Connection& c, std::uint64_t capacity, const std::string& what);
  void create_queue_pair(Connection& c, std::uint64_t capacity, const std::string& what);
  void post_first_receives(Connection& c, const std::string& what);
  void handshake(Connection& c, std::uint64_t capacity, const Overrides& overrides,
                 const rdma::Address& dst, std::uint64_t& geometry_max, const std::string& what);
  WriteMode choose_mode(Connection& c);
  static void check_settings(const RdmaConfig& r);
  void prepare_credit_write(ControlBlock* control);
  void post_receives(std::uint32_t n) noexcept;
  void cm_loop(std::stop_token st) noexcept;
  std::size_t poll_cq(detail::TickSink sink, std::size_t limit) noexcept;
  [[nodiscard]] bool wants_table() const noexcept {
    return config_.start == StartMode::snapshot || config_.policy == SlowConsumerPolicy::conflate;
  }
  // Polled out of line through poll_with_table (a snapshot being delivered; conflate always).
  [[nodiscard]] bool table_polled() const noexcept {
    return delivery_ != nullptr && (config_.policy == SlowConsumerPolicy::conflate || in_snapshot());
  }
  void start_table();
  std::size_t poll_with_table(detail::TickSink sink, std::size_t limit) noexcept;
  std::size_t poll_cq_with_table(detail::TickSink sink, std::size_t limit) noexcept;
  // After a poll of our own (CQ polling, a table delivery): the credit when due, and once the
  // stream pauses, as Subscriber::poll does for a ring it polls inline.
  void settle_credit(std::uint64_t next, bool empty) noexcept {
    if (next >= credit_due_) {
      credit_due_ = return_credit(next);
    } else if (empty && next > last_credit_ && idle_.due(next)) [[unlikely]] {
      credit_due_ = return_credit(next);
    }
  }
  void note_loss(PeerLoss why) noexcept;

  SubscriberConfig config_;
  std::string where_;  // "channel 'md' at 10.77.1.1:7471"
  std::unique_ptr<Connection> conn_;
  WriteMode mode_ = WriteMode::cq;
  std::string mode_note_;
  std::uint64_t capacity_ = 0;
  std::uint64_t first_seq_ = 0;
  const ControlBlock* control_ = nullptr;
  Slot* slots_ = nullptr;
  bool closed_ = false;

  // Memory polling.
  RingReader reader_;
  detail::RingFeed feed_{reader_};  // what a table delivery rolls forward with

  // CQ polling's ring as a table delivery rolls forward with it (a snapshot's: conflate needs
  // memory polling). The publisher skips what does not fit our ring rather than overwrite it,
  // so CQ polling is never lapped: what it skips is lost, and a loss during the roll restarts it.
  class CqFeed final : public detail::TickFeed {
   public:
    explicit CqFeed(RcSubscriber& s) noexcept : s_(&s) {}
    std::uint64_t next_seq() const noexcept override { return s_->next_; }
    std::size_t poll(detail::TickSink sink, std::size_t limit) noexcept override {
      return s_->poll_cq(sink, limit);
    }
    bool lapped() const noexcept override { return false; }
    void pass_lap() noexcept override {}
    void skip_to(std::uint64_t seq) noexcept override {
      if (seq <= s_->next_) return;
      s_->lost_ += seq - s_->next_;
      ++s_->skips_;
      s_->next_ = seq;
    }
    std::uint64_t lost() const noexcept override { return s_->lost_; }
    void discount(std::uint64_t n, bool lost) noexcept override {
      s_->received_ -= n;
      if (lost) s_->lost_ += n;
    }
    std::uint64_t slack() const noexcept override { return s_->capacity_; }

   private:
    RcSubscriber* s_;
  };
  CqFeed cq_feed_{*this};
  [[nodiscard]] detail::TickFeed& table_feed() noexcept {
    return is_memory_mode(mode_) ? static_cast<detail::TickFeed&>(feed_) : cq_feed_;
  }

  // The last-value table (wants_table()): validated once from the accept.
  detail::TableGeometry table_geometry_;
  std::uint64_t table_addr_ = 0;
  std::uint32_t table_rkey_ = 0;
  std::unique_ptr<TableReader> table_reader_;
  std::unique_ptr<detail::TableDelivery> delivery_;

  // CQ polling (polling thread only).
  std::uint64_t next_ = 0;
  std::uint64_t limit_ = 0;      // every tick <= limit_ has been written (or skipped) for us
  std::uint64_t received_ = 0;
  std::uint64_t lost_ = 0;
  std::uint64_t skips_ = 0;  // runs of lost ticks
  bool in_gap_ = false;
  std::uint64_t credit_due_ = 0;
  std::uint32_t recv_used_ = 0;  // completions taken since the last repost
  std::uint32_t recv_batch_ = 0;
  std::vector<ibv_recv_wr> recv_wr_;  // a chain of recv_batch_ receives, prepared once
  std::vector<ibv_wc> wc_;

  // Credits (polling thread only).
  std::uint64_t credit_addr_ = 0;
  std::uint32_t credit_rkey_ = 0;
  std::uint64_t credit_every_ = 0;
  std::uint64_t last_credit_ = 0;
  detail::IdleCredit idle_;  // polls of our own
  std::uint64_t credits_posted_ = 0;
  std::uint64_t credits_completed_ = 0;
  std::uint32_t credit_depth_ = 64;
  ibv_send_wr credit_wr_{};
  ibv_sge credit_sge_{};
  SendCompletions send_;  // credit WRITEs and table READs

  // Liveness (state() is const and cheap: it remembers when the heartbeat last changed).
  // Clock cycles throughout.
  mutable SilenceWatch silence_;
  std::uint64_t silence_cycles_ = 0;
  std::uint64_t grace_cycles_ = 0;
  std::atomic<std::uint32_t> loss_{0};  // PeerLoss, from the CM thread or a failed post/poll

  detail::WakeCounter wakeups_;  // the CM thread's
  std::jthread cm_thread_;
};

}  // namespace tickrail::rdma::rc
