#include <catch2/catch.hpp>

#include <vector>

#include "tickrail/ring.hpp"

using namespace tickrail;

namespace {

Tick make(std::uint64_t i) {
  Tick t{};
  t.order_ref = i;
  t.price = static_cast<std::int64_t>(i * 3);
  t.aux = i * 0x9E3779B97F4A7C15ULL;
  t.qty = static_cast<std::uint32_t>(i);
  return t;
}

struct Ring {
  explicit Ring(std::uint64_t cap) : slots(cap) {}
  void write(std::uint64_t seq, bool may_be_read = false) {
    write_slot(slots[seq & (slots.size() - 1)], make(seq), seq, seq + 1000, may_be_read);
  }
  std::vector<Slot> slots;
  std::atomic<std::uint64_t> credit{0};
};

}  // namespace

TEST_CASE("readerDeliversCommittedTicksInOrderWithPayload") {
  Ring r(8);
  RingReader reader(r.slots.data(), 8, 1, &r.credit);
  for (std::uint64_t s = 1; s <= 5; ++s) r.write(s);
  std::vector<Tick> got;
  REQUIRE(reader.poll([&](const Tick& t) { got.push_back(t); }, 100) == 5);
  REQUIRE(got.size() == 5);
  for (std::uint64_t i = 0; i < 5; ++i) {
    CHECK(got[i].seq == i + 1);
    CHECK(got[i].order_ref == i + 1);
    CHECK(got[i].aux == (i + 1) * 0x9E3779B97F4A7C15ULL);
    CHECK(got[i].send_ts == i + 1 + 1000);  // write_slot stamps the send time
  }
  REQUIRE(r.credit.load() == 6);
  REQUIRE(reader.poll([](const Tick&) {}, 100) == 0);
  REQUIRE(reader.received() == 5);
  REQUIRE(reader.lost() == 0);
}

TEST_CASE("readerHonoursTheBatchLimit") {
  Ring r(16);
  RingReader reader(r.slots.data(), 16, 1, &r.credit);
  for (std::uint64_t s = 1; s <= 10; ++s) r.write(s);
  REQUIRE(reader.poll([](const Tick&) {}, 4) == 4);
  REQUIRE(r.credit.load() == 5);
  REQUIRE(reader.poll([](const Tick&) {}, 4) == 4);
  REQUIRE(reader.poll([](const Tick&) {}, 4) == 2);
  REQUIRE(reader.next_seq() == 11);
}

TEST_CASE("emptyRingAndStaleSlotsDeliverNothing") {
  Ring r(4);
  // A previous occupant's ticks (sequences below our start) are not ours.
  for (std::uint64_t s = 1; s <= 4; ++s) r.write(s);
  RingReader reader(r.slots.data(), 4, 5, &r.credit);
  REQUIRE(reader.poll([](const Tick&) {}, 10) == 0);
  REQUIRE(reader.lost() == 0);
  r.write(5);
  std::uint64_t seen = 0;
  REQUIRE(reader.poll([&](const Tick& t) { seen = t.seq; }, 10) == 1);
  REQUIRE(seen == 5);
}

TEST_CASE("lappedReaderCountsExactlyWhatItLost") {
  Ring r(8);
  RingReader reader(r.slots.data(), 8, 1, &r.credit);
  // The writer runs 20 ticks ahead of a reader that has consumed nothing: ticks 1..12 are gone.
  for (std::uint64_t s = 1; s <= 20; ++s) r.write(s, true);
  std::vector<std::uint64_t> seqs;
  const auto n = reader.poll([&](const Tick& t) { seqs.push_back(t.seq); }, 100);
  REQUIRE(n == 8);
  REQUIRE(seqs.front() == 13);
  REQUIRE(seqs.back() == 20);
  REQUIRE(reader.lost() == 12);
  REQUIRE(reader.received() + reader.lost() == 20);
  REQUIRE(reader.laps() >= 1);
}

TEST_CASE("lapMidwayKeepsReceivedPlusLostEqualToPublished") {
  Ring r(4);
  RingReader reader(r.slots.data(), 4, 1, &r.credit);
  std::uint64_t published = 0;
  std::uint64_t last = 0;
  bool in_order = true;
  for (int round = 0; round < 50; ++round) {
    const std::uint64_t burst = static_cast<std::uint64_t>(round % 7) + 1;  // sometimes > capacity
    for (std::uint64_t k = 0; k < burst; ++k) r.write(++published, true);
    reader.poll([&](const Tick& t) {
      in_order = in_order && t.seq > last;
      last = t.seq;
    }, 2);
  }
  while (reader.poll([&](const Tick& t) { in_order = in_order && t.seq > last; last = t.seq; }, 100) != 0) {
  }
  REQUIRE(in_order);
  REQUIRE(reader.received() + reader.lost() == published);
  REQUIRE(reader.lost() > 0);
}

TEST_CASE("lapsCountWholeRingsOvertakenNotSkipSteps") {
  // A reader that keeps up at a third of the writer's pace: once lapped, it is overtaken again
  // by a few ticks at every poll, so it skips often, but the writer gains only one ring's
  // worth of ticks per lap.
  constexpr std::uint64_t kCap = 16;
  Ring r(kCap);
  RingReader reader(r.slots.data(), kCap, 1, &r.credit);
  std::uint64_t published = 0;
  for (int round = 0; round < 600; ++round) {
    for (int k = 0; k < 3; ++k) r.write(++published, true);
    reader.poll([](const Tick&) {}, 1);
  }
  const std::uint64_t lost = reader.lost();
  REQUIRE(lost > 8 * kCap);
  // The publisher is lost + (at most a ring of) unread ticks ahead: a lap per whole ring.
  const std::uint64_t lead = published - reader.received();
  REQUIRE(lead >= lost);
  REQUIRE(lead - lost <= kCap);
  CHECK(reader.laps() == (lost + kCap - 1) / kCap);
  CHECK(reader.laps() <= lead / kCap);
  CHECK(reader.laps() + 1 >= lead / kCap);
  // The skip steps are many more than the laps, and counted apart.
  CHECK(reader.skips() > 4 * reader.laps());
}

TEST_CASE("slotBeingOverwrittenIsNotDelivered") {
  Ring r(4);
  RingReader reader(r.slots.data(), 4, 1, &r.credit);
  r.write(1);
  r.write(2);
  // The writer zeroes the commit word first when the slot may be read: a reader sees "not yet".
  std::atomic_ref<std::uint64_t>(r.slots[2].words[kSeqWord]).store(0);
  REQUIRE(reader.poll([](const Tick&) {}, 10) == 1);  // tick 1 only
  REQUIRE(reader.next_seq() == 2);
}

TEST_CASE("garbageSequenceStillMakesProgress") {
  Ring r(8);
  RingReader reader(r.slots.data(), 8, 1, &r.credit);
  std::atomic_ref<std::uint64_t>(r.slots[1].words[kSeqWord]).store(3);  // below capacity
  reader.poll([](const Tick&) {}, 1);
  REQUIRE(reader.next_seq() > 1);
  REQUIRE(reader.lost() == reader.next_seq() - 1);
}

// Subscriber::poll returns early when has_next() is false, so it must be true whenever poll()
// would deliver or move, and false only where poll() would do nothing at all.
TEST_CASE("hasNextIsFalseExactlyWhenAPollWouldDoNothing") {
  Ring r(4);
  RingReader reader(r.slots.data(), 4, 1, &r.credit);
  const auto nothing_happens = [&] {
    const std::uint64_t next = reader.next_seq(), lost = reader.lost();
    return reader.poll([](const Tick&) {}, 10) == 0 && reader.next_seq() == next && reader.lost() == lost;
  };
  CHECK_FALSE(reader.has_next());  // never written
  CHECK(nothing_happens());
  r.write(1);
  CHECK(reader.has_next());  // committed
  REQUIRE(reader.poll([](const Tick&) {}, 10) == 1);
  CHECK_FALSE(reader.has_next());  // slot 2 never written
  r.write(2);
  std::atomic_ref<std::uint64_t>(r.slots[2].words[kSeqWord]).store(0);  // being overwritten
  CHECK_FALSE(reader.has_next());
  CHECK(nothing_happens());
  // A stale occupant (the last lap's tick): nothing new.
  for (std::uint64_t s = 2; s <= 5; ++s) r.write(s);
  REQUIRE(reader.poll([](const Tick&) {}, 10) == 4);  // 2..5
  CHECK(reader.next_seq() == 6);
  CHECK_FALSE(reader.has_next());  // slot 2 holds tick 2 of the last lap
  CHECK(nothing_happens());
  // Lapped: slot 2 holds tick 10, ahead of the 6 expected; a reader that stops at laps too.
  for (std::uint64_t s = 6; s <= 10; ++s) r.write(s, true);
  reader.stop_at_laps(true);
  CHECK(reader.has_next());
  REQUIRE(reader.poll([](const Tick&) {}, 10) == 0);
  CHECK(reader.lapped());
  reader.stop_at_laps(false);
  reader.pass_lap();
  CHECK(reader.has_next());
  CHECK(reader.poll([](const Tick&) {}, 10) > 0);
  CHECK_FALSE(reader.has_next());
}

TEST_CASE("ringCapacityValidation") {
  CHECK(is_valid_ring_capacity(2));
  CHECK(is_valid_ring_capacity(1024));
  CHECK_FALSE(is_valid_ring_capacity(0));
  CHECK_FALSE(is_valid_ring_capacity(1));
  CHECK_FALSE(is_valid_ring_capacity(1000));
  CHECK_FALSE(is_valid_ring_capacity(std::uint64_t{1} << 31));
}
