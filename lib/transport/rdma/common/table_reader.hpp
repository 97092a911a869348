// A subscriber's side of an RDMA publisher's last-value table (RC: its connection; UD: its
// recovery connection): the table read with one-sided RDMA READ into a private registered
// buffer, as a TableSource for TableDelivery (which runs the same algorithm as over shared
// memory: table_delivery.hpp).
//
// An RDMA READ of a slot reads its words in no promised order, so the seqlock's re-check around
// one copy is not possible. Each chunk of entries is read twice instead, the second READ posted
// only once the first has completed; an entry whose two copies are identical and not busy is the
// publisher's write (docs/state.md says why); any other is read again, alone, and compared with
// its previous copy, until it passes (bounded by the delivery's stall budget).
//
// Polling thread only. Each call posts at most one chain of READs and checks at most one chunk:
// no allocation, no system call of ours (ibv_post_send is one on rxe: docs/state.md).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <span>
#include <vector>

#include "transport/rdma/common/table_region.hpp"
#include "transport/table_delivery.hpp"

namespace tickrail::rdma {

// The table's READs share a send queue with the subscriber's other work (RC: its credit WRITEs;
// UD's recovery link: its READs of the history): both kinds of completion are reaped here, from
// that queue's one CQ.
struct SendCompletions {
  static constexpr std::uint64_t kReadTag = std::uint64_t{1} << 63;  // wr_id of a table READ
  ibv_cq* cq = nullptr;
  std::uint64_t others = 0;   // the highest other work request completed (its wr_id)
  std::uint64_t reads = 0;    // the highest table READ completed (its number, the tag cleared)
  bool failed = false;        // a completion in error: the QP is gone
  void reap() noexcept;
};

// Tests only: one signalled RDMA WRITE of 8 bytes, or READ of 64, between `local` (registered
// with `lkey`) and `remote_addr` (with `rkey`), posted on `qp` as `wr_id`. Waits up to 5 s on
// `cq` for that completion, taking any other it finds there, and returns its status
// (IBV_WC_GENERAL_ERR if it could not post or none came). A failed access puts the QP in error.
[[nodiscard]] ibv_wc_status probe_table(ibv_qp* qp, ibv_cq* cq, void* local, std::uint32_t lkey, bool write,
                                        std::uint64_t remote_addr, std::uint32_t rkey, std::uint64_t wr_id);

class TableReader final : public detail::TableSource {
 public:
  static constexpr std::size_t kChunk = 4096;      // entries per READ (256 KiB)
  static constexpr std::uint32_t kMaxReads = 16;   // READs of single entries posted at once
  // The local buffer: the table_next word's line, then the two copies of a chunk.
  static constexpr std::size_t kBufferBytes = kCacheLine + 2 * kChunk * sizeof(Slot);

  // `table_addr`/`rkey`: the granted table region (validated: granted_table); `buffer`:
  // kBufferBytes registered for local write with `lkey`.
  TableReader(ibv_qp* qp, SendCompletions& sq, std::uint64_t table_addr, std::uint32_t rkey,
              void* buffer, std::uint32_t lkey);

  void restart() noexcept override;
  std::uint64_t look() noexcept override;
  std::size_t copy(std::span<Tick> out, std::size_t cursor) noexcept override;

  [[nodiscard]] bool failed() const noexcept { return failed_ || sq_->failed; }

 private:
  enum class Step : std::uint8_t { idle, first, second, again };
  bool settled() noexcept;  // every READ posted has completed
  void add_read(std::uint64_t remote, void* local, std::uint32_t len) noexcept;
  void post() noexcept;
  std::size_t check_chunk(std::span<Tick> out, std::size_t cursor) noexcept;
  std::size_t check_again(std::span<Tick> out, std::size_t cursor) noexcept;
  void read_again() noexcept;

  ibv_qp* qp_;
  SendCompletions* sq_;
  std::uint64_t entries_addr_;  // remote: entry 0
  std::uint64_t word_addr_;     // remote: table_next
  std::uint32_t rkey_;
  std::uint32_t lkey_;
  std::uint64_t* word_;         // local copies
  Slot* first_;
  Slot* second_;
  std::uint64_t posted_ = 0;    // READs posted (numbered from 1)
  bool looking_ = false;        // a READ of table_next is posted
  bool failed_ = false;
  Step step_ = Step::idle;
  std::size_t chunk_start_ = 0;  // the chunk being read: its first entry
  std::size_t chunk_n_ = 0;      // and how many
  std::vector<std::uint32_t> again_;  // chunk entries to read again (allocated once)
  std::size_t n_again_ = 0;
  std::size_t n_posted_again_ = 0;    // the first of them, read by the READs in flight
  std::uint32_t n_wr_ = 0;
  ibv_send_wr wr_[kMaxReads]{};
  ibv_sge sge_[kMaxReads]{};
};

}  // namespace tickrail::rdma
