#include "tickrail/failover.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <thread>
#include <vector>

#include "tickrail/line_arbiter.hpp"
#include "core/log.hpp"
#include "core/stats.hpp"
#include "core/thread.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "transport/transport.hpp"

namespace tickrail {

namespace {

bool ended(SubscriberState s) noexcept {
  return s == SubscriberState::publisher_gone || s == SubscriberState::evicted || s == SubscriberState::closed;
}

}  // namespace

// A line's Subscriber belongs to the polling thread. tr-failover hands it a new one through
// `fresh` once it asks (`wanted`), and deletes the one it retired (`retired`): attaching and
// freeing are control plane, kept off the polling thread.
struct FailoverSubscriber::Impl {
  struct Line {
    std::unique_ptr<Subscriber> sub;
    bool up = false;
    std::uint64_t downs = 0;
    std::uint64_t down_since = 0;   // Clock cycles, while down
    std::uint64_t up_since = 0;     // Clock cycles, since it was attached again (0: from the start)
    std::uint64_t down_cycles = 0;  // before down_since
    std::uint64_t recovered_before = 0;  // ticks read back by the Subscribers it replaced
    bool covers = false;  // a UD line: told what the other line delivered (cover_below)
    // Since a look found its publisher ended: the ticks it had brought then, and what it may
    // still bring (after_end()); a line that brings more goes down.
    bool end_seen = false;
    std::uint64_t brought_at_end = 0;
    std::uint64_t allowance = 0;
    std::uint64_t ended_look = 0;  // Clock cycles: the last look that found it ended
    std::atomic<Subscriber*> fresh{nullptr};
    std::atomic<Subscriber*> retired{nullptr};
    std::atomic<bool> wanted{false};
  };

  Impl(const FailoverConfig& c, detail::FailoverHot& h) : config(c), hot(h), arb(h.arb) {
    for (int i = 0; i < 2; ++i) {
      if (config.line[i].transport != TransportKind::ud) continue;
      lines[i].covers = true;
      any_covers = true;
      config.line[i].rdma.recovery_delay = c.line_recovery_delay(i);
    }
  }
  ~Impl() {
    thread = {};  // stops and joins tr-failover first
    for (Line& l : lines) {
      delete l.fresh.exchange(nullptr);
      delete l.retired.exchange(nullptr);
    }
  }

  void attach_all(const std::function<void()>& between);
  void reattach_loop(const std::stop_token& stop);
  template <class Deliver>
  void adopt(int i, Deliver& deliver) noexcept;
  template <class Deliver>
  void went_down(int i, Deliver& deliver) noexcept;
  template <class Deliver>
  void look_at_lines(bool a_empty, bool b_empty, std::size_t limit, Deliver& deliver) noexcept;
  template <class Deliver>
  void watch_hole(Deliver& deliver) noexcept;
  void time_copy(int i, std::uint64_t seq, bool first, std::uint64_t now, const detail::LeadSink& lead) noexcept;
  void register_stats();
  void store_flow() noexcept;
  void store_line(int i) noexcept;
  // Whether poll() may read line i inline (FailoverHot::direct), after its state changed.
  void set_direct(int i) noexcept {
    const Line& l = lines[i];
    hot.direct[i] = l.up && !l.covers ? l.sub.get() : nullptr;
  }

  FailoverConfig config;
  detail::FailoverHot& hot;  // the owner's
  detail::LineArbiter& arb;  // hot.arb
  std::array<Line, 2> lines;
  std::uint64_t hole_cycles = 0;
  // How often, at most, the lines' states are read: every quarter of hole_timeout or every
  // 100 us, whichever is shorter; a line's end may be noticed that much later.
  std::uint64_t look_cycles = 0;
  std::uint64_t last_look = 0;  // Clock cycles
  // Clock cycles; 0: no hole being waited on. poll() looks only while a tick is held, so once a
  // hole closes this may stay: it counts only while hole_at is still next() (next() has moved).
  std::uint64_t hole_since = 0;
  std::uint64_t hole_at = 0;     // the sequence of that hole
  std::uint64_t hole_end = 0;    // the first sequence held beyond it (UD lines read no further)
  bool any_covers = false;       // a line is UD (Line::covers)
  // measure_lead: when the first copy of each sequence in the window arrived, and on which line.
  struct Stamp {
    std::uint64_t seq = 0;
    std::uint64_t at = 0;  // Clock cycles
    int line = 0;
  };
  std::vector<Stamp> stamps;
  // The live counters (tickrail-stat): empty when off. A line's down_since becomes Unix ns
  // through the Clock reading and the Unix time of registration.
  stats::Registration stats;
  std::uint64_t stats_cycles = 0;
  std::uint64_t stats_unix_ns = 0;
  std::jthread thread;
};

// Registered before the lines attach: a line that cannot starts down after stats_cycles.
void FailoverSubscriber::Impl::register_stats() {
  if (!config.line[0].stats && !config.line[1].stats) return;
  const std::string a = stats::endpoint_label(config.line[0]);
  const std::string b = stats::endpoint_label(config.line[1]);
  stats = stats::register_endpoint({stats::BlockKind::failover, config.line[0].transport, a,
                                    config.line[1].transport, b});
  if (!stats) return;
  hot.stats_on = true;
  stats_cycles = Clock::now();
  stats_unix_ns = stats.block()->registered_ns.load(std::memory_order_relaxed);
}

// The arbiter's counts: after a poll that brought copies, and where a hole or a line's end moved it.
void FailoverSubscriber::Impl::store_flow() noexcept {
  if (!stats) return;
  stats::put(stats, stats::fo_word(stats::FoCounter::delivered), arb.delivered());
  stats::put(stats, stats::fo_word(stats::FoCounter::gaps), arb.gaps());
  stats::put(stats, stats::fo_word(stats::FoCounter::skipped), arb.skipped());
  for (int i = 0; i < 2; ++i) {
    stats::put(stats, stats::fo_word(i, stats::FoLineCounter::first), arb.line(i).first);
    stats::put(stats, stats::fo_word(i, stats::FoLineCounter::duplicates), arb.line(i).duplicates);
  }
}

// Line i's state, where it goes down or comes back: no clock read, the line's own stamps converted.
void FailoverSubscriber::Impl::store_line(int i) noexcept {
  if (!stats) return;
  const Line& l = lines[i];
  const Clock& clock = Clock::instance();
  const std::uint64_t since =
      l.up ? 0 : stats_unix_ns + static_cast<std::uint64_t>(clock.to_ns(l.down_since - stats_cycles));
  stats::put(stats, stats::fo_word(i, stats::FoLineCounter::downs), l.downs);
  stats::put(stats, stats::fo_word(i, stats::FoLineCounter::down_ns),
             static_cast<std::uint64_t>(clock.to_ns(l.down_cycles)));
  stats::put(stats, stats::fo_word(i, stats::FoLineCounter::up), l.up ? 1 : 0);
  stats::put(stats, stats::fo_word(i, stats::FoLineCounter::down_since_ns), since);
  stats.set_state(lines[0].up || lines[1].up ? stats::EndpointState::active
                                             : stats::EndpointState::publisher_gone);
}

void FailoverSubscriber::Impl::attach_all(const std::function<void()>& between) {
  std::exception_ptr first;
  for (int i = 0; i < 2; ++i) {
    try {
      lines[i].sub = std::make_unique<Subscriber>(config.line[i], between);
      lines[i].up = true;
    } catch (const Error& e) {
      // A refusal or a bad config is the operator's to fix, not a line to wait for.
      if (!detail::attach_worth_retrying(e.code())) throw;
      if (!first) first = std::current_exception();
      lines[i].down_since = Clock::now();
      lines[i].downs = 1;
      lines[i].wanted.store(true, std::memory_order_release);
      arb.line_down(i, [](const Tick&) {});
    }
  }
  if (!lines[0].up && !lines[1].up) std::rethrow_exception(first);
  for (int i = 0; i < 2; ++i) set_direct(i);
}

void FailoverSubscriber::Impl::reattach_loop(const std::stop_token& stop) {
  while (!stop.stop_requested()) {
    for (int i = 0; i < 2; ++i) {
      Line& l = lines[i];
      delete l.retired.exchange(nullptr, std::memory_order_acquire);
      if (!l.wanted.load(std::memory_order_acquire) || l.fresh.load(std::memory_order_acquire) != nullptr) continue;
      SubscriberConfig once = config.line[i];
      once.attach_timeout = std::chrono::milliseconds(0);  // one try per period
      try {
        auto fresh = std::make_unique<Subscriber>(once);
        // Cleared before the hand-over: a line that goes down again at once asks again.
        l.wanted.store(false, std::memory_order_release);
        l.fresh.store(fresh.release(), std::memory_order_release);
        logger()->info("failover: line {} (channel '{}') attached again", i == 0 ? 'A' : 'B', once.channel);
      } catch (const Error& e) {
        logger()->debug("failover: line {} (channel '{}'): {}", i == 0 ? 'A' : 'B', once.channel, e.what());
      }
    }
    std::this_thread::sleep_for(config.reattach_every);
  }
}

// A line that tr-failover attached again replaces the one that went down.
template <class Deliver>
void FailoverSubscriber::Impl::adopt(int i, Deliver& deliver) noexcept {
  (void)deliver;
  Line& l = lines[i];
  if (l.fresh.load(std::memory_order_relaxed) == nullptr || l.retired.load(std::memory_order_acquire) != nullptr) {
    return;
  }
  if (l.sub != nullptr) l.recovered_before += l.sub->counters().recovered;
  l.retired.store(l.sub.release(), std::memory_order_release);
  l.sub.reset(l.fresh.exchange(nullptr, std::memory_order_acquire));
  l.up = true;
  l.end_seen = false;
  l.up_since = Clock::now();
  l.down_cycles += l.up_since - l.down_since;
  arb.line_up(i);
  set_direct(i);
  store_line(i);
}

template <class Deliver>
void FailoverSubscriber::Impl::went_down(int i, Deliver& deliver) noexcept {
  Line& l = lines[i];
  l.up = false;
  set_direct(i);
  ++l.downs;
  l.down_since = Clock::now();
  l.wanted.store(true, std::memory_order_release);
  arb.line_down(i, deliver);
  store_line(i);
  store_flow();  // its end may have settled holes
}

// The first copy of `seq` is stamped; the other line's copy, while its stamp is still in the
// window, is timed against it, once. A line attached again after the stamp brings a resent copy,
// not a race: it is not timed.
void FailoverSubscriber::Impl::time_copy(int i, std::uint64_t seq, bool first, std::uint64_t now,
                                         const detail::LeadSink& lead) noexcept {
  Stamp& s = stamps[seq & (stamps.size() - 1)];
  if (first) {
    s = {seq, now, i};
  } else if (s.seq == seq && s.line != i && seq != 0 && lines[i].up_since <= s.at) {
    lead(s.line, now - s.at);
    s.seq = 0;
  }
}

// A line that is up, was found empty, and has ended (its state: a clock read) is polled once
// more: the end may have come, with the line's last ticks, after its poll. Bringing nothing
// then, it is down; otherwise the next look decides. Looks are at least look_cycles apart: a
// line's state is a call through a pointer and a clock read, and a spinning loop finds a line
// empty every few tens of ns, so looking on every 64th such poll held the ticks that came
// meanwhile back by enough to move the p50 (BENCHMARKS.md, issue 15).
// A line whose publisher ended goes down once a poll finds it empty, or, should its publisher
// write after its end, once it has brought more than was on its way then.
template <class Deliver>
void FailoverSubscriber::Impl::look_at_lines(bool a_empty, bool b_empty, std::size_t limit, Deliver& deliver) noexcept {
  if (limit == 0 || (!lines[0].up && !lines[1].up)) return;
  const std::uint64_t now = Clock::now();
  if (now - last_look < look_cycles) return;
  last_look = now;
  const bool empty[2] = {a_empty, b_empty};
  for (int i = 0; i < 2; ++i) {
    Line& l = lines[i];
    if (!l.up) continue;
    if (!ended(l.sub->state())) {
      l.end_seen = false;  // a silence that ended
      continue;
    }
    const auto brought = [&] {
      const SubscriberCounters c = l.sub->counters();
      return c.received + c.from_table;
    };
    // Looks that found it ended less than publisher_timeout apart saw one end: for a silence
    // to break and come back between them takes longer.
    const auto timeout_ns = std::chrono::nanoseconds(l.sub->config().publisher_timeout).count();
    if (!l.end_seen || now - l.ended_look > Clock::instance().ns_to_cycles(static_cast<double>(timeout_ns))) {
      l.end_seen = true;
      l.brought_at_end = brought();
      l.allowance = l.sub->impl_->after_end();
    }
    l.ended_look = now;
    if (empty[i] && l.sub->poll([&](const Tick& t) { (void)arb.offer(i, t, deliver); }, limit) == 0) {
      went_down(i, deliver);
    } else if (brought() - l.brought_at_end > l.allowance) {
      went_down(i, deliver);
    }
  }
}

// A hole that waited hole_timeout for the line behind is given up.
template <class Deliver>
void FailoverSubscriber::Impl::watch_hole(Deliver& deliver) noexcept {
  if (!arb.holding()) {
    hole_since = 0;
    return;
  }
  const std::uint64_t now = Clock::now();
  if (hole_since == 0 || hole_at != arb.next()) {
    hole_since = now;
    hole_at = arb.next();
    if (any_covers) hole_end = arb.hole_end();
  } else if (now - hole_since >= hole_cycles) {
    arb.skip_hole(deliver);
    hole_since = 0;
    store_flow();
  }
}

FailoverSubscriber::FailoverSubscriber(const FailoverConfig& config) : FailoverSubscriber(config, {}) {}

namespace {
std::size_t validated_window(const FailoverConfig& config) {
  config.validate();
  return config.window;
}
}  // namespace

FailoverSubscriber::FailoverSubscriber(const FailoverConfig& config, const std::function<void()>& between_attempts)
    : hot_(validated_window(config)) {
  impl_ = std::make_unique<Impl>(config, hot_);
  impl_->hole_cycles = static_cast<std::uint64_t>(
      Clock::instance().ns_to_cycles(static_cast<double>(config.hole_timeout.count()) * 1e3));
  impl_->look_cycles = std::min(impl_->hole_cycles / 4, static_cast<std::uint64_t>(Clock::instance().ns_to_cycles(100e3)));
  if (config.measure_lead) impl_->stamps.resize(config.window);
  impl_->register_stats();
  impl_->attach_all(between_attempts);
  for (int i = 0; i < 2; ++i) impl_->store_line(i);
  const auto where = detail::Placement::for_endpoint(config.line[0].housekeeping_cpus,
                                                     "failover subscriber '" + config.line[0].channel + "'");
  // A line attached again from tr-failover gets the placement decided here, from the app's
  // thread: decided there, tr-failover's own cpus would count as a pinned thread's (hot).
  std::string cpus;
  for (const int c : where.cpus()) cpus += (cpus.empty() ? "" : ",") + std::to_string(c);
  for (SubscriberConfig& line : impl_->config.line) {
    if (line.housekeeping_cpus.empty()) line.housekeeping_cpus = cpus;
  }
  impl_->thread = detail::start_thread("tr-failover", where,
                                       [impl = impl_.get()](std::stop_token stop) { impl->reattach_loop(stop); });
}

FailoverSubscriber::~FailoverSubscriber() = default;

std::size_t FailoverSubscriber::poll_sink(detail::TickSink sink, const detail::LeadSink* lead,
                                          std::size_t limit) noexcept {
  Impl& m = *impl_;
  std::size_t n = 0;
  std::size_t got[2] = {0, 0};
  auto deliver = [&](const Tick& t) {
    sink(t);
    ++n;
  };
  for (int i = 0; i < 2; ++i) {
    Impl::Line& l = m.lines[i];
    if (!l.up) m.adopt(i, deliver);
    if (l.sub == nullptr) continue;
    auto offer = [&](const Tick& t) {
      if (lead == nullptr || m.stamps.empty()) {
        (void)m.arb.offer(i, t, deliver);
        return;
      }
      // Read before offer(), which may run the app's handler: the copy's arrival, not after it.
      const std::uint64_t now = Clock::now();
      const bool first = m.arb.offer(i, t, deliver);
      m.time_copy(i, t.seq, first, now, *lead);
    };
    got[i] = l.sub->poll(offer, limit);
  }
  if (look_due(got[0], got[1])) m.look_at_lines(got[0] == 0, got[1] == 0, limit, deliver);
  m.watch_hole(deliver);
  // A UD line passes, unread, the holes the other line filled (or that were given up), and
  // reads no further than what the other line brought.
  if (m.any_covers) {
    const std::uint64_t read_until = m.arb.holding() && m.hole_end != 0 ? m.hole_end : ~std::uint64_t{0};
    for (Impl::Line& l : m.lines) {
      if (l.covers && l.sub != nullptr) l.sub->cover_below(m.arb.next(), read_until);
    }
  }
  note_copies(got[0] + got[1]);
  return n;
}

void FailoverSubscriber::look_at_lines(bool a_empty, bool b_empty, std::size_t limit,
                                       detail::TickSink deliver) noexcept {
  impl_->look_at_lines(a_empty, b_empty, limit, deliver);
}

void FailoverSubscriber::watch_hole(detail::TickSink deliver) noexcept { impl_->watch_hole(deliver); }

void FailoverSubscriber::store_flow() const noexcept {
  impl_->store_flow();
  hot_.stats_stale = false;
}

FailoverCounters FailoverSubscriber::counters() const noexcept {
  if (hot_.stats_stale) store_flow();  // a poll loop that stopped right after copies came
  const Impl& m = *impl_;
  FailoverCounters c;
  c.delivered = m.arb.delivered();
  c.gaps = m.arb.gaps();
  c.skipped = m.arb.skipped();
  const Clock& clock = Clock::instance();
  for (int i = 0; i < 2; ++i) {
    const Impl::Line& l = m.lines[i];
    FailoverLineCounters& o = c.line[i];
    o.first = m.arb.line(i).first;
    o.duplicates = m.arb.line(i).duplicates;
    o.refuted = m.arb.line(i).refuted;
    o.downs = l.downs;
    o.up = l.up;
    o.recovered = l.recovered_before + (l.sub != nullptr ? l.sub->counters().recovered : 0);
    const std::uint64_t down = l.down_cycles + (l.up ? 0 : Clock::now() - l.down_since);
    o.down_ns = static_cast<std::uint64_t>(clock.to_ns(down));
  }
  return c;
}

bool FailoverSubscriber::line_up(int line) const noexcept { return impl_->lines[line & 1].up; }

std::uint64_t FailoverSubscriber::next_sequence() const noexcept {
  return impl_->arb.next();
}

}  // namespace tickrail
