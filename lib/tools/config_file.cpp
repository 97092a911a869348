#include "tickrail/tools/config_file.hpp"

#include <toml++/toml.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <unordered_set>

namespace tickrail {

struct ConfigFile::Impl {
  std::string name;
  toml::table root;
  std::unordered_set<const toml::node*> read;  // values consumed, tables entered
};

namespace {

const toml::table* as_table(const void* t) { return static_cast<const toml::table*>(t); }

std::string at(const std::string& file, const toml::source_region& r) {
  if (r.begin.line == 0) return file;
  return file + ":" + std::to_string(r.begin.line) + ":" + std::to_string(r.begin.column);
}

// std::system_error appends ": <category message>" to what(); strip it before re-wrapping.
std::string bare(const Error& e) {
  std::string m = e.what();
  const std::string tail = ": " + e.code().message();
  if (m.size() >= tail.size() && m.compare(m.size() - tail.size(), tail.size(), tail) == 0) {
    m.resize(m.size() - tail.size());
  }
  return m;
}

const char* type_name(toml::node_type t) {
  switch (t) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

std::string join(std::string_view path, std::string_view key) {
  return path.empty() ? std::string(key) : std::string(path) + "." + std::string(key);
}

ConfigFile::Impl parse(std::string_view text, std::string name) {
  ConfigFile::Impl impl;
  impl.name = std::move(name);
  try {
    impl.root = toml::parse(text, impl.name);
  } catch (const toml::parse_error& e) {
    throw Error(Errc::config_error, at(impl.name, e.source()) + ": " + std::string(e.description()));
  }
  return impl;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
ConfigFile::ConfigFile(const std::string& path) {
  // A device, a FIFO or /dev/zero would be read for ever: only a regular file of sane size.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw Error(Errc::not_found, "config file '" + path + "': cannot be read: " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) {
    throw Error(Errc::config_error, "config file '" + path + "': not a regular file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::not_found, "config file '" + path + "': cannot be read");
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw Error(Errc::config_error, "config file '" + path + "': read failed");
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) {
    throw Error(Errc::config_error, "config file '" + path + "': larger than " +
                                        std::to_string(kMaxConfigBytes) + " bytes");
  }
  impl_ = std::make_unique<Impl>(parse(text, path));
}

ConfigFile::ConfigFile(std::string_view text, std::string name)
    : impl_(std::make_unique<Impl>(parse(text, std::move(name)))) {}

ConfigFile::~ConfigFile() = default;
ConfigFile::ConfigFile(ConfigFile&&) noexcept = default;
ConfigFile& ConfigFile::operator=(ConfigFile&&) noexcept = default;

const std::string& ConfigFile::name() const noexcept { return impl_->name; }

ConfigFile::Section ConfigFile::root() { return Section(impl_.get(), &impl_->root, ""); }

ConfigFile::Section ConfigFile::section(std::string_view name) { return root().section(name); }

namespace {

// Reports the first unread key of `t` (path `path`), descending into tables that were entered.
void check_table(const ConfigFile::Impl& f, const toml::table& t, const std::string& path,
                 bool leaves_only, std::initializer_list<std::string_view> skip) {
  for (auto&& [k, v] : t) {
    const std::string key = join(path, k.str());
    if (v.is_table()) {
      if (leaves_only) continue;
      bool skipped = false;
      for (std::string_view s : skip) skipped = skipped || s == key;
      if (skipped) continue;
      if (f.read.count(&v) == 0) {
        throw Error(Errc::config_error, at(f.name, k.source()) + ": " + key +
                                            ": unknown section");
      }
      check_table(f, *v.as_table(), key, false, {});
    } else if (f.read.count(&v) == 0) {
      throw Error(Errc::config_error, at(f.name, k.source()) + ": " + key + ": unknown key");
    }
  }
}

}  // namespace

void ConfigFile::check_read(std::initializer_list<std::string_view> sections) const {
  for (std::string_view s : sections) {
    if (s.empty()) {
      check_table(*impl_, impl_->root, "", true, {});
      continue;
    }
    const toml::node* n = impl_->root.get(s);
    if (n != nullptr && n->is_table()) check_table(*impl_, *n->as_table(), std::string(s), false, {});
  }
}

void ConfigFile::check_all_read(std::initializer_list<std::string_view> other_programs) const {
  check_table(*impl_, impl_->root, "", false, other_programs);
}

// ---------------------------------------------------------------------------------------------
bool ConfigFile::Section::has(std::string_view key) const {
  return table_ != nullptr && as_table(table_)->contains(key);
}

std::string ConfigFile::Section::qualified(std::string_view key) const { return join(path_, key); }

std::string ConfigFile::Section::where(std::string_view key) const {
  if (table_ != nullptr) {
    const auto it = as_table(table_)->find(key);
    if (it != as_table(table_)->end()) return at(file_->name, it->first.source()) + ": " + qualified(key);
  }
  return file_->name + ": " + qualified(key);
}

void ConfigFile::Section::fail(std::string_view key, const std::string& why) const {
  std::string w = why;
  // A parser's message repeats the key ("publisher.policy: unknown ..."): keep it once.
  const std::string q = qualified(key) + ": ";
  if (w.rfind(q, 0) == 0) w.erase(0, q.size());
  throw Error(Errc::config_error, where(key) + ": " + w);
}

ConfigFile::Section ConfigFile::Section::section(std::string_view name) {
  const std::string p = qualified(name);
  if (table_ == nullptr) return Section(file_, nullptr, p);
  const toml::node* n = as_table(table_)->get(name);
  if (n == nullptr) return Section(file_, nullptr, p);
  if (!n->is_table()) fail(name, std::string("expected a table, got ") + type_name(n->type()));
  file_->read.insert(n);
  return Section(file_, n->as_table(), p);
}

namespace {
const toml::node* find(ConfigFile::Impl* f, const void* table, std::string_view key) {
  if (table == nullptr) return nullptr;
  const toml::node* n = as_table(table)->get(key);
  if (n != nullptr) f->read.insert(n);
  return n;
}
}  // namespace

void ConfigFile::Section::get(std::string_view key, bool& out) {
  const toml::node* n = find(file_, table_, key);
  if (n == nullptr) return;
  if (!n->is_boolean()) fail(key, std::string("expected true or false, got ") + type_name(n->type()));
  out = n->as_boolean()->get();
}

void ConfigFile::Section::get(std::string_view key, std::string& out) {
  (void)get_string_for(key, out);
}

bool ConfigFile::Section::get_string_for(std::string_view key, std::string& out) {
  const toml::node* n = find(file_, table_, key);
  if (n == nullptr) return false;
  if (!n->is_string()) fail(key, std::string("expected a string, got ") + type_name(n->type()));
  out = n->as_string()->get();
  return true;
}

void ConfigFile::Section::get(std::string_view key, std::vector<std::string>& out) {
  const toml::node* n = find(file_, table_, key);
  if (n == nullptr) return;
  if (!n->is_array()) fail(key, std::string("expected an array of strings, got ") + type_name(n->type()));
  std::vector<std::string> v;
  for (const toml::node& e : *n->as_array()) {
    if (!e.is_string()) {
      throw Error(Errc::config_error, at(file_->name, e.source()) + ": " + qualified(key) +
                                          ": expected strings, got " + type_name(e.type()));
    }
    v.push_back(e.as_string()->get());
  }
  out = std::move(v);
}

void ConfigFile::Section::get(std::string_view key, double& out) {
  const toml::node* n = find(file_, table_, key);
  if (n == nullptr) return;
  if (n->is_floating_point()) {
    out = n->as_floating_point()->get();
  } else if (n->is_integer()) {
    out = static_cast<double>(n->as_integer()->get());
  } else {
    fail(key, std::string("expected a number, got ") + type_name(n->type()));
  }
}

bool ConfigFile::Section::get_integer(std::string_view key, std::int64_t& out, std::int64_t min,
                                      std::int64_t max) {
  const toml::node* n = find(file_, table_, key);
  if (n == nullptr) return false;
  if (!n->is_integer()) fail(key, std::string("expected an integer, got ") + type_name(n->type()));
  const std::int64_t v = n->as_integer()->get();
  if (v < min || v > max) {
    fail(key, std::to_string(v) + " is outside " + std::to_string(min) + ".." + std::to_string(max));
  }
  out = v;
  return true;
}

void ConfigFile::Section::fail_with(std::string_view key, const Error& e) const {
  fail(key, bare(e));
}

void ConfigFile::Section::rethrow_located(const Error& e) const {
  // message: "key: why" or "rdma.key: why". Find the key in this section, its sub-tables, or at
  // the top level (keys shared by publisher and subscriber), in that order.
  const std::string m = bare(e);
  const auto colon = m.find(": ");
  if (colon == std::string::npos) throw Error(Errc::config_error, file_->name + ": " + m);
  const std::string key = m.substr(0, colon);
  const std::string why = m.substr(colon + 2);
  std::string_view sub;
  std::string_view leaf = key;
  if (const auto dot = key.rfind('.'); dot != std::string::npos) {
    sub = std::string_view(key).substr(0, dot);
    leaf = std::string_view(key).substr(dot + 1);
  }
  auto located = [&](const toml::table* t, const std::string& path) -> bool {
    if (t == nullptr) return false;
    const toml::node* n = sub.empty() ? t : t->at_path(sub).node();
    if (n == nullptr || !n->is_table()) return false;
    const auto it = n->as_table()->find(leaf);
    if (it == n->as_table()->end()) return false;
    throw Error(Errc::config_error, at(file_->name, it->first.source()) + ": " +
                                        join(path, key) + ": " + why);
  };
  located(as_table(table_), path_);
  located(&file_->root, "");
  // The value came from a default or from code: no line to name.
  throw Error(Errc::config_error, file_->name + ": " + qualified(key) + ": " + why);
}

// ---------------------------------------------------------------------------------------------
namespace {

template <class Config>
void read_common(ConfigFile::Section s, Config& out) {
  s.get_enum("transport", out.transport, parse_transport);
  s.get("channel", out.channel);
  s.get("shm_dir", out.shm_dir);
  s.get("housekeeping_cpus", out.housekeeping_cpus);
}

}  // namespace

void read_rdma_config(ConfigFile::Section s, RdmaConfig& out) {
  s.get("device", out.device);
  s.get("address", out.address);
  s.get("port", out.port);
  s.get("token", out.token);
  s.get("allow", out.allow);
  s.get("wait_for", out.wait_for);
  s.get("connect_timeout_ms", out.connect_timeout);
  s.get("heartbeat_interval_ms", out.heartbeat_interval);
  s.get_enum("polling", out.polling, parse_rc_polling);
  s.get("signal_every", out.signal_every);
  s.get("credit_every", out.credit_every);
  s.get("recv_batch", out.recv_batch);
  s.get("split_commit", out.split_commit);
  s.get("groups", out.groups);
  s.get("max_ticks_per_datagram", out.max_ticks_per_datagram);
  s.get("batch_delay_ns", out.batch_delay);
  s.get("history", out.history);
  s.get("reorder_buffer", out.reorder_buffer);
  s.get("late_join_recover", out.late_join_recover);
  s.get("recovery_delay_us", out.recovery_delay);
  s.get("recv_buffers", out.recv_buffers);
}

static void read_state_config(ConfigFile::Section s, StateConfig& out) {
  s.get("enabled", out.enabled);
  s.get("capacity", out.capacity);
  s.get("quote", out.quote);
  s.get("trade", out.trade);
  s.get("status", out.status);
}

void read_publisher_config(ConfigFile& file, PublisherConfig& out) {
  ConfigFile::Section root = file.root();
  read_common(root, out);
  read_rdma_config(file.section("rdma"), out.rdma);
  ConfigFile::Section p = file.section("publisher");
  read_common(p, out);
  p.get("max_subscribers", out.max_subscribers);
  p.get("ring_capacity", out.ring_capacity);
  p.get("stamp_send_time", out.stamp_send_time);
  p.get("prefetch_ahead", out.prefetch_ahead);
  p.get("lock_memory", out.lock_memory);
  p.get("conductor_period_ms", out.conductor_period);
  p.get("allow_users", out.allow_users);
  p.get("allow_groups", out.allow_groups);
  p.get("wait_for_users", out.wait_for_users);
  p.get("wait_for_groups", out.wait_for_groups);
  p.get("stats", out.stats);
  read_state_config(file.section("state"), out.state);
  read_state_config(p.section("state"), out.state);
  read_rdma_config(p.section("rdma"), out.rdma);
  p.validated([&] { out.validate(); });
}

void read_subscriber_config(ConfigFile& file, SubscriberConfig& out) {
  ConfigFile::Section root = file.root();
  read_common(root, out);
  read_rdma_config(file.section("rdma"), out.rdma);
  ConfigFile::Section s = file.section("subscriber");
  read_common(s, out);
  s.get_enum("policy", out.policy, parse_policy);
  s.get_enum("start", out.start, parse_start_mode);
  s.get("disconnect_after_ms", out.disconnect_after);
  s.get("attach_timeout_ms", out.attach_timeout);
  s.get("publisher_timeout_ms", out.publisher_timeout);
  s.get("ring_capacity", out.ring_capacity);
  s.get("lock_memory", out.lock_memory);
  s.get("publisher_users", out.publisher_users);
  s.get_enum("idle", out.idle, [](std::string_view v, const std::string&) { return parse_idle_kind(v); });
  s.get("stats", out.stats);
  read_rdma_config(s.section("rdma"), out.rdma);
  s.validated([&] { out.validate(); });
}

SubscriberConfig LineB::apply(const SubscriberConfig& line_a) const {
  SubscriberConfig b = line_a;
  if (transport) b.transport = *transport;
  if (!channel.empty()) b.channel = channel;
  const auto refuse = [&](const char* what) {
    throw Error(Errc::config_error, std::string("failover line B: ") + what + " does not apply to line B's transport " +
                                        to_string(b.transport));
  };
  if (b.transport == TransportKind::shm && (!address.empty() || port != 0 || !device.empty())) {
    refuse("an address, port or device");
  }
  if (b.transport != TransportKind::ud && !group.empty()) refuse("a multicast group");
  if (!address.empty()) b.rdma.address = address;
  if (port != 0) b.rdma.port = port;
  if (!group.empty()) b.rdma.groups = {group};
  if (!device.empty()) b.rdma.device = device;
  // Line B waits longer than line A before a read (FailoverConfig::line_recovery_delay): line
  // A's own delay is not line B's.
  b.rdma.recovery_delay = std::chrono::microseconds(0);
  return b;
}

void read_failover_config(ConfigFile& file, LineB& b, FailoverConfig& out) {
  ConfigFile::Section s = file.section("failover");
  // "": line A's transport.
  s.get_enum("line_b_transport", b.transport,
             [](std::string_view v, const std::string& key) -> std::optional<TransportKind> {
               if (v.empty()) return std::nullopt;
               return parse_transport(v, key);
             });
  s.get("line_b_channel", b.channel);
  s.get("line_b_address", b.address);
  s.get("line_b_port", b.port);
  s.get("line_b_group", b.group);
  s.get("line_b_device", b.device);
  s.get("window", out.window);
  s.get("hole_timeout_us", out.hole_timeout);
  s.get("reattach_every_ms", out.reattach_every);
  s.get("recovery_delay_us", out.recovery_delay);
  s.validated([&] { out.validate_settings(); });
}

PublisherConfig load_publisher_config(const std::string& path) {
  ConfigFile f(path);
  PublisherConfig c;
  read_publisher_config(f, c);
  f.check_read({"", "publisher", "rdma", "state"});
  return c;
}

SubscriberConfig load_subscriber_config(const std::string& path) {
  ConfigFile f(path);
  SubscriberConfig c;
  read_subscriber_config(f, c);
  f.check_read({"", "subscriber", "rdma"});
  return c;
}

}  // namespace tickrail
