// A trading app's market-data thread: pins itself to a core, subscribes to a tickrail channel and
// keeps each instrument's top of book and traded volume, busy-polling without allocating.
//   build: make, or Meson or CMake from this folder (see its Makefile, meson.build, CMakeLists.txt)
//   run:   ./trading_app [CPU] [CHANNEL] [snapshot]     (next to: tickrail-replay --book --state)
// With `snapshot` it starts from the publisher's last-value table: every instrument's quote and
// last trade at once, then the live stream right after them (docs/state.md).
#include <tickrail/affinity.hpp>
#include <tickrail/error.hpp>
#include <tickrail/state.hpp>
#include <tickrail/subscriber.hpp>

#include <string>

#include <cstdio>
#include <cstdlib>
#include <vector>

struct Instrument {
  std::int64_t bid = 0, ask = 0, last = 0;  // fixed point, tickrail::kPriceScale
  std::uint64_t volume = 0;
};

int main(int argc, char** argv) {
  using namespace tickrail;
  const int cpu = argc > 1 ? std::atoi(argv[1]) : -1;
  SubscriberConfig cfg;  // shared memory, channel "tickrail"; rc/ud are one field away
  if (argc > 2) cfg.channel = argv[2];
  if (argc > 3 && std::string(argv[3]) == "snapshot") cfg.start = StartMode::snapshot;
  cfg.attach_timeout = std::chrono::seconds(10);  // wait for the publisher to start
  try {
    if (cpu >= 0) {
      const PinResult pin = pin_current_thread(cpu);
      if (!pin) throw Error(Errc::invalid_argument, pin.message);
      if (!pin.message.empty()) std::fprintf(stderr, "warning: %s\n", pin.message.c_str());
    }
    std::vector<Instrument> book(65536);  // by instrument id (ITCH stock locate), allocated once
    Subscriber sub(cfg);
    std::uint64_t ticks = 0, from_table = 0;  // from_table: of `ticks`, those of the snapshot
    auto on_tick = [&](const Tick& t) {  // the hot path: no allocation, no system call
      Instrument& in = book[t.instrument & 0xffff];
      // A tick from the table is the state as of the snapshot: its trade sets the last price,
      // but was traded before we joined, so it adds no volume.
      const bool state = (t.flags & kTickFromTable) != 0;
      if (t.kind == TickKind::Quote) {
        in.bid = t.price;
        in.ask = t.ask_price();
      } else if (t.kind == TickKind::Trade || t.kind == TickKind::Execute) {
        in.last = t.price != 0 ? t.price : in.last;
        if (!state) in.volume += t.qty;
      }
      ++ticks;
      if (state) ++from_table;
    };
    for (;;) {
      if (sub.poll(on_tick) != 0) continue;
      const SubscriberState s = sub.state();  // gone or evicted: stop once drained
      if (s != SubscriberState::active && s != SubscriberState::connecting && sub.poll(on_tick) == 0) break;
      cpu_relax();
    }
    std::printf("%llu ticks (%s)\n", static_cast<unsigned long long>(ticks), sub.reason().c_str());
    if (cfg.start == StartMode::snapshot)
      std::printf("%llu of them from the table, the rest live\n",
                  static_cast<unsigned long long>(from_table));
    for (std::size_t i = 0; i < book.size(); ++i) {
      const Instrument& in = book[i];
      if (in.volume == 0 && in.bid == 0 && in.last == 0) continue;
      std::printf("instrument %5zu  bid %10.4f  ask %10.4f  last %10.4f  volume %llu\n", i,
                  static_cast<double>(in.bid) / kPriceScale, static_cast<double>(in.ask) / kPriceScale,
                  static_cast<double>(in.last) / kPriceScale, static_cast<unsigned long long>(in.volume));
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "trading_app: %s\n", e.what());
    return 1;
  }
}
