#include "tickrail/tools/config_file.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

using namespace tickrail;

namespace {

// Runs f and returns the config_error message it throws (fails the test otherwise).
template <class F>
std::string config_error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.code() == make_error_code(Errc::config_error));
    return e.what();
  }
  FAIL("no error thrown");
  return {};
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& text) {
    path = (std::filesystem::temp_directory_path() /
            ("tickrail-config-test-" + std::to_string(getpid()) + "-" +
             std::to_string(counter++) + ".toml"))
               .string();
    std::ofstream(path) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
  static inline int counter = 0;
};

}  // namespace

TEST_CASE("publisherConfigReadsEveryKeyFromTopLevelSectionAndRdma", "[config_file]") {
  ConfigFile f(R"(
transport = "rc"
channel = "md"
shm_dir = "/tmp"

[publisher]
max_subscribers = 4
ring_capacity = 1024
stamp_send_time = false
prefetch_ahead = 32
lock_memory = true
conductor_period_ms = 7
stats = false

[rdma]
device = "rxe0"
address = "10.0.0.1"
port = 9000
token = "secret"
allow = ["10.0.0.2", "10.0.0.3"]
connect_timeout_ms = 250
heartbeat_interval_ms = 20
polling = "cq"
signal_every = 16
credit_every = 8
recv_batch = 4
split_commit = true
groups = ["239.1.1.2"]
max_ticks_per_datagram = 8
batch_delay_ns = 500
history = 1024
reorder_buffer = 128
late_join_recover = 10
recv_buffers = 64

[publisher.rdma]
address = "0.0.0.0"
)", "pub.toml");
  PublisherConfig c;
  read_publisher_config(f, c);
  f.check_read({"", "publisher", "rdma"});
  CHECK(c.transport == TransportKind::rc);
  CHECK(c.channel == "md");
  CHECK(c.shm_dir == "/tmp");
  CHECK(c.max_subscribers == 4);
  CHECK(c.ring_capacity == 1024);
  CHECK_FALSE(c.stamp_send_time);
  CHECK(c.prefetch_ahead == 32);
  CHECK(c.lock_memory);
  CHECK(c.conductor_period == std::chrono::milliseconds(7));
  CHECK_FALSE(c.stats);
  CHECK(c.rdma.device == "rxe0");
  CHECK(c.rdma.address == "0.0.0.0");  // [publisher.rdma] overrides [rdma]
  CHECK(c.rdma.port == 9000);
  CHECK(c.rdma.token == "secret");
  CHECK(c.rdma.allow == std::vector<std::string>{"10.0.0.2", "10.0.0.3"});
  CHECK(c.rdma.connect_timeout == std::chrono::milliseconds(250));
  CHECK(c.rdma.heartbeat_interval == std::chrono::milliseconds(20));
  CHECK(c.rdma.polling == RcPolling::cq);
  CHECK(c.rdma.signal_every == 16);
  CHECK(c.rdma.credit_every == 8);
  CHECK(c.rdma.recv_batch == 4);
  CHECK(c.rdma.split_commit);
  CHECK(c.rdma.groups == std::vector<std::string>{"239.1.1.2"});
  CHECK(c.rdma.max_ticks_per_datagram == 8);
  CHECK(c.rdma.batch_delay == std::chrono::nanoseconds(500));
  CHECK(c.rdma.history == 1024);
  CHECK(c.rdma.reorder_buffer == 128);
  CHECK(c.rdma.late_join_recover == 10);
  CHECK(c.rdma.recv_buffers == 64);
}

TEST_CASE("subscriberConfigReadsItsSectionAndSectionOverridesTopLevel", "[config_file]") {
  ConfigFile f(R"(
channel = "md"
[subscriber]
channel = "other"
policy = "drop"
disconnect_after_ms = 50
attach_timeout_ms = 3000
publisher_timeout_ms = 200
ring_capacity = 2048
lock_memory = true
idle = "yield"
stats = false
[publisher]
ring_capacity = 4096
)", "sub.toml");
  SubscriberConfig c;
  read_subscriber_config(f, c);
  CHECK(c.channel == "other");
  CHECK(c.policy == SlowConsumerPolicy::drop);
  CHECK(c.disconnect_after == std::chrono::milliseconds(50));
  CHECK(c.attach_timeout == std::chrono::milliseconds(3000));
  CHECK(c.publisher_timeout == std::chrono::milliseconds(200));
  CHECK(c.ring_capacity == 2048);
  CHECK(c.lock_memory);
  CHECK(c.idle == IdleKind::yield);
  CHECK_FALSE(c.stats);
  // [publisher] belongs to another reader: checking only the subscriber's sections passes...
  f.check_read({"", "subscriber", "rdma"});
  // ...while checking the whole file names the unread key.
  const std::string m = config_error_of([&] { f.check_all_read(); });
  CHECK_THAT(m, Catch::Contains("sub.toml:13:2: publisher: unknown section"));
}

TEST_CASE("absentKeysKeepTheirValues", "[config_file]") {
  ConfigFile f("", "empty.toml");
  PublisherConfig c;
  c.ring_capacity = 64;
  read_publisher_config(f, c);
  CHECK(c.ring_capacity == 64);
  CHECK(c.channel == "tickrail");
  f.check_all_read();
}

TEST_CASE("unknownKeyIsAnErrorNamingFileLineAndKey", "[config_file]") {
  ConfigFile f("channel = \"md\"\n[publisher]\nring_capacity = 64\nring_capacty = 128\n", "typo.toml");
  PublisherConfig c;
  read_publisher_config(f, c);
  const std::string m = config_error_of([&] { f.check_read({"", "publisher"}); });
  CHECK_THAT(m, Catch::Contains("typo.toml:4:1: publisher.ring_capacty: unknown key"));
}

TEST_CASE("unknownTopLevelKeyAndUnknownSectionAreErrors", "[config_file]") {
  {
    ConfigFile f("chanel = \"md\"\n", "top.toml");
    SubscriberConfig c;
    read_subscriber_config(f, c);
    CHECK_THAT(config_error_of([&] { f.check_read({""}); }),
               Catch::Contains("top.toml:1:1: chanel: unknown key"));
  }
  {
    ConfigFile f("[publsher]\nring_capacity = 64\n", "sect.toml");
    PublisherConfig c;
    read_publisher_config(f, c);
    CHECK_THAT(config_error_of([&] { f.check_all_read({"replay"}); }),
               Catch::Contains("sect.toml:1:2: publsher: unknown section"));
  }
  {
    // Sections of other programs are skipped whole.
    ConfigFile f("[replay]\nwhatever = 1\n", "other.toml");
    f.check_all_read({"replay"});
  }
}

TEST_CASE("unknownKeyInsideRdmaSubTableIsNamed", "[config_file]") {
  ConfigFile f("[subscriber.rdma]\nadress = \"10.0.0.1\"\n", "rdma.toml");
  SubscriberConfig c;
  read_subscriber_config(f, c);
  CHECK_THAT(config_error_of([&] { f.check_read({"subscriber"}); }),
             Catch::Contains("rdma.toml:2:1: subscriber.rdma.adress: unknown key"));
}

TEST_CASE("wrongTypeIsAnErrorNamingFileLineAndKey", "[config_file]") {
  ConfigFile f("[publisher]\nmax_subscribers = \"four\"\n", "type.toml");
  PublisherConfig c;
  const std::string m = config_error_of([&] { read_publisher_config(f, c); });
  CHECK_THAT(m, Catch::Contains("type.toml:2:1: publisher.max_subscribers: expected an integer, got a string"));

  ConfigFile g("[publisher]\nlock_memory = 1\n", "bool.toml");
  CHECK_THAT(config_error_of([&] { read_publisher_config(g, c); }),
             Catch::Contains("bool.toml:2:1: publisher.lock_memory: expected true or false"));

  ConfigFile h("[rdma]\ngroups = [\"239.1.1.1\", 7]\n", "arr.toml");
  CHECK_THAT(config_error_of([&] { read_publisher_config(h, c); }),
             Catch::Contains("arr.toml:2:24: rdma.groups: expected strings, got an integer"));

  ConfigFile i("publisher = 3\n", "tab.toml");
  CHECK_THAT(config_error_of([&] { read_publisher_config(i, c); }),
             Catch::Contains("tab.toml:1:1: publisher: expected a table"));
}

TEST_CASE("outOfRangeIntegerIsAnError", "[config_file]") {
  ConfigFile f("[rdma]\nport = 70000\n", "range.toml");
  PublisherConfig c;
  CHECK_THAT(config_error_of([&] { read_publisher_config(f, c); }),
             Catch::Contains("range.toml:2:1: rdma.port: 70000 is outside 0..65535"));
  ConfigFile g("[subscriber]\nattach_timeout_ms = -5\n", "neg.toml");
  SubscriberConfig s;
  CHECK_THAT(config_error_of([&] { read_subscriber_config(g, s); }),
             Catch::Contains("neg.toml:2:1: subscriber.attach_timeout_ms: -5 is outside"));
}

TEST_CASE("badEnumValueIsAnErrorNamingTheKeyOnce", "[config_file]") {
  ConfigFile f("transport = \"tcp\"\n", "enum.toml");
  PublisherConfig c;
  const std::string m = config_error_of([&] { read_publisher_config(f, c); });
  CHECK_THAT(m, Catch::Contains("enum.toml:1:1: transport: unknown transport 'tcp'"));
  CHECK_THAT(m, !Catch::Contains("transport: transport"));
  CHECK_THAT(m, !Catch::Contains("configuration error: configuration error"));

  ConfigFile g("[subscriber]\npolicy = \"never\"\n", "policy.toml");
  SubscriberConfig s;
  CHECK_THAT(config_error_of([&] { read_subscriber_config(g, s); }),
             Catch::Contains("policy.toml:2:1: subscriber.policy: unknown policy 'never'"));
}

TEST_CASE("valueRejectedByValidateIsLocated", "[config_file]") {
  ConfigFile f("[publisher]\n\nring_capacity = 1000\n", "validate.toml");
  PublisherConfig c;
  const std::string m = config_error_of([&] { read_publisher_config(f, c); });
  CHECK_THAT(m, Catch::Contains("validate.toml:3:1: publisher.ring_capacity: 1000 is not a power of two"));

  // A prefetch further than 1024 slots is refused; one as far as the ring or further is taken
  // (the publisher fetches at most half the ring ahead), so that a small ring needs no key but
  // its own.
  ConfigFile q("[publisher]\nring_capacity = 4096\nprefetch_ahead = 1025\n", "prefetch.toml");
  CHECK_THAT(config_error_of([&] { read_publisher_config(q, c); }),
             Catch::Contains("prefetch.toml:3:1: publisher.prefetch_ahead: 1025 is outside 0..1024"));
  CHECK(PublisherConfig{}.prefetch_ahead == 16);
  ConfigFile small("[publisher]\nring_capacity = 2\n", "prefetch.toml");
  PublisherConfig defaulted;
  read_publisher_config(small, defaulted);
  CHECK(defaulted.prefetch_ahead == 16);
  for (const auto& [ring, ahead] : {std::pair{2048, 1024}, {16, 16}, {2, 1024}, {2, 0}}) {
    ConfigFile ok("[publisher]\nring_capacity = " + std::to_string(ring) + "\nprefetch_ahead = " +
                      std::to_string(ahead) + "\n",
                  "prefetch.toml");
    PublisherConfig accepted;
    read_publisher_config(ok, accepted);
    CHECK(accepted.prefetch_ahead == static_cast<std::uint32_t>(ahead));
  }

  // A top-level key that validate() rejects is located at the top level.
  ConfigFile g("channel = \"\"\n", "top.toml");
  CHECK_THAT(config_error_of([&] { read_publisher_config(g, c); }),
             Catch::Contains("top.toml:1:1: channel: must not be empty"));
}

TEST_CASE("syntaxErrorNamesFileAndLine", "[config_file]") {
  const std::string m = config_error_of([] { ConfigFile f("[publisher]\nring_capacity = = 3\n", "syntax.toml"); });
  CHECK_THAT(m, Catch::StartsWith("syntax.toml:2:"));
}

TEST_CASE("appSectionsReadTheirOwnOptions", "[config_file]") {
  ConfigFile f("[replay]\nrate = 2.5e6\ncount = 10\nbook = true\ninput = \"x.itch\"\n", "app.toml");
  ConfigFile::Section s = f.section("replay");
  REQUIRE(s.present());
  double rate = 0;
  std::uint64_t count = 0;
  bool book = false;
  std::string input;
  s.get("rate", rate);
  s.get("count", count);
  s.get("book", book);
  s.get("input", input);
  CHECK(rate == 2.5e6);
  CHECK(count == 10);
  CHECK(book);
  CHECK(input == "x.itch");
  f.check_all_read();
  CHECK_FALSE(f.section("jitter").present());
  CHECK_THAT(s.where("count"), Catch::Equals("app.toml:3:1: replay.count"));
  CHECK_THAT(config_error_of([&] { s.fail("count", "too many"); }),
             Catch::Contains("app.toml:3:1: replay.count: too many"));
}

TEST_CASE("loadersReadFilesAndCheckTheirSections", "[config_file]") {
  TempFile good("transport = \"shm\"\nchannel = \"t\"\n[subscriber]\npolicy = \"drop\"\n[jitter]\ncpu = 1\n");
  CHECK(load_subscriber_config(good.path).policy == SlowConsumerPolicy::drop);
  CHECK(load_publisher_config(good.path).channel == "t");

  TempFile bad("[publisher]\nring = 3\n");
  const std::string m = config_error_of([&] { (void)load_publisher_config(bad.path); });
  CHECK_THAT(m, Catch::Contains(bad.path + ":2:1: publisher.ring: unknown key"));

  try {
    (void)load_publisher_config("/nonexistent/tickrail.toml");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.code() == make_error_code(Errc::not_found));
    CHECK_THAT(e.what(), Catch::Contains("/nonexistent/tickrail.toml"));
  }
}

TEST_CASE("durationsBeyond24HoursAreRejectedNamingFileLineAndKey", "[config_file]") {
  // 18446744073710 ms is ~2^64 ns: converted to clock cycles it overflowed, so a subscriber gave
  // up at once or was evicted after a short stall.
  for (const char* key : {"publisher_timeout_ms", "disconnect_after_ms", "attach_timeout_ms"}) {
    ConfigFile f("[subscriber]\n" + std::string(key) + " = 18446744073710\n", "sub.toml");
    SubscriberConfig c;
    const std::string m = config_error_of([&] { read_subscriber_config(f, c); });
    CHECK_THAT(m, Catch::Contains("sub.toml:2:1: subscriber." + std::string(key)) &&
                      Catch::Contains("..86400000 (24 h)"));
  }
  ConfigFile rdma("[rdma]\nconnect_timeout_ms = 86400001\n", "pub.toml");
  PublisherConfig pc;
  CHECK_THAT(config_error_of([&] { read_publisher_config(rdma, pc); }),
             Catch::Contains("pub.toml:2:1: rdma.connect_timeout_ms"));
  ConfigFile delay("[rdma]\nbatch_delay_ns = 1000000001\n", "pub.toml");
  PublisherConfig fresh;
  CHECK_THAT(config_error_of([&] { read_publisher_config(delay, fresh); }),
             Catch::Contains("pub.toml:2:1: rdma.batch_delay_ns"));

  // 24 h itself is accepted; 0 only where it means "do not wait".
  ConfigFile edge("[subscriber]\nattach_timeout_ms = 86400000\npublisher_timeout_ms = 86400000\n", "edge.toml");
  SubscriberConfig e;
  read_subscriber_config(edge, e);
  CHECK(e.attach_timeout == kMaxDuration);
  ConfigFile zero("[subscriber]\npublisher_timeout_ms = 0\n", "zero.toml");
  CHECK_THAT(config_error_of([&] { read_subscriber_config(zero, e); }), Catch::Contains("publisher_timeout_ms"));
}

TEST_CASE("validateRejectsDurationsBeyond24HoursSetInCode", "[config_file]") {
  SubscriberConfig s;
  s.disconnect_after = std::chrono::milliseconds(18446744073710);
  CHECK_THAT(config_error_of([&] { s.validate(); }), Catch::Contains("disconnect_after_ms"));
  PublisherConfig p;
  p.rdma.heartbeat_interval = std::chrono::milliseconds(INT64_MAX);
  CHECK_THAT(config_error_of([&] { p.validate(); }), Catch::Contains("rdma.heartbeat_interval_ms"));
  CHECK_THAT(config_error_of([] { validate_duration("wait_timeout_ms", std::chrono::milliseconds(-1)); }),
             Catch::Contains("wait_timeout_ms: -1 is outside 0..86400000"));
  validate_duration("wait_timeout_ms", kMaxDuration);
}

TEST_CASE("aConfigThatIsNotARegularFileOrIsTooLargeIsRefused", "[config_file]") {
  // /dev/zero and a FIFO would be read for ever: refused before reading.
  CHECK_THAT(config_error_of([] { ConfigFile f("/dev/zero"); }), Catch::Contains("not a regular file"));
  const std::string fifo = (std::filesystem::temp_directory_path() /
                            ("tickrail-config-test-fifo-" + std::to_string(getpid()))).string();
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THAT(config_error_of([&] { ConfigFile f(fifo); }), Catch::Contains("not a regular file"));
  std::remove(fifo.c_str());
  // A comment one byte over the limit.
  TempFile big("#" + std::string(kMaxConfigBytes, 'x'));
  CHECK_THAT(config_error_of([&] { ConfigFile f(big.path); }), Catch::Contains("larger than"));
  TempFile fits("#" + std::string(kMaxConfigBytes - 2, 'x') + "\n");
  CHECK_NOTHROW(ConfigFile(fits.path));
}
