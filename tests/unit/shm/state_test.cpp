// The last-value table and a subscriber's late join with the current state (start = snapshot).
#include <catch2/catch.hpp>

#include <array>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "core/last_value.hpp"
#include "tickrail/clock.hpp"
#include "transport/table_delivery.hpp"
#include "shm_test_util.hpp"
#include "tickrail/error.hpp"
#include "tickrail/state.hpp"
#include "tickrail/tools/config_file.hpp"
#include "../../market_stream.hpp"
#include "../../state_checks.hpp"

using namespace tickrail;
using namespace tickrail::test;
using namespace std::chrono_literals;

namespace {

// Every word of the tick follows from its sequence number: a torn copy shows.
Tick derived(std::uint64_t seq) {
  Tick t{};
  t.exch_ts = seq * 3;
  t.order_ref = seq ^ 0x5555'5555'5555'5555ULL;
  t.price = static_cast<std::int64_t>(seq * 7);
  t.aux = ~seq;
  t.qty = static_cast<std::uint32_t>(seq);
  t.aux_qty = static_cast<std::uint32_t>(seq >> 32) + 1;
  t.instrument = 0;
  t.kind = TickKind::Quote;
  return t;
}
bool consistent(const Tick& t) {
  const std::uint64_t s = t.seq;
  return t.exch_ts == s * 3 && t.order_ref == (s ^ 0x5555'5555'5555'5555ULL) &&
         t.price == static_cast<std::int64_t>(s * 7) && t.aux == ~s &&
         t.qty == static_cast<std::uint32_t>(s) && t.aux_qty == static_cast<std::uint32_t>(s >> 32) + 1 &&
         t.kind == TickKind::Quote && t.instrument == 0;
}

PublisherConfig table_publisher(const std::string& channel) {
  PublisherConfig pc;
  pc.channel = channel;
  pc.ring_capacity = 4096;
  pc.state.enabled = true;
  pc.state.capacity = 1000;
  return pc;
}

}  // namespace

TEST_CASE("a table entry is never seen torn while the publisher rewrites it", "[state]") {
  std::vector<Slot> entries(detail::TableGeometry{1, 7}.entries());
  detail::LastValueWriter w(entries.data(), {1, 7});
  PublisherCounters c;
  constexpr std::uint64_t kWrites = 2'000'000;
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (std::uint64_t s = 1; s <= kWrites; ++s) {
      const Tick t = derived(s);
      w.update(std::span<const Tick>(&t, 1), s, 0, c);
    }
    done.store(true, std::memory_order_release);
  });
  std::uint64_t ok = 0, busy = 0, torn = 0, last = 0, backwards = 0;
  while (!done.load(std::memory_order_acquire)) {
    Tick t;
    switch (detail::read_entry(entries[0], t, 1)) {
      case detail::EntryRead::ok:
        ++ok;
        if (!consistent(t)) ++torn;
        if (t.seq < last) ++backwards;
        last = t.seq;
        break;
      case detail::EntryRead::busy: ++busy; break;
      case detail::EntryRead::empty: break;
    }
  }
  writer.join();
  Tick t;
  REQUIRE(detail::read_entry(entries[0], t) == detail::EntryRead::ok);
  CHECK(t.seq == kWrites);
  CHECK(consistent(t));
  CHECK(c.state_entries == 1);
  INFO("reads ok " << ok << ", busy or torn and retried " << busy);
  CHECK(torn == 0);
  CHECK(backwards == 0);
}

TEST_CASE("the table keeps the latest tick per instrument and class, and counts what it cannot keep", "[state]") {
  PublisherConfig pc = table_publisher(test::unique_channel("state-keep"));
  pc.state.capacity = 10;
  pc.state.trade = false;
  Publisher pub(pc);
  Tick q{};
  q.kind = TickKind::Quote;
  q.instrument = 3;
  q.price = 100;
  (void)pub.publish(q);
  q.price = 101;
  (void)pub.publish(q);
  Tick tr = q;
  tr.kind = TickKind::Trade;
  (void)pub.publish(tr);  // trades are not kept here
  Tick far = q;
  far.instrument = 10;  // beyond the capacity
  (void)pub.publish(far);
  Tick st{};
  st.kind = TickKind::Status;
  st.instrument = 9;
  (void)pub.publish(st);

  const auto quote = pub.last_value(3, StateClass::quote);
  REQUIRE(quote);
  CHECK(quote->price == 101);
  CHECK(quote->seq == 2);
  CHECK_FALSE(pub.last_value(3, StateClass::trade));
  CHECK_FALSE(pub.last_value(10, StateClass::quote));
  CHECK_FALSE(pub.last_value(4, StateClass::quote));
  REQUIRE(pub.last_value(9, StateClass::status));
  CHECK(pub.last_value(9, StateClass::status)->seq == 5);
  CHECK(pub.counters().state_entries == 2);
  CHECK(pub.counters().state_beyond == 1);
}

TEST_CASE("start = snapshot on a channel without a table is refused at construction", "[state]") {
  PublisherConfig pc;
  pc.channel = test::unique_channel("state-none");
  Publisher pub(pc);
  SubscriberConfig sc;
  sc.channel = pc.channel;
  sc.start = StartMode::snapshot;
  refused(sc, Errc::unsupported, "last-value table", pc.channel);
  sc.start = StartMode::live;
  Subscriber live(sc);  // the same channel serves live subscribers
  CHECK_FALSE(live.in_snapshot());
}

TEST_CASE("a snapshot of an empty table delivers nothing and goes live at once", "[state]") {
  const PublisherConfig pc = table_publisher(test::unique_channel("state-empty"));
  Publisher pub(pc);
  Tick add{};
  add.kind = TickKind::Add;
  (void)pub.publish(add);  // a tick the table does not keep
  SubscriberConfig sc;
  sc.channel = pc.channel;
  sc.start = StartMode::snapshot;
  Subscriber sub(sc);
  REQUIRE(test::wait_for_subscribers(pub, 1));
  REQUIRE(sub.wait_active(5s));
  for (int i = 0; i < 3; ++i) (void)pub.publish(add);
  std::vector<Tick> got;
  REQUIRE(test::eventually([&] {
    (void)sub.poll([&](const Tick& t) { got.push_back(t); });
    return got.size() >= 3;
  }));
  CHECK_FALSE(sub.in_snapshot());
  CHECK(got.size() == 3);
  for (const Tick& t : got) CHECK((t.flags & kTickFromTable) == 0);
  CHECK(got.front().seq == 2);
  CHECK(sub.counters().from_table == 0);
}

// The bit says "from the table" to the app: a publisher (any process the subscriber trusts) that
// sets it on a live tick must not make the tick pass for a table entry.
TEST_CASE("a live tick never carries kTickFromTable, whatever its publisher wrote", "[state]") {
  for (const auto policy : {SlowConsumerPolicy::block, SlowConsumerPolicy::conflate}) {
    const PublisherConfig pc = table_publisher(test::unique_channel("state-flag"));
    Publisher pub(pc);
    SubscriberConfig sc;
    sc.channel = pc.channel;
    sc.policy = policy;
    Subscriber sub(sc);
    REQUIRE(test::wait_for_subscribers(pub, 1));
    REQUIRE(sub.wait_active(5s));
    Tick t = market_tick(0);
    t.flags = static_cast<std::uint16_t>(kTickFromTable | 0x41);
    REQUIRE(pub.publish(t).ok());
    std::vector<Tick> got;
    REQUIRE(test::eventually([&] {
      (void)sub.poll([&](const Tick& x) { got.push_back(x); });
      return !got.empty();
    }));
    REQUIRE(got.size() == 1);
    CHECK(got[0].flags == 0x41);
    CHECK(got[0].instrument == t.instrument);
    CHECK(sub.counters().from_table == 0);
  }
}

// The acceptance check: a subscriber that joins after 1,000,000 ticks over 1,000 instruments,
// while the publisher keeps publishing, ends with the view of one present from the start, and
// of the publisher's table.
TEST_CASE("a late joiner's snapshot and live stream give the view of a subscriber there from the start", "[state]") {
  const PublisherConfig pc = table_publisher(test::unique_channel("state-join"));
  Publisher pub(pc);
  SubscriberConfig sc;
  sc.channel = pc.channel;
  sc.attach_timeout = 5s;
  Subscriber early(sc);
  REQUIRE(test::wait_for_subscribers(pub, 1));
  REQUIRE(early.wait_active(5s));

  constexpr std::uint64_t kTotal = 2'000'000, kJoinAfter = 1'000'000;
  std::atomic<std::uint64_t> published{0};
  std::atomic<bool> stop{false}, late_attached{false};
  // Publishes kTotal ticks, waiting a little past kJoinAfter for the late subscriber to attach
  // (so that it joins mid-stream), then serves subscriber changes until told to stop.
  std::thread publisher([&] {
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    std::array<Tick, 16> batch{};
    std::uint64_t i = 0;
    while (!stop.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline) {
      if (i >= kTotal || (i >= kJoinAfter + 50'000 && !late_attached.load(std::memory_order_acquire))) {
        pub.service();
        std::this_thread::sleep_for(100us);
        continue;
      }
      const std::size_t n = std::min<std::uint64_t>(batch.size(), kTotal - i);
      for (std::size_t j = 0; j < n; ++j) batch[j] = market_tick(i + j);
      const PublishResult r = pub.publish(std::span<const Tick>(batch.data(), n));
      i += r.published;
      published.store(i, std::memory_order_release);
    }
  });

  View early_view, late_view;
  std::uint64_t early_next = 1;
  bool early_in_order = true;
  auto drain_early = [&] {
    return early.poll([&](const Tick& t) {
      early_in_order = early_in_order && t.seq == early_next;
      early_next = t.seq + 1;
      apply(early_view, t);
    });
  };
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (published.load(std::memory_order_acquire) < kJoinAfter && std::chrono::steady_clock::now() < deadline) {
    (void)drain_early();
  }
  REQUIRE(published.load() >= kJoinAfter);

  SubscriberConfig lc = sc;
  lc.start = StartMode::snapshot;
  // The handshake needs the publisher's conductor, and the publisher needs the early subscriber
  // drained: attach from another thread.
  std::unique_ptr<Subscriber> late;
  std::thread attach([&] {
    late = std::make_unique<Subscriber>(lc);
    late_attached.store(true, std::memory_order_release);
  });
  while (!late_attached.load(std::memory_order_acquire) && std::chrono::steady_clock::now() < deadline) {
    if (drain_early() == 0) std::this_thread::sleep_for(20us);
  }
  attach.join();
  REQUIRE(late != nullptr);

  std::uint64_t snapshot_ticks = 0, snapshot_max = 0, live_first = 0, live_next = 0;
  bool live_in_order = true, flag_after_live = false, mixed = false, snapshot_said = true;
  auto drain_late = [&] {
    std::uint64_t table_in_poll = 0, live_in_poll = 0;
    const std::size_t n = late->poll([&](const Tick& t) {
      if ((t.flags & kTickFromTable) != 0) {
        ++table_in_poll;
        snapshot_said = snapshot_said && late->in_snapshot();
        flag_after_live = flag_after_live || live_first != 0;
        ++snapshot_ticks;
        snapshot_max = std::max(snapshot_max, t.seq);
      } else {
        ++live_in_poll;
        if (live_first == 0) live_first = live_next = t.seq;
        live_in_order = live_in_order && t.seq == live_next;
        live_next = t.seq + 1;
      }
      apply(late_view, t);
    });
    mixed = mixed || (table_in_poll != 0 && live_in_poll != 0);
    return n;
  };
  while ((early_next <= kTotal || late->next_sequence() <= kTotal || late->in_snapshot()) &&
         std::chrono::steady_clock::now() < deadline) {
    const std::size_t n = drain_early() + drain_late();
    if (n == 0 && published.load() >= kTotal) std::this_thread::sleep_for(50us);
  }
  stop.store(true);
  publisher.join();

  REQUIRE(published.load() == kTotal);
  CHECK(early_in_order);
  CHECK(early_next == kTotal + 1);
  CHECK_FALSE(late->in_snapshot());
  INFO("snapshot: " << snapshot_ticks << " entries up to sequence " << snapshot_max
                    << ", live from " << live_first);
  CHECK(snapshot_ticks > 0);
  CHECK(snapshot_ticks <= 3000);
  CHECK_FALSE(flag_after_live);
  CHECK_FALSE(mixed);  // no poll delivers table and live ticks together
  CHECK(snapshot_said);  // in_snapshot() was true while its ticks were delivered
  CHECK(live_first == snapshot_max + 1);  // nothing reflected twice, nothing after it missed
  CHECK(live_in_order);
  CHECK(live_next == kTotal + 1);
  CHECK(snapshot_max >= kJoinAfter);
  CHECK(snapshot_max < kTotal);  // joined mid-stream
  const SubscriberCounters lcnt = late->counters();
  CHECK(lcnt.from_table == snapshot_ticks);
  CHECK(lcnt.received == kTotal + 1 - live_first);
  CHECK(lcnt.lost == 0);

  // Every instrument and class: the three views agree.
  REQUIRE(early_view.size() == late_view.size());
  std::size_t compared = 0;
  for (const auto& [key, tick] : early_view) {
    const auto it = late_view.find(key);
    REQUIRE(it != late_view.end());
    CHECK(same(tick, it->second));
    const auto table = pub.last_value(key.first, static_cast<StateClass>(key.second));
    REQUIRE(table);
    CHECK(same(tick, *table));
    ++compared;
  }
  CHECK(compared == early_view.size());
  CHECK(compared == 3000);  // every instrument has every class by then
  CHECK(pub.counters().state_entries == 3000);
}

TEST_CASE("the [state] section and start key are read from a config file and checked", "[state]") {
  const std::string dir = std::filesystem::temp_directory_path().string();
  const std::string path = dir + "/tickrail-state-test-" + std::to_string(::getpid()) + ".toml";
  {
    std::ofstream(path) << "[state]\nenabled = true\ncapacity = 4096\ntrade = false\n"
                           "[subscriber]\nstart = \"snapshot\"\n";
  }
  const PublisherConfig p = load_publisher_config(path);
  CHECK(p.state.enabled);
  CHECK(p.state.capacity == 4096);
  CHECK_FALSE(p.state.trade);
  CHECK(p.state.quote);
  {
    std::ofstream(path) << "[state]\nenabled = true\ncapacity = 0\n";
  }
  try {
    (void)load_publisher_config(path);
    FAIL("loaded");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("state.capacity") && Catch::Contains("1..1048576"));
  }
  {
    std::ofstream(path) << "[subscriber]\nstart = \"snapshot\"\n";
  }
  CHECK(load_subscriber_config(path).start == StartMode::snapshot);
  {
    std::ofstream(path) << "[subscriber]\nstart = \"later\"\n";
  }
  try {
    (void)load_subscriber_config(path);
    FAIL("loaded");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("start") && Catch::Contains("live or snapshot"));
  }
  std::remove(path.c_str());
}

// policy = conflate: a subscriber that stops reading while the stream goes on is lapped; it then
// catches up through the table, and ends with the view of one that kept up, its loss counted.
TEST_CASE("a conflate subscriber that stops reading ends with the view of one that kept up", "[state]") {
  const PublisherConfig pc = table_publisher(test::unique_channel("state-conflate"));
  Publisher pub(pc);
  SubscriberConfig sc;
  sc.channel = pc.channel;
  Subscriber keeper(sc);
  SubscriberConfig cc = sc;
  cc.policy = SlowConsumerPolicy::conflate;
  Subscriber slow(cc);
  REQUIRE(test::wait_for_subscribers(pub, 2));
  REQUIRE(keeper.wait_active(5s));
  REQUIRE(slow.wait_active(5s));

  constexpr std::uint64_t kTotal = 2'000'000, kPauseFrom = 500'000, kPauseTo = 1'500'000;
  std::atomic<std::uint64_t> published{0};
  std::atomic<bool> stop{false};
  std::thread publisher([&] {
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    std::array<Tick, 16> batch{};
    std::uint64_t i = 0;
    while (i < kTotal && !stop.load(std::memory_order_relaxed) && std::chrono::steady_clock::now() < deadline) {
      const std::size_t n = std::min<std::uint64_t>(batch.size(), kTotal - i);
      for (std::size_t j = 0; j < n; ++j) batch[j] = market_tick(i + j);
      i += pub.publish(std::span<const Tick>(batch.data(), n)).published;
      published.store(i, std::memory_order_release);
    }
  });

  View keeper_view, slow_view;
  std::uint64_t slow_live = 0, slow_table = 0, slow_next_live = 0;
  bool slow_in_order = true;
  std::vector<bool> seen(kTotal + 1, false);
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while ((keeper.next_sequence() <= kTotal || slow.next_sequence() <= kTotal) &&
         std::chrono::steady_clock::now() < deadline) {
    std::size_t n = keeper.poll([&](const Tick& t) { apply(keeper_view, t); });
    const std::uint64_t p = published.load(std::memory_order_acquire);
    if (p < kPauseFrom || p >= kPauseTo) {
      n += slow.poll([&](const Tick& t) {
        if ((t.flags & kTickFromTable) != 0) {
          CHECK_FALSE(slow.in_snapshot());  // a conflation's, not a snapshot's
          ++slow_table;
        } else {
          slow_in_order = slow_in_order && t.seq >= slow_next_live;
          slow_next_live = t.seq + 1;
          ++slow_live;
          if (t.seq <= kTotal) seen[t.seq] = true;
        }
        apply(slow_view, t);
      });
    }
    if (n == 0 && p >= kTotal) std::this_thread::sleep_for(50us);
  }
  stop.store(true);
  publisher.join();
  REQUIRE(published.load() == kTotal);

  const SubscriberCounters c = slow.counters();
  INFO("slow subscriber: " << c.received << " live, " << c.lost << " lost, " << c.from_table
                           << " from the table in " << c.conflations << " conflations");
  CHECK(c.conflations >= 1);
  CHECK(c.from_table == slow_table);
  CHECK(c.received == slow_live);
  CHECK(slow_in_order);
  CHECK(c.lost > 0);
  // Exactly what it did not get live is counted lost: received + lost adds up to the stream.
  CHECK(c.received + c.lost == kTotal);
  std::uint64_t missed = 0, trades_missed = 0;
  for (std::uint64_t s = 1; s <= kTotal; ++s) {
    if (seen[s]) continue;
    ++missed;
    if (state_class_of(market_tick(s - 1).kind) == static_cast<int>(StateClass::trade)) ++trades_missed;
  }
  CHECK(missed == c.lost);
  CHECK(trades_missed > 0);
  CHECK(keeper.counters().lost == 0);

  REQUIRE(keeper_view.size() == slow_view.size());
  for (const auto& [key, tick] : keeper_view) {
    const auto it = slow_view.find(key);
    REQUIRE(it != slow_view.end());
    CHECK(same(tick, it->second));
  }
}

// Step by step, in one thread: lapped again while it rolls its copy forward, a conflating
// subscriber starts over from where the publisher is, and still ends exact.
TEST_CASE("a conflation lapped while it rolls forward starts over and ends exact", "[state]") {
  PublisherConfig pc = table_publisher(test::unique_channel("state-relap"));
  pc.ring_capacity = 64;
  Publisher pub(pc);
  SubscriberConfig cc;
  cc.channel = pc.channel;
  cc.policy = SlowConsumerPolicy::conflate;
  Subscriber slow(cc);
  REQUIRE(test::wait_for_subscribers(pub, 1));
  REQUIRE(slow.wait_active(5s));
  std::uint64_t next = 0;
  auto publish = [&](std::uint64_t n) {
    for (std::uint64_t k = 0; k < n; ++k, ++next) REQUIRE(pub.publish(market_tick(next)).ok());
  };
  View view;
  std::uint64_t live = 0, from_table = 0;
  auto poll = [&] {
    return slow.poll([&](const Tick& t) {
      ((t.flags & kTickFromTable) != 0 ? from_table : live) += 1;
      apply(view, t);
    });
  };
  publish(200);                  // laps it
  CHECK(poll() == 0);            // finds the lap: skips to 201, the conflation starts
  publish(30);                   // 201..230: in the table, and in the ring for the roll forward
  CHECK(poll() == 0);            // copies the table: E = 230
  publish(200);                  // 231..430 overwrite 201..230 in the ring
  CHECK(poll() == 0);            // lapped in the roll forward: starts over at 431
  for (int i = 0; i < 10 && poll() == 0; ++i) {
  }
  CHECK(from_table > 0);
  publish(5);
  for (int i = 0; i < 10; ++i) (void)poll();
  const SubscriberCounters c = slow.counters();
  CHECK(c.conflations == 1);
  CHECK(c.from_table == from_table);
  CHECK(c.received == live);
  CHECK(live == 5);
  CHECK(c.received + c.lost == next);
  CHECK(slow.next_sequence() == next + 1);
  std::size_t kept = 0;
  for (std::uint32_t i = 0; i < 1000; ++i) {
    for (int k = 0; k < 3; ++k) {
      const auto table = pub.last_value(i, static_cast<StateClass>(k));
      const auto it = view.find({i, k});
      REQUIRE(table.has_value() == (it != view.end()));
      if (table) {
        CHECK(same(*table, it->second));
        ++kept;
      }
    }
  }
  CHECK(kept > 0);
}

// A publisher killed in the middle of writing an entry leaves it busy forever: the delivery is
// given up after its stall budget, counted, and the subscriber goes on live.
TEST_CASE("a snapshot stuck on an entry left half-written is given up and counted", "[state]") {
  const detail::TableGeometry g{4, 7};
  std::vector<Slot> table(g.entries());
  std::vector<Slot> ring(8);
  std::atomic<std::uint64_t> table_next{1};
  std::atomic<std::uint64_t> credit{0};
  // Entry (1, quote) holds tick 1; entry (2, quote) was being rewritten when its writer died.
  Tick q{};
  q.kind = TickKind::Quote;
  q.instrument = 1;
  write_slot(table[1 * kStateClasses], q, 1, 0, false);
  ring_detail::store_relaxed(table[2 * kStateClasses].words[kSeqWord], detail::kEntryBusy);
  write_slot(ring[1 & 7], q, 1, 0, false);
  table_next.store(2);
  RingReader reader(ring.data(), ring.size(), 1, &credit);
  detail::MappedTableSource source(table.data(), &table_next);
  detail::TableDelivery d(g, source, Clock::instance().ns_to_cycles(1e6));  // 1 ms
  detail::RingFeed feed(reader);
  d.begin(detail::TableDelivery::Why::snapshot, feed);
  std::size_t delivered = 0;
  auto sink_fn = [&](const Tick&) { ++delivered; };
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (d.busy() && std::chrono::steady_clock::now() < deadline) {
    (void)d.step(feed, detail::TickSink(sink_fn), 256);
  }
  CHECK_FALSE(d.busy());
  CHECK(d.abandoned() == 1);
  CHECK(delivered == 0);
  // The ring goes on live from where it is.
  std::size_t live = 0;
  auto count = [&](const Tick& t) { live += t.seq == 1; };
  CHECK(reader.poll(count, 16) == 1);
  CHECK(live == 1);
}

// A ring lapped each time it is read: what a publisher that keeps its table's entries just ahead
// of the ring does on purpose (or a feed too fast for the ring).
class LappingFeed final : public detail::TickFeed {
 public:
  std::uint64_t next_seq() const noexcept override { return next_; }
  std::size_t poll(detail::TickSink, std::size_t) noexcept override {
    lapped_ = true;
    return 0;
  }
  bool lapped() const noexcept override { return lapped_; }
  void skip_to(std::uint64_t seq) noexcept override {
    lapped_ = false;
    if (seq > next_) lost_ += seq - std::exchange(next_, seq);
  }
  void pass_lap() noexcept override { lapped_ = false; }
  std::uint64_t lost() const noexcept override { return lost_; }
  void discount(std::uint64_t, bool) noexcept override {}
  std::uint64_t slack() const noexcept override { return 8; }

 private:
  std::uint64_t next_ = 1;
  std::uint64_t lost_ = 0;
  bool lapped_ = false;
};

// A table of one entry, (1, quote) at sequence 14, with table_next 10: the batch in flight, so a
// delivery must roll its copy forward through the ring to 14.
struct TableAhead {
  detail::TableGeometry g{4, 7};
  std::vector<Slot> table = std::vector<Slot>(g.entries());
  std::atomic<std::uint64_t> table_next{10};
  Tick q = quote_of(1);
  detail::MappedTableSource source{table.data(), &table_next};
  TableAhead() { write_slot(table[1 * kStateClasses], q, 14, 0, false); }
  static Tick quote_of(std::uint32_t instrument) {
    Tick t{};
    t.kind = TickKind::Quote;
    t.instrument = instrument;
    return t;
  }
};

// Each start over used to count as progress: lapped for ever, the delivery never ended and never
// reached its stall budget (publisher_timeout).
TEST_CASE("a delivery lapped each time it rolls forward is given up after its stall budget", "[state]") {
  TableAhead t;
  for (const auto why : {detail::TableDelivery::Why::conflation, detail::TableDelivery::Why::snapshot}) {
    detail::TableDelivery d(t.g, t.source, Clock::instance().ns_to_cycles(1e6));  // 1 ms
    LappingFeed feed;
    d.begin(why, feed);
    std::size_t delivered = 0;
    auto sink_fn = [&](const Tick&) { ++delivered; };
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    std::uint64_t steps = 0;
    while (d.busy() && std::chrono::steady_clock::now() < deadline) {
      (void)d.step(feed, detail::TickSink(sink_fn), 256);
      ++steps;
    }
    INFO(steps << " steps");
    CHECK_FALSE(d.busy());
    CHECK(d.abandoned() == 1);
    CHECK(delivered == 0);
  }
}

// Given up while lapped, a conflating reader must move past the lap: else the next poll finds it
// again, starts another conflation, and no live tick ever comes.
TEST_CASE("a conflation given up while lapped goes on live from the oldest intact tick", "[state]") {
  TableAhead t;
  std::vector<Slot> ring(8);
  for (std::uint64_t s = 16; s < 24; ++s) write_slot(ring[s & 7], t.q, s, 0, false);  // 10..15 lapped
  std::atomic<std::uint64_t> credit{0};
  RingReader reader(ring.data(), ring.size(), 10, &credit);
  reader.stop_at_laps(true);
  detail::TableDelivery d(t.g, t.source, Clock::instance().ns_to_cycles(1e6));  // 1 ms
  detail::RingFeed feed(reader);
  d.begin(detail::TableDelivery::Why::conflation, feed);
  auto none = [](const Tick&) {};
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (d.busy() && std::chrono::steady_clock::now() < deadline) (void)d.step(feed, detail::TickSink(none), 256);
  REQUIRE_FALSE(d.busy());
  CHECK(d.abandoned() == 1);
  CHECK_FALSE(reader.lapped());
  std::vector<std::uint64_t> live;
  CHECK(reader.poll([&](const Tick& x) { live.push_back(x.seq); }, 16) == 8);
  CHECK(live == std::vector<std::uint64_t>{16, 17, 18, 19, 20, 21, 22, 23});
  CHECK(reader.lost() == 6);
}

// The check an RDMA reader makes (rc: TableReader): two copies of an entry, the second made after
// the first landed, are used only when they agree and show no writer at work.
TEST_CASE("two copies of an entry are used only when they agree and are not busy", "[state]") {
  Slot a{}, b{};
  Tick out{};
  CHECK(detail::check_copies(a, b, out) == detail::EntryRead::empty);
  const Tick t = derived(42);
  write_slot(a, t, 42, t.send_ts, false);
  b = a;
  REQUIRE(detail::check_copies(a, b, out) == detail::EntryRead::ok);
  CHECK(out.seq == 42);
  CHECK(consistent(out));
  b.words[3] ^= 1;  // a word of another write: torn
  CHECK(detail::check_copies(a, b, out) == detail::EntryRead::busy);
  b = a;
  a.words[kSeqWord] = b.words[kSeqWord] = detail::kEntryBusy;  // the writer is at work
  CHECK(detail::check_copies(a, b, out) == detail::EntryRead::busy);
  a.words[kSeqWord] = 42;  // one copy before the write began, one during it
  CHECK(detail::check_copies(a, b, out) == detail::EntryRead::busy);
}

namespace {
// A table source that answers as a remote one does: every look and every copy step first
// "posts" (answers nothing), and a step copies few entries. The algorithm must not care.
class SlowSource final : public detail::TableSource {
 public:
  SlowSource(Slot* table, const std::atomic<std::uint64_t>* next) : mapped_(table, next) {}
  void restart() noexcept override { waiting_ = false; }
  std::uint64_t look() noexcept override {
    if (!std::exchange(waiting_, !waiting_)) return 0;
    return mapped_.look();
  }
  std::size_t copy(std::span<Tick> out, std::size_t cursor) noexcept override {
    if (!std::exchange(waiting_, !waiting_)) return cursor;
    const std::size_t end = std::min(out.size(), cursor + 7);
    const std::size_t got = mapped_.copy(out.first(end), cursor);
    ++copies_;
    return got;
  }
  std::size_t copies_ = 0;

 private:
  detail::MappedTableSource mapped_;
  bool waiting_ = false;
};
}  // namespace

// The TableDelivery algorithm over a source that answers later (the shape of RDMA READ), with
// the publisher writing the table and the ring between the steps: the snapshot and the live
// stream after it give the publisher's view.
TEST_CASE("a snapshot through a source that answers later ends with the publisher's view", "[state]") {
  const detail::TableGeometry g{20, 7};
  std::vector<Slot> table(g.entries());
  std::vector<Slot> ring(256);
  std::atomic<std::uint64_t> table_next{1};
  std::atomic<std::uint64_t> credit{0};
  detail::LastValueWriter writer(table.data(), g);
  PublisherCounters pc;
  std::uint64_t next = 1;
  View truth;
  auto publish = [&](std::uint64_t n) {
    for (std::uint64_t k = 0; k < n; ++k, ++next) {
      Tick t = market_tick(next);
      t.instrument %= 20;
      write_slot(ring[next & 255], t, next, 0, false);
      writer.update(std::span<const Tick>(&t, 1), next, 0, pc);
      table_next.store(next + 1, std::memory_order_release);
      t.seq = next;
      apply(truth, std::as_const(t));  // (a non-const Tick would pick std::apply)
    }
  };
  publish(500);  // before the subscriber: in the table only
  RingReader reader(ring.data(), ring.size(), next, &credit);
  SlowSource source(table.data(), &table_next);
  detail::TableDelivery d(g, source, Clock::instance().ns_to_cycles(1e9));
  detail::RingFeed feed(reader);
  d.begin(detail::TableDelivery::Why::snapshot, feed);
  View view;
  std::uint64_t from_table = 0, live = 0, live_first = 0, snapshot_max = 0;
  auto sink_fn = [&](const Tick& t) {
    if ((t.flags & kTickFromTable) != 0) {
      ++from_table;
      snapshot_max = std::max(snapshot_max, t.seq);
    } else {
      if (live_first == 0) live_first = t.seq;
      ++live;
    }
    apply(view, t);
  };
  for (int i = 0; i < 200 && d.busy(); ++i) {
    (void)d.step(feed, detail::TickSink(sink_fn), 64);
    publish(3);  // the publisher goes on between the steps
  }
  REQUIRE_FALSE(d.busy());
  CHECK(d.abandoned() == 0);
  CHECK(source.copies_ > 1);
  while (reader.poll(sink_fn, 64) != 0) {
  }
  CHECK(from_table > 0);
  CHECK(from_table == d.entries_delivered());
  CHECK(live_first == snapshot_max + 1);
  CHECK(reader.next_seq() == next);
  CHECK(reader.lost() == 0);
  REQUIRE(view.size() == truth.size());
  for (const auto& [key, tick] : truth) {
    const auto it = view.find(key);
    REQUIRE(it != view.end());
    CHECK(same(tick, it->second));
  }
}

// A snapshot taken while the publisher is between a batch's table update and its table_next
// store: the batch's entry is kept (its tick is in the ring), not dropped for a moment.
TEST_CASE("a snapshot keeps an entry of the batch in flight and delivers its tick once", "[state]") {
  const detail::TableGeometry g{4, 7};
  std::vector<Slot> table(g.entries());
  std::vector<Slot> ring(8);
  std::atomic<std::uint64_t> credit{0};
  auto quote = [](std::uint32_t instrument) {
    Tick t{};
    t.kind = TickKind::Quote;
    t.instrument = instrument;
    return t;
  };
  // Published: 1 (instrument 2), 2 and 3 (instrument 1). Tick 3 is in the ring and its entry,
  // but table_next still says 3: the publisher has not stored it yet.
  write_slot(ring[1], quote(2), 1, 0, false);
  write_slot(ring[2], quote(1), 2, 0, false);
  write_slot(ring[3], quote(1), 3, 0, false);
  write_slot(table[2 * kStateClasses], quote(2), 1, 0, false);
  write_slot(table[1 * kStateClasses], quote(1), 3, 0, false);
  std::atomic<std::uint64_t> table_next{3};
  RingReader reader(ring.data(), ring.size(), 3, &credit);  // joined at 3
  detail::MappedTableSource source(table.data(), &table_next);
  detail::TableDelivery d(g, source, Clock::instance().ns_to_cycles(1e9));
  detail::RingFeed feed(reader);
  d.begin(detail::TableDelivery::Why::snapshot, feed);
  std::map<std::uint32_t, std::uint64_t> snapshot;
  auto sink_fn = [&](const Tick& t) { snapshot[t.instrument] = t.seq; };
  for (int i = 0; i < 100 && d.busy(); ++i) (void)d.step(feed, detail::TickSink(sink_fn), 256);
  REQUIRE_FALSE(d.busy());
  CHECK(snapshot == std::map<std::uint32_t, std::uint64_t>{{1, 3}, {2, 1}});
  std::size_t live = 0;
  auto count = [&](const Tick&) { ++live; };
  CHECK(reader.poll(count, 16) == 0);  // tick 3 came in the snapshot, not again
  CHECK(live == 0);
}
