#include "pingpong.hpp"

#include <cstdio>

#include "cli.hpp"
#include "tickrail/clock.hpp"
#include "tickrail/error.hpp"
#include "tickrail/subscriber.hpp"

namespace tickrail::jitter {

std::string next_group(const std::string& group) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  char tail = 0;
  if (std::sscanf(group.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4 || d > 255) {
    return group;  // not dotted IPv4: the transport's validation names it
  }
  char out[32];
  std::snprintf(out, sizeof out, "%u.%u.%u.%u", a, b, c, (d + 1) % 256);
  return out;
}

PublisherConfig forward_publisher(const SubscriberConfig& sc) {
  PublisherConfig pc;
  pc.transport = sc.transport;
  pc.channel = sc.channel;
  pc.max_subscribers = 1;
  pc.shm_dir = sc.shm_dir;
  pc.stats = sc.stats;
  pc.lock_memory = sc.lock_memory;
  pc.housekeeping_cpus = sc.housekeeping_cpus;
  pc.rdma = sc.rdma;
  pc.stamp_send_time = true;  // the ping's send time, on this end's clock
  return pc;
}

namespace {
RdmaConfig echo_rdma(const SubscriberConfig& sc, const Options& o) {
  RdmaConfig r = sc.rdma;
  if (!o.echo_address.empty()) r.address = o.echo_address;
  r.port = static_cast<std::uint16_t>(sc.rdma.port + 1);
  r.groups = {o.echo_group.empty() ? next_group(sc.rdma.groups.empty() ? std::string("239.1.1.1")
                                                                       : sc.rdma.groups.front())
                                   : o.echo_group};
  return r;
}
}  // namespace

PublisherConfig echo_publisher(const SubscriberConfig& sc, const Options& o) {
  PublisherConfig pc = forward_publisher(sc);
  pc.channel = sc.channel + "-echo";
  pc.rdma = echo_rdma(sc, o);
  pc.stamp_send_time = false;  // the ping goes back as it came, its send time included
  return pc;
}

SubscriberConfig echo_subscriber(const SubscriberConfig& sc, const Options& o) {
  SubscriberConfig e = sc;
  e.channel = sc.channel + "-echo";
  e.rdma = echo_rdma(sc, o);
  e.policy = SlowConsumerPolicy::block;
  return e;
}

namespace {

// The measuring end's loop: one ping in flight; RTT/2 recorded as the latency of a tick sent
// half a round trip before its echo came back, numbered by ping so that unanswered pings show
// as gaps.
class Pinger {
 public:
  Pinger(const SubscriberConfig& sc, const Options& o, Recorder& rec, RunInfo& info, Publisher& pub,
         Subscriber& sub)
      : o_(o), rec_(rec), info_(info), pub_(pub), sub_(sub), echo_channel_(sub.config().channel),
        attach_timeout_(sc.attach_timeout),
        timeout_(clock_.ns_to_cycles(static_cast<double>(o.ping_timeout.count()) * 1e6)),
        second_(clock_.ns_to_cycles(1e9)),
        limit_(o.count == 0 ? ~std::uint64_t{0} : o.count),
        first_deadline_(std::chrono::steady_clock::now() + sc.attach_timeout) {
    ping_.kind = TickKind::Status;
  }

  // Pings until the run ends (info.ended says how); throws Error(timed_out) when no echo came
  // within attach_timeout.
  void run() {
    for (;;) {
      ++id_;
      ping_.order_ref = id_;
      answered_ = false;
      const bool recording = warm_ >= o_.warmup + 1;
      if (recording) ++measured_;
      const PublishResult r = pub_.publish(ping_);
      const std::uint64_t sent = Clock::now();
      if (r.status == PublishStatus::closed) {
        info_.ended = "publisher_gone";
        return;
      }
      const std::uint64_t now = await_echo(sent, r.status);
      settle(now, recording);
      if (over(now)) return;
      show(now);
    }
  }
  [[nodiscard]] std::uint64_t start() const noexcept { return start_; }  // 0: never measured

 private:
  // Spins for the echo (a ping nobody was subscribed to yet is never answered: it times out);
  // returns when the spin ended. The spin is kept to a poll and a clock read: the echo is seen
  // up to one iteration late, so the state check (loads and a clock read of its own) runs once
  // in 64.
  std::uint64_t await_echo(std::uint64_t sent, PublishStatus status) {
    auto on_echo = [this](const Tick& t) {
      if (t.order_ref == id_ && !answered_) {
        answered_ = true;
        rtt_ = Clock::now() - t.send_ts;
      }
    };
    std::uint64_t now = sent;
    for (std::uint32_t spins = 1; !answered_ && now - sent < timeout_; ++spins) {
      rec_.on_poll(now);
      if (sub_.poll(on_echo, 16) == 0 && status == PublishStatus::no_subscribers) pub_.service();
      now = Clock::now();
      if (spins % 64 == 0 && !answered_ &&
          (cli::stop_requested() || sub_.state() == SubscriberState::publisher_gone)) {
        break;
      }
    }
    return now;
  }

  // Records the answer (or counts the timeout); the first answer after the warm-up starts the
  // measurement.
  void settle(std::uint64_t now, bool recording) {
    if (!answered_) {
      if (recording) ++info_.timeouts;
      return;
    }
    if (recording) {
      Tick t = ping_;
      t.seq = measured_;           // gaps = pings unanswered while recording
      t.send_ts = now - rtt_ / 2;  // so that the recorded latency is RTT/2
      rec_.on_tick(t, now);
    } else if (++warm_ == o_.warmup + 1) {
      start_ = Clock::now();
      end_ = o_.duration.count() > 0
                 ? start_ + clock_.ns_to_cycles(static_cast<double>(o_.duration.count()) * 1e6)
                 : ~std::uint64_t{0};
      next_live_ = start_ + second_;
      last_live_ = start_;
      note("echo answered; " + std::to_string(o_.warmup) + " warm-up pings done, measuring RTT/2");
    }
  }

  // True when the run ends here, with info.ended set.
  bool over(std::uint64_t now) {
    if (cli::stop_requested()) [[unlikely]] {
      info_.ended = "interrupted";
      return true;
    }
    if (!answered_ && sub_.state() == SubscriberState::publisher_gone) {
      info_.ended = "publisher_gone";
      info_.reason = "the echo end: " + sub_.reason();
      return true;
    }
    if (warm_ == 0 && std::chrono::steady_clock::now() >= first_deadline_) {
      throw Error(Errc::timed_out, "no echo on channel '" + echo_channel_ + "' within " +
                                     std::to_string(attach_timeout_.count()) +
                                     " ms: is tickrail-jitter --mode echo running with the same "
                                     "config (and --echo-address)?");
    }
    if (measured_ >= limit_) {
      info_.ended = "count";
      return true;
    }
    if (start_ != 0 && now >= end_) {
      info_.ended = "duration";
      return true;
    }
    return false;
  }

  void show(std::uint64_t now) {
    if (start_ == 0 || now < next_live_) return;
    const Window w = rec_.take_window(clock_.to_ns(now - last_live_) * 1e-9);
    if (o_.live && rec_.received() != 0) live_line(w, rec_.received());
    last_live_ = now;
    next_live_ = now + second_;
    rec_.skip_poll_gap();
  }

  const Clock& clock_ = Clock::instance();
  const Options& o_;
  Recorder& rec_;
  RunInfo& info_;
  Publisher& pub_;
  Subscriber& sub_;
  const std::string echo_channel_;
  const std::chrono::milliseconds attach_timeout_;
  const std::uint64_t timeout_;  // clock cycles a ping waits for its echo
  const std::uint64_t second_;
  const std::uint64_t limit_;
  const std::chrono::steady_clock::time_point first_deadline_;
  Tick ping_{};
  std::uint64_t id_ = 0;        // the ping in flight (Tick::order_ref)
  std::uint64_t warm_ = 0;      // answered pings before recording starts
  std::uint64_t measured_ = 0;  // pings sent since recording started
  bool answered_ = false;
  std::uint64_t rtt_ = 0;
  std::uint64_t start_ = 0, end_ = ~std::uint64_t{0}, next_live_ = 0, last_live_ = 0;
};

}  // namespace

void measure_pingpong(const SubscriberConfig& sc, const Options& o, Recorder& rec, RunInfo& info) {
  Publisher pub(forward_publisher(sc));
  const SubscriberConfig ec = echo_subscriber(sc, o);
  note("publishing pings on " + info.transport + " channel '" + sc.channel +
       "'; waiting for tickrail-jitter --mode echo to answer on '" + ec.channel + "'");
  // Our forward stream is served while waiting: the echo end publishes only once subscribed.
  Subscriber sub = cli::attach_subscriber(ec, cli::stop_flag(), [&pub] { pub.service(); });
  Pinger pinger(sc, o, rec, info, pub, sub);
  pinger.run();
  const std::uint64_t start = pinger.start();
  info.elapsed_s = start == 0 ? 0 : Clock::instance().to_ns(Clock::now() - start) * 1e-9;
  info.counters = sub.counters();
  pub.close();  // the echo end sees the forward stream end and stops
  sub.close();
}

// The far end of ping-pong: every tick received goes back on the echo stream as it came.
int echo(const SubscriberConfig& sc, const Options& o) {
  // The measuring end may start later: attach_timeout, or until interrupted.
  Subscriber sub = cli::attach_subscriber(sc, cli::stop_flag());
  PublisherConfig pc = echo_publisher(sc, o);
  Publisher pub(pc);
  note("echoing " + std::string(to_string(sc.transport)) + " channel '" + sc.channel +
       "' back on '" + pc.channel + "'");
  std::uint64_t echoed = 0, unsent = 0;
  auto back = [&](const Tick& t) {
    if (pub.publish(t).ok()) {
      ++echoed;
    } else {
      ++unsent;  // the measuring end not subscribed yet: that ping times out there
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  std::string ended;
  // An empty poll is followed by housekeeping only once in 64, so that a ping waits for at
  // most one cheap iteration before it is seen.
  for (std::uint32_t idle = 0;;) {
    if (sub.poll(back, 16) == 0 && ++idle % 64 == 0) {
      pub.service();
      const SubscriberState st = sub.state();
      if ((st == SubscriberState::publisher_gone || st == SubscriberState::closed ||
           st == SubscriberState::evicted) &&
          sub.poll(back, 16) == 0) {
        ended = "the measuring end closed its stream (" + sub.reason() + ")";
        break;
      }
    }
    if (cli::stop_requested()) [[unlikely]] {
      ended = "interrupted";
      break;
    }
    if (o.duration.count() > 0 && std::chrono::steady_clock::now() - t0 >= o.duration) {
      ended = "--duration reached";
      break;
    }
  }
  std::printf("tickrail-jitter --mode echo: %llu pings echoed, %llu not sent (nobody subscribed "
              "yet); ended: %s\n",
              static_cast<unsigned long long>(echoed), static_cast<unsigned long long>(unsent),
              ended.c_str());
  return ended == "interrupted" ? cli::kExitInterrupted : cli::kExitOk;
}

}  // namespace tickrail::jitter
