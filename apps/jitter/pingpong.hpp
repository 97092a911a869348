// tickrail-jitter's ping-pong: for two hosts whose clocks are not one, the measuring end
// (--mode pingpong) publishes one tick at a time and waits for the far end (--mode echo) to
// publish it back; half the round trip, on the measuring end's own clock, is the figure.
//
// Both ends read the same config: the forward stream is the configured channel, published by the
// measuring end (so [rdma] address is the measuring end's own address); the echo stream is
// "<channel>-echo" on rdma port + 1, published by the echo end at `echo_address` (default: the
// same address: one host), over UD on `echo_group` (default: the first group + 1).
#pragma once

#include <cstdint>
#include <string>

#include "jitter.hpp"
#include "tickrail/config.hpp"
#include "tickrail/publisher.hpp"

namespace tickrail::jitter {

// The configured group with its last octet plus one ("239.1.1.1" -> "239.1.1.2").
[[nodiscard]] std::string next_group(const std::string& group);

// The forward stream's publisher (measuring end) and the echo stream's (echo end) and
// subscriber (measuring end), from the jitter's subscriber config and options.
[[nodiscard]] PublisherConfig forward_publisher(const SubscriberConfig& sc);
[[nodiscard]] PublisherConfig echo_publisher(const SubscriberConfig& sc, const Options& o);
[[nodiscard]] SubscriberConfig echo_subscriber(const SubscriberConfig& sc, const Options& o);

// The measuring end: publishes pings on the forward stream, attaches to the echo stream
// (serving its own publisher between attempts), records RTT/2 per answered ping until the run
// ends; info says how. Throws Error(timed_out) if no echo comes within attach_timeout.
void measure_pingpong(const SubscriberConfig& sc, const Options& o, Recorder& rec, RunInfo& info);

// The echo end: every tick received goes back on the echo stream; prints its one line and
// returns the exit status.
[[nodiscard]] int echo(const SubscriberConfig& sc, const Options& o);

}  // namespace tickrail::jitter
