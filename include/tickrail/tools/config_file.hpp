// ConfigFile: TOML configuration files (toml++), read into the typed configs of config.hpp and
// into a program's own option structs. Control plane: everything here allocates and throws.
//
// Layout of a file (configs/*.toml are commented examples):
//
//   transport = "shm"          # top-level keys apply to the publisher and the subscriber:
//   channel = "tickrail"       #   transport, channel, shm_dir
//   [publisher]                # PublisherConfig fields (may repeat a top-level key to override it)
//   [subscriber]               # SubscriberConfig fields (idem)
//   [rdma]                     # RdmaConfig fields, for both sides of an RC or UD channel
//   [publisher.rdma], [subscriber.rdma]   # per-side overrides of [rdma]
//   [replay], [jitter], ...    # a program's own section
//
// Keys are the struct field names in snake_case; durations are integers with their unit in the
// key (`attach_timeout_ms`, `batch_delay_ns`); enums are strings ("shm", "block", "busy_spin").
// Every error is Error(Errc::config_error) whose message starts with "file:line:column:" and
// names the key ("publisher.ring_capacity"): a syntax error, a value of the wrong type or out of
// range, a value that validate() rejects, and a key that no reader consumed (a typo).
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tickrail/config.hpp"
#include "tickrail/error.hpp"
#include "tickrail/failover.hpp"

namespace tickrail {

// A configuration file larger than this is refused (no settings file comes near it).
inline constexpr std::size_t kMaxConfigBytes = std::size_t{1} << 20;

class ConfigFile {
 public:
  // Reads and parses a file. Throws Error(not_found) when it cannot be read, Error(config_error)
  // "path:line:column: <what>" when it is not TOML, and when it is not a regular file or is
  // larger than kMaxConfigBytes.
  explicit ConfigFile(const std::string& path);
  // Parses TOML text; `name` stands for the file in messages.
  ConfigFile(std::string_view text, std::string name);
  ~ConfigFile();
  ConfigFile(ConfigFile&&) noexcept;
  ConfigFile& operator=(ConfigFile&&) noexcept;
  ConfigFile(const ConfigFile&) = delete;
  ConfigFile& operator=(const ConfigFile&) = delete;

  struct Impl;

  // A table of the file (possibly absent: then every get() leaves its output unchanged). Each
  // get() reads `key` into `out` when the key is present, marks it read, and throws
  // Error(config_error) naming "file:line:column: section.key" when the value has the wrong type
  // or does not fit `out`.
  class Section {
   public:
    [[nodiscard]] bool present() const noexcept { return table_ != nullptr; }
    [[nodiscard]] bool has(std::string_view key) const;
    [[nodiscard]] const std::string& path() const noexcept { return path_; }  // "publisher.rdma"

    void get(std::string_view key, bool& out);
    void get(std::string_view key, std::string& out);
    void get(std::string_view key, std::vector<std::string>& out);
    void get(std::string_view key, double& out);
    // Integers: the TOML integer must fit T.
    template <class T>
      requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
    void get(std::string_view key, T& out) {
      std::int64_t v = 0;
      if (get_integer(key, v, static_cast<std::int64_t>(min_of<T>()), max_of<T>())) {
        out = static_cast<T>(v);
      }
    }
    // Durations: an integer count of the duration's unit (the key says which: *_ms, *_ns).
    template <class Rep, class Period>
    void get(std::string_view key, std::chrono::duration<Rep, Period>& out) {
      std::int64_t v = 0;
      if (get_integer(key, v, 0, INT64_MAX)) out = std::chrono::duration<Rep, Period>(v);
    }
    // Enums: a string given to parse(value, key), which throws Error(config_error) for a value
    // it does not know (parse_transport, parse_policy, parse_idle_kind...).
    template <class E, class Parse>
    void get_enum(std::string_view key, E& out, Parse&& parse) {
      std::string s;
      if (!get_string_for(key, s)) return;
      try {
        out = parse(std::string_view(s), qualified(key));
      } catch (const Error& e) {
        fail_with(key, e);
      }
    }

    // A sub-table ("rdma" in [publisher.rdma]); absent when the file has none.
    [[nodiscard]] Section section(std::string_view name);

    // "file:line:column: section.key" (just "file" when the key is absent).
    [[nodiscard]] std::string where(std::string_view key) const;
    // Throws Error(config_error) "where(key): why".
    [[noreturn]] void fail(std::string_view key, const std::string& why) const;
    // Runs validate (a validate() of config.hpp, or any check throwing Error(config_error)
    // whose message starts with a key name, "ring_capacity: ..."), and rethrows its error with
    // the location of that key in this section.
    template <class F>
    void validated(F&& validate) const {
      try {
        validate();
      } catch (const Error& e) {
        if (e.code() != make_error_code(Errc::config_error)) throw;
        rethrow_located(e);
      }
    }

   private:
    friend class ConfigFile;
    Section(ConfigFile::Impl* file, const void* table, std::string path)
        : file_(file), table_(table), path_(std::move(path)) {}
    template <class T>
    static constexpr std::int64_t min_of() {
      return std::is_signed_v<T> ? static_cast<std::int64_t>(std::numeric_limits<T>::min()) : 0;
    }
    template <class T>
    static constexpr std::int64_t max_of() {
      return std::numeric_limits<T>::max() > static_cast<std::uint64_t>(INT64_MAX)
                 ? INT64_MAX
                 : static_cast<std::int64_t>(std::numeric_limits<T>::max());
    }
    bool get_integer(std::string_view key, std::int64_t& out, std::int64_t min, std::int64_t max);
    bool get_string_for(std::string_view key, std::string& out);
    [[nodiscard]] std::string qualified(std::string_view key) const;
    [[noreturn]] void rethrow_located(const Error& e) const;
    [[noreturn]] void fail_with(std::string_view key, const Error& e) const;

    ConfigFile::Impl* file_;
    const void* table_;  // const toml::table*, kept out of this header
    std::string path_;
  };

  [[nodiscard]] Section root();
  [[nodiscard]] Section section(std::string_view name);
  [[nodiscard]] const std::string& name() const noexcept;

  // Throws Error(config_error) for the first key, in file order, that no get() read, within the
  // top-level tables listed in `sections` ("" stands for the top-level keys themselves).
  void check_read(std::initializer_list<std::string_view> sections) const;
  // The same over the whole file, except the top-level tables in `other_programs` (sections
  // that another program reads and checks). A table no one knows is an unknown key too.
  void check_all_read(std::initializer_list<std::string_view> other_programs = {}) const;

 private:
  std::unique_ptr<Impl> impl_;
};

// Reads the top-level keys, [publisher], [rdma] and [publisher.rdma] into `out` (keys absent
// from the file keep out's values) and validates the result.
void read_publisher_config(ConfigFile& file, PublisherConfig& out);
// Reads the top-level keys, [subscriber], [rdma] and [subscriber.rdma], and validates.
void read_subscriber_config(ConfigFile& file, SubscriberConfig& out);
// Reads an RdmaConfig table (the [rdma] keys) into `out`.
void read_rdma_config(ConfigFile::Section section, RdmaConfig& out);

// Line B of a failover subscriber (docs/failover.md): line A's SubscriberConfig with the fields
// set here changed (an empty one, or port 0, keeps line A's).
struct LineB {
  std::optional<TransportKind> transport;
  std::string channel, address, group, device;
  std::uint16_t port = 0;
  // Any field set asks for two lines.
  [[nodiscard]] bool given() const noexcept {
    return transport.has_value() || !channel.empty() || !address.empty() || !group.empty() || !device.empty() ||
           port != 0;
  }
  // Throws Error(config_error) for a field line B's transport does not use (a group on shm...).
  [[nodiscard]] SubscriberConfig apply(const SubscriberConfig& line_a) const;
};
// Reads [failover] (line_b_transport, line_b_channel, line_b_address, line_b_port, line_b_group,
// line_b_device, window, hole_timeout_us, reattach_every_ms, recovery_delay_us) and validates its settings; the
// lines are validated once line A is final (FailoverConfig::validate).
void read_failover_config(ConfigFile& file, LineB& b, FailoverConfig& out);

// One-call loaders: defaults, then the file; unknown keys in the sections they read are errors
// (other sections are left to the programs that own them).
[[nodiscard]] PublisherConfig load_publisher_config(const std::string& path);
[[nodiscard]] SubscriberConfig load_subscriber_config(const std::string& path);

}  // namespace tickrail
