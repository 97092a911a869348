#include "transport/rdma/common/table_reader.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>

namespace tickrail::rdma {

void SendCompletions::reap() noexcept {
  ibv_wc wc[8];
  for (;;) {
    const int n = ibv_poll_cq(cq, 8, wc);
    if (n < 0) [[unlikely]] {
      failed = true;
      return;
    }
    for (int i = 0; i < n; ++i) {
      if (wc[i].status != IBV_WC_SUCCESS) [[unlikely]] {
        failed = true;  // retry exceeded, remote access error, or flushed: the QP is in error
        continue;
      }
      const std::uint64_t id = wc[i].wr_id;
      if ((id & kReadTag) != 0) {
        reads = std::max(reads, id & ~kReadTag);
      } else {
        others = std::max(others, id);
      }
    }
    if (n < 8) return;
  }
}

ibv_wc_status probe_table(ibv_qp* qp, ibv_cq* cq, void* local, std::uint32_t lkey, bool write,
                          std::uint64_t remote_addr, std::uint32_t rkey, std::uint64_t wr_id) {
  ibv_sge g{reinterpret_cast<std::uintptr_t>(local), write ? 8U : 64U, lkey};
  ibv_send_wr w{};
  w.wr_id = wr_id;
  w.sg_list = &g;
  w.num_sge = 1;
  w.opcode = write ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
  w.send_flags = IBV_SEND_SIGNALED;
  w.wr.rdma.remote_addr = remote_addr;
  w.wr.rdma.rkey = rkey;
  ibv_send_wr* bad = nullptr;
  if (ibv_post_send(qp, &w, &bad) != 0) return IBV_WC_GENERAL_ERR;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    ibv_wc wc{};
    if (ibv_poll_cq(cq, 1, &wc) == 1 && wc.wr_id == wr_id) return wc.status;
  }
  return IBV_WC_GENERAL_ERR;
}

TableReader::TableReader(ibv_qp* qp, SendCompletions& sq, std::uint64_t table_addr, std::uint32_t rkey, void* buffer,
                         std::uint32_t lkey)
    : qp_(qp),
      sq_(&sq),
      entries_addr_(table_addr + sizeof(TableHeader)),
      word_addr_(table_addr + offsetof(TableHeader, table_next)),
      rkey_(rkey),
      lkey_(lkey),
      word_(static_cast<std::uint64_t*>(buffer)),
      first_(reinterpret_cast<Slot*>(static_cast<std::byte*>(buffer) + kCacheLine)),
      second_(first_ + kChunk),
      again_(kChunk, 0) {}

void TableReader::restart() noexcept {
  // READs still in flight land in the buffer later: settled() waits for them before any new one.
  looking_ = false;
  step_ = Step::idle;
  n_again_ = 0;
}

bool TableReader::settled() noexcept {
  if (sq_->reads >= posted_) return true;
  sq_->reap();
  return sq_->reads >= posted_ && !sq_->failed;
}

void TableReader::add_read(std::uint64_t remote, void* local, std::uint32_t len) noexcept {
  ibv_send_wr& w = wr_[n_wr_];
  ibv_sge& g = sge_[n_wr_];
  ++n_wr_;
  g.addr = reinterpret_cast<std::uintptr_t>(local);
  g.length = len;
  g.lkey = lkey_;
  w = ibv_send_wr{};
  w.wr_id = SendCompletions::kReadTag | ++posted_;
  w.sg_list = &g;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_READ;
  w.wr.rdma.remote_addr = remote;
  w.wr.rdma.rkey = rkey_;
}

void TableReader::post() noexcept {
  // RC completes in order: the last READ's completion covers the chain.
  for (std::uint32_t i = 0; i < n_wr_; ++i) {
    wr_[i].next = i + 1 < n_wr_ ? &wr_[i + 1] : nullptr;
    wr_[i].send_flags = i + 1 == n_wr_ ? IBV_SEND_SIGNALED : 0;
  }
  ibv_send_wr* bad = nullptr;
  if (n_wr_ != 0 && ibv_post_send(qp_, wr_, &bad) != 0) [[unlikely]] failed_ = true;
  n_wr_ = 0;
}

std::uint64_t TableReader::look() noexcept {
  if (failed() || !settled()) return 0;
  if (!looking_) {
    looking_ = true;
    add_read(word_addr_, word_, sizeof *word_);
    post();
    return 0;
  }
  looking_ = false;
  return std::max<std::uint64_t>(*word_, 1);  // 0 would say "still looking"
}

std::size_t TableReader::copy(std::span<Tick> out, std::size_t cursor) noexcept {
  if (failed() || !settled()) return cursor;  // this chunk's READs are in flight
  const std::uint64_t remote = entries_addr_ + cursor * sizeof(Slot);
  switch (step_) {
    case Step::idle:
      chunk_start_ = cursor;
      chunk_n_ = std::min(kChunk, out.size() - cursor);
      add_read(remote, first_, static_cast<std::uint32_t>(chunk_n_ * sizeof(Slot)));
      post();
      step_ = Step::first;
      return cursor;
    case Step::first:
      // The second copy, read only now that the first has landed.
      add_read(remote, second_, static_cast<std::uint32_t>(chunk_n_ * sizeof(Slot)));
      post();
      step_ = Step::second;
      return cursor;
    case Step::second: return check_chunk(out, cursor);
    case Step::again: return check_again(out, cursor);
  }
  return cursor;
}

std::size_t TableReader::check_chunk(std::span<Tick> out, std::size_t cursor) noexcept {
  n_again_ = 0;
  for (std::size_t j = 0; j < chunk_n_; ++j) {
    Tick& t = out[cursor + j];
    switch (detail::check_copies(first_[j], second_[j], t)) {
      case detail::EntryRead::ok: break;
      case detail::EntryRead::empty: t.seq = 0; break;
      case detail::EntryRead::busy: again_[n_again_++] = static_cast<std::uint32_t>(j); break;
    }
  }
  if (n_again_ == 0) {
    step_ = Step::idle;
    return cursor + chunk_n_;
  }
  read_again();
  step_ = Step::again;
  return cursor;
}

// Entries whose copies disagreed (or were busy): each read again into its first copy, and
// compared with the copy before; the newer one is kept as the one to match next time.
std::size_t TableReader::check_again(std::span<Tick> out, std::size_t cursor) noexcept {
  std::size_t keep = 0;
  for (std::size_t k = 0; k < n_again_; ++k) {
    const std::uint32_t j = again_[k];
    if (k < n_posted_again_) {
      Tick& t = out[cursor + j];
      switch (detail::check_copies(first_[j], second_[j], t)) {
        case detail::EntryRead::ok: continue;
        case detail::EntryRead::empty: t.seq = 0; continue;
        case detail::EntryRead::busy: second_[j] = first_[j]; break;
      }
    }
    again_[keep++] = j;
  }
  n_again_ = keep;
  if (n_again_ == 0) {
    step_ = Step::idle;
    return cursor + chunk_n_;
  }
  read_again();
  return cursor;
}

void TableReader::read_again() noexcept {
  n_posted_again_ = std::min<std::size_t>(n_again_, kMaxReads);
  for (std::size_t k = 0; k < n_posted_again_; ++k) {
    const std::uint32_t j = again_[k];
    add_read(entries_addr_ + (chunk_start_ + j) * sizeof(Slot), &first_[j], sizeof(Slot));
  }
  post();
}

}  // namespace tickrail::rdma
