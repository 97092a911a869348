// Reader side of the counters file: enumerate the files of a directory, snapshot each one, tell
// dead processes apart, and render the snapshots for tickrail-stat. Control plane.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "core/enum_names.hpp"
#include "core/process_identity.hpp"
#include "tickrail/tools/stats_reader.hpp"
#include "core/stats_words.hpp"
#include "tools/report/format.hpp"
#include "tickrail/error.hpp"

namespace tickrail::stats {

namespace {

constexpr std::string_view kPrefix = "tickrail-stat.";
constexpr detail::EnumName<ProcessStatus> kStatusNames[] = {
    {ProcessStatus::alive, "alive"},
    {ProcessStatus::dead, "dead"},
    {ProcessStatus::starting, "starting"},
    {ProcessStatus::incompatible, "incompatible"}};
constexpr int kSeqlockTries = 1000;

// The pid in a file name "tickrail-stat.<pid>", or 0.
int pid_from_name(std::string_view name) {
  const std::size_t slash = name.rfind('/');
  if (slash != std::string_view::npos) name.remove_prefix(slash + 1);
  if (name.substr(0, kPrefix.size()) != kPrefix) return 0;
  name.remove_prefix(kPrefix.size());
  int pid = 0;
  const auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
  return ec == std::errc() && p == name.data() + name.size() && pid > 0 ? pid : 0;
}

// The name of a value read from the file, "unknown" for one no value of E has.
template <class E>
const char* word_name(std::uint64_t w) {
  const auto e = static_cast<E>(w);
  return static_cast<std::uint64_t>(e) == w ? to_string(e) : "unknown";
}

// The file is read with pread into private memory, never mapped: whoever can write it (its
// owner, root) may truncate it while we read, and a mapping would then raise SIGBUS. A short read
// is reported as an incomplete file instead. Each aligned word is copied by the kernel; a counter
// racing with its writer is not promised to be copied whole (only a wrong number, never a fault),
// while identity and rows stay guarded by their sequence words, re-read around each copy.
bool pread_all(int fd, void* buf, std::size_t n, std::size_t off) {
  auto* p = static_cast<char*>(buf);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    off += static_cast<std::size_t>(r);
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

// The words that guard a block: identity_seq, in_use and rows_seq.
struct Guards {
  std::uint64_t identity_seq = 0;
  std::uint32_t in_use = 0;
  std::uint64_t rows_seq = 0;
};

enum class Copied { ok, free, busy, short_file };

// Copies block `i` into `b` between two reads of its guards. `rows_ok` tells whether the rows
// were not being rewritten meanwhile.
Copied copy_block(int fd, std::uint32_t i, Block& b, bool& rows_ok) {
  const std::size_t off = sizeof(FileHeader) + std::size_t{i} * sizeof(Block);
  const auto guards = [&](Guards& g) {
    Word seq[1];
    std::atomic<std::uint32_t> in_use;
    Word rows_seq[1];
    if (!pread_all(fd, seq, sizeof seq, off + offsetof(Block, identity_seq)) ||
        !pread_all(fd, &in_use, sizeof in_use, off + offsetof(Block, in_use)) ||
        !pread_all(fd, rows_seq, sizeof rows_seq, off + offsetof(Block, rows_seq))) {
      return false;
    }
    g = {seq[0].load(std::memory_order_relaxed), in_use.load(std::memory_order_relaxed),
         rows_seq[0].load(std::memory_order_relaxed)};
    return true;
  };
  Guards before;
  Guards after;
  if (!guards(before)) return Copied::short_file;
  if (before.in_use != 1) return Copied::free;
  if (before.identity_seq & 1U) return Copied::busy;
  if (!pread_all(fd, &b, sizeof b, off) || !guards(after)) return Copied::short_file;
  if (after.in_use != 1 || after.identity_seq != before.identity_seq) return Copied::busy;
  rows_ok = (before.rows_seq & 1U) == 0 && after.rows_seq == before.rows_seq;
  return Copied::ok;
}

// The identity of a consistent copy; false when the kind is not one we know.
bool read_identity(const Block& b, BlockSnapshot& out) {
  const std::uint64_t kind = b.kind.load(std::memory_order_relaxed);
  if (kind != static_cast<std::uint64_t>(BlockKind::publisher) &&
      kind != static_cast<std::uint64_t>(BlockKind::subscriber) &&
      kind != static_cast<std::uint64_t>(BlockKind::failover)) {
    return false;
  }
  out.kind = static_cast<BlockKind>(kind);
  out.transport = word_name<TransportKind>(b.transport.load(std::memory_order_relaxed));
  out.registered_ns = b.registered_ns.load(std::memory_order_relaxed);
  out.label = load_name(b.label, kNameWords);
  if (out.kind == BlockKind::failover) {
    out.lines[0].transport = out.transport;
    out.lines[0].label = out.label;
    out.lines[1].transport = word_name<TransportKind>(b.transport_b.load(std::memory_order_relaxed));
    out.lines[1].label = load_name(b.label_b, kNameWords);
  }
  return true;
}

// A failover's lines from its counters. A line down now has been down since down_since_ns: that
// time counts until `now_ns` (0: a dead process, whose time stopped with it).
void read_failover_lines(BlockSnapshot& s, std::uint64_t now_ns) {
  for (int i = 0; i < 2; ++i) {
    FailoverLineSnapshot& l = s.lines[static_cast<std::size_t>(i)];
    const auto word = [&](FoLineCounter c) { return s.counters[fo_word(i, c)]; };
    l.up = word(FoLineCounter::up) != 0;
    l.first = word(FoLineCounter::first);
    l.duplicates = word(FoLineCounter::duplicates);
    l.downs = word(FoLineCounter::downs);
    l.down_since_ns = l.up ? 0 : word(FoLineCounter::down_since_ns);
    l.down_ns = word(FoLineCounter::down_ns);
    if (now_ns != 0 && l.down_since_ns != 0 && now_ns > l.down_since_ns) l.down_ns += now_ns - l.down_since_ns;
  }
}

std::uint64_t unix_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

void read_rows(const Block& b, BlockSnapshot& out) {
  const auto n = static_cast<std::uint32_t>(
      std::min<std::uint64_t>(b.row_count.load(std::memory_order_relaxed), kMaxRows));
  out.rows.assign(n, RowSnapshot{});
  for (std::uint32_t r = 0; r < n; ++r) {
    const Row& in = b.rows[r];
    RowSnapshot& o = out.rows[r];
    o.position = in.position.load(std::memory_order_relaxed);
    o.lag = in.lag.load(std::memory_order_relaxed);
    o.back_pressure = in.back_pressure.load(std::memory_order_relaxed);
    o.slot = static_cast<std::uint32_t>(in.slot.load(std::memory_order_relaxed));
    o.pid = static_cast<int>(static_cast<std::int64_t>(in.pid.load(std::memory_order_relaxed)));
    o.policy = word_name<SlowConsumerPolicy>(in.policy.load(std::memory_order_relaxed));
    o.state = load_name(in.state, std::size(in.state));
    o.peer = load_name(in.peer, std::size(in.peer));
  }
  out.refreshed_ns = b.refreshed_ns.load(std::memory_order_relaxed);
  out.rows_consistent = true;
}

// Block `i` of the file, retried while its writer rewrites it. False: the file is shorter now.
bool read_block(int fd, std::uint32_t i, Block& b, std::vector<BlockSnapshot>& out, std::uint64_t now_ns) {
  for (int t = 0; t < kSeqlockTries; ++t) {
    bool rows_ok = false;
    const Copied c = copy_block(fd, i, b, rows_ok);
    if (c == Copied::short_file) return false;
    if (c == Copied::free) return true;
    if (c == Copied::busy) continue;
    BlockSnapshot s;
    s.index = i;
    if (!read_identity(b, s)) return true;
    if (s.kind == BlockKind::publisher && !rows_ok && t + 1 < kSeqlockTries) continue;
    const std::uint32_t st_raw = b.state.load(std::memory_order_relaxed);
    s.state = st_raw <= static_cast<std::uint32_t>(EndpointState::closed)
                  ? static_cast<EndpointState>(st_raw)
                  : EndpointState::closed;
    for (std::uint32_t k = 0; k < kCounters; ++k) {
      s.counters[k] = counter_word(b, s.kind, k)->load(std::memory_order_relaxed);
    }
    s.rows_consistent = false;
    if (s.kind == BlockKind::publisher && rows_ok) read_rows(b, s);
    if (s.kind == BlockKind::failover) read_failover_lines(s, now_ns);
    out.push_back(std::move(s));
    return true;
  }
  return true;
}

// Whether the file's owner may speak for process `pid`: root, or one of the process's uids.
// Anyone may create a file named after any pid in a shared directory such as /dev/shm.
std::optional<std::string> foreign_owner(uid_t owner, int pid, const std::string& proc_root) {
  if (owner == 0) return std::nullopt;
  const std::vector<uid_t> uids = detail::process_uids(pid, proc_root);
  if (uids.empty() || std::find(uids.begin(), uids.end(), owner) != uids.end()) return std::nullopt;
  return "owned by uid " + std::to_string(owner) + " but process " + std::to_string(pid) +
         " runs as uid " + std::to_string(uids[0]) + ": not its counters, not read";
}

struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
};

class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  [[nodiscard]] int get() const noexcept { return fd_; }

 private:
  int fd_;
};

void set_liveness(ProcessSnapshot& p, std::uint64_t file_start_time, const std::string& proc_root) {
  const std::optional<std::uint64_t> now_start = detail::process_start_time(p.pid, proc_root);
  if (!now_start) {
    p.status = ProcessStatus::dead;
    p.note = "process " + std::to_string(p.pid) + " is gone";
  } else if (file_start_time != 0 && *now_start != file_start_time) {
    p.status = ProcessStatus::dead;
    p.note = "pid " + std::to_string(p.pid) + " now belongs to another process (start time " +
             std::to_string(*now_start) + ", file says " + std::to_string(file_start_time) + ")";
  } else {
    p.status = ProcessStatus::alive;
  }
}

void mark_incomplete(ProcessSnapshot& p, int fd) {
  struct stat st {};
  const long long now = ::fstat(fd, &st) == 0 ? static_cast<long long>(st.st_size) : -1;
  p.status = ProcessStatus::incompatible;
  p.note = "incomplete: the file shrank (now " + std::to_string(now) +
           " bytes) while it was read; not read";
  p.blocks.clear();
}

// Why a file of another layout is not read: the process runs an older or a newer tickrail.
std::string layout_note(const std::string& path, const FileHeader& h, std::size_t size) {
  if (h.version == kVersion) {
    return path + ": counters layout version " + std::to_string(h.version) + " but another geometry (" +
           std::to_string(size) + " bytes, blocks of " + std::to_string(h.block_size) + "): not read";
  }
  return path + ": counters layout version " + std::to_string(h.version) + ", this tickrail-stat reads version " +
         std::to_string(kVersion) + " only (the process runs " + (h.version < kVersion ? "an older" : "a newer") +
         " tickrail; read it with the tickrail-stat of its version): not read";
}

ProcessSnapshot read_impl(const std::string& path, const std::string& proc_root, FileIdentity& id) {
  ProcessSnapshot p;
  p.path = path;
  p.pid = pid_from_name(path);
  // Never follow a link or wait on a FIFO someone left under a stat file's name.
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd.get() < 0) throw_errno(errno, "open stat file " + path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno(errno, "stat " + path);
  if (!S_ISREG(st.st_mode)) {
    p.status = ProcessStatus::incompatible;
    p.note = "not a regular file: not a tickrail counters file";
    return p;
  }
  id = {st.st_dev, st.st_ino};
  p.owner_uid = st.st_uid;
  const auto size = static_cast<std::size_t>(st.st_size);

  const auto liveness_by_pid = [&](const char* note) {
    const bool alive = p.pid > 0 && detail::process_start_time(p.pid, proc_root).has_value();
    p.status = alive ? ProcessStatus::incompatible : ProcessStatus::dead;
    p.note = alive ? note : "process " + std::to_string(p.pid) + " is gone";
  };
  FileHeader h{};
  if (size < sizeof(FileHeader) || !pread_all(fd.get(), &h, sizeof h, 0)) {
    liveness_by_pid("truncated: shorter than its header");
    if (size == 0 && p.status == ProcessStatus::incompatible) {
      p.status = ProcessStatus::starting;  // created, not yet sized
      p.note.clear();
    }
    return p;
  }
  const std::uint64_t magic = h.magic.load(std::memory_order_relaxed);
  if (magic == 0) {
    liveness_by_pid("");
    if (p.status == ProcessStatus::incompatible) p.status = ProcessStatus::starting;
    return p;
  }
  if (magic != kMagic) {
    // Not a tickrail counters file: never remove it.
    p.status = ProcessStatus::incompatible;
    p.note = "bad magic: not a tickrail counters file";
    return p;
  }
  if (p.pid == 0) p.pid = h.pid;
  p.program = std::string(h.program, strnlen(h.program, sizeof h.program));
  p.start_time = h.start_time;
  p.created_ns = h.created_ns;
  p.ns_per_cycle = h.ns_per_cycle;
  set_liveness(p, h.start_time, proc_root);
  if (p.status == ProcessStatus::alive) {
    if (auto why = foreign_owner(st.st_uid, p.pid, proc_root)) {
      p.status = ProcessStatus::incompatible;
      p.note = std::move(*why);
      return p;
    }
  }
  if (h.version != kVersion || h.header_size != sizeof(FileHeader) ||
      h.block_size != sizeof(Block) || h.row_count != kMaxRows || h.block_count == 0 ||
      h.block_count > kMaxBlocks || size < sizeof(FileHeader) + h.block_count * sizeof(Block)) {
    if (p.status == ProcessStatus::alive) {
      p.status = ProcessStatus::incompatible;
      p.note = layout_note(path, h, size);
    }
    return p;
  }
  const std::uint64_t now = p.status == ProcessStatus::alive ? unix_ns() : 0;
  const auto block = std::make_unique<Block>();
  for (std::uint32_t i = 0; i < h.block_count; ++i) {
    if (!read_block(fd.get(), i, *block, p.blocks, now)) {
      mark_incomplete(p, fd.get());
      return p;
    }
  }
  return p;
}

std::string human_ns(double ns) {
  char buf[32];
  if (ns < 1e3) {
    std::snprintf(buf, sizeof buf, "%.0f ns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buf, sizeof buf, "%.1f us", ns / 1e3);
  } else if (ns < 1e9) {
    std::snprintf(buf, sizeof buf, "%.1f ms", ns / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f s", ns / 1e9);
  }
  return buf;
}

std::string human_rate(double per_s) {
  char buf[32];
  if (per_s >= 1e6) {
    std::snprintf(buf, sizeof buf, "%.2fM/s", per_s / 1e6);
  } else if (per_s >= 1e3) {
    std::snprintf(buf, sizeof buf, "%.1fk/s", per_s / 1e3);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f/s", per_s);
  }
  return buf;
}

const BlockSnapshot* find_block(std::span<const ProcessSnapshot> ps, int pid,
                                std::uint64_t start_time, const BlockSnapshot& b) {
  for (const ProcessSnapshot& p : ps) {
    if (p.pid != pid || p.start_time != start_time) continue;
    for (const BlockSnapshot& o : p.blocks) {
      if (o.index == b.index && o.registered_ns == b.registered_ns) return &o;
    }
  }
  return nullptr;
}

// The share of the ticks delivered that `first` is, 0..1; null before any.
nlohmann::json share(std::uint64_t first, std::uint64_t delivered) {
  return delivered == 0 ? nlohmann::json(nullptr)
                        : nlohmann::json(static_cast<double>(first) / static_cast<double>(delivered));
}

// A failover: its lines side by side instead of one transport and channel.
nlohmann::json failover_json(const BlockSnapshot& b) {
  nlohmann::json j;
  j["kind"] = to_string(b.kind);
  j["state"] = to_string(b.state);
  j["registered_ns"] = b.registered_ns;
  nlohmann::json c = nlohmann::json::object();
  for (std::uint32_t i = 0; i < counter_count(b.kind); ++i) c[counter_name(b.kind, i)] = b.counters[i];
  j["counters"] = std::move(c);
  nlohmann::json lines = nlohmann::json::array();
  for (std::size_t i = 0; i < b.lines.size(); ++i) {
    const FailoverLineSnapshot& l = b.lines[i];
    lines.push_back({{"line", i == 0 ? "A" : "B"}, {"transport", l.transport}, {"channel", l.label},
                     {"up", l.up}, {"first", l.first}, {"first_share", share(l.first, b.get(FoCounter::delivered))},
                     {"duplicates", l.duplicates}, {"downs", l.downs}, {"down_ns", l.down_ns},
                     {"down_since_ns", l.down_since_ns}});
  }
  j["lines"] = std::move(lines);
  return j;
}

nlohmann::json block_json(const ProcessSnapshot& p, const BlockSnapshot& b) {
  if (b.kind == BlockKind::failover) return failover_json(b);
  nlohmann::json j;
  j["kind"] = to_string(b.kind);
  j["transport"] = b.transport;
  j["channel"] = b.label;
  j["state"] = to_string(b.state);
  j["registered_ns"] = b.registered_ns;
  nlohmann::json c = nlohmann::json::object();
  for (std::uint32_t i = 0; i < counter_count(b.kind); ++i) c[counter_name(b.kind, i)] = b.counters[i];
  if (b.kind == BlockKind::subscriber) {
    c["max_poll_gap_ns"] = p.ns_per_cycle > 0
                               ? nlohmann::json(p.cycles_to_ns(b.get(SubCounter::max_poll_gap_cycles)))
                               : nlohmann::json(nullptr);
  }
  j["counters"] = std::move(c);
  if (b.kind == BlockKind::publisher) {
    nlohmann::json rows = nlohmann::json::array();
    for (const RowSnapshot& r : b.rows) {
      rows.push_back({{"slot", r.slot}, {"pid", r.pid}, {"peer", r.peer}, {"policy", r.policy},
                      {"state", r.state}, {"position", r.position}, {"lag", r.lag},
                      {"back_pressure", r.back_pressure}});
    }
    j["subscribers"] = std::move(rows);
    j["subscribers_consistent"] = b.rows_consistent;
    j["refreshed_ns"] = b.refreshed_ns;
  }
  return j;
}

}  // namespace

const char* to_string(ProcessStatus s) noexcept { return detail::name_of(kStatusNames, s); }

ProcessSnapshot read_stat_file(const std::string& path, const std::string& proc_root) {
  FileIdentity id;
  return read_impl(path, proc_root, id);
}

std::vector<ProcessSnapshot> scan(const ScanOptions& o) {
  DIR* d = ::opendir(o.dir.c_str());
  if (d == nullptr) throw_errno(errno, "open stat directory " + o.dir);
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    if (pid_from_name(e->d_name) != 0) names.emplace_back(e->d_name);
  }
  ::closedir(d);
  std::vector<ProcessSnapshot> out;
  std::string dir = o.dir;
  if (dir.empty() || dir.back() != '/') dir += '/';
  for (const std::string& name : names) {
    const std::string path = dir + name;
    FileIdentity id;
    ProcessSnapshot p;
    try {
      p = read_impl(path, o.proc_root, id);
    } catch (const Error& e) {
      if (e.code() == std::errc::no_such_file_or_directory) continue;  // removed meanwhile
      p.path = path;
      p.pid = pid_from_name(name);
      p.status = ProcessStatus::incompatible;
      p.note = e.what();
      out.push_back(std::move(p));
      continue;
    }
    if (p.status == ProcessStatus::dead && o.remove_dead) {
      // Remove only the file we read: a new process may have taken the name meanwhile.
      struct stat st {};
      if (::stat(path.c_str(), &st) == 0 && st.st_dev == id.dev && st.st_ino == id.ino &&
          ::unlink(path.c_str()) == 0) {
        p.removed = true;
      } else if (!p.removed) {
        p.note += std::string("; not removed: ") + std::strerror(errno);
      }
    }
    out.push_back(std::move(p));
  }
  std::sort(out.begin(), out.end(),
            [](const ProcessSnapshot& a, const ProcessSnapshot& b) { return a.pid < b.pid; });
  return out;
}

std::string format_json(std::span<const ProcessSnapshot> ps, int indent) {
  nlohmann::json all = nlohmann::json::array();
  for (const ProcessSnapshot& p : ps) {
    nlohmann::json j;
    j["pid"] = p.pid;
    j["program"] = p.program;
    j["status"] = to_string(p.status);
    if (!p.note.empty()) j["note"] = p.note;
    j["path"] = p.path;
    j["removed"] = p.removed;
    j["owner_uid"] = p.owner_uid;
    j["start_time"] = p.start_time;
    j["created_ns"] = p.created_ns;
    nlohmann::json blocks = nlohmann::json::array();
    for (const BlockSnapshot& b : p.blocks) blocks.push_back(block_json(p, b));
    j["endpoints"] = std::move(blocks);
    all.push_back(std::move(j));
  }
  // Names come from shared memory: bytes that are not UTF-8 become U+FFFD instead of a throw.
  return all.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

// Prometheus text exposition format 0.0.4 (what node exporter's textfile collector parses).
// A label value escapes backslash, double quote and newline; HELP text backslash and newline.
std::string prom_escape(std::string_view v, bool quote) {
  std::string out;
  for (const char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quote) {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

using Labels = std::vector<std::pair<std::string, std::string>>;

std::string prom_labels(const Labels& labels) {
  std::string s = "{";
  for (const auto& [k, v] : labels) {
    if (s.size() > 1) s += ',';
    s += k + "=\"" + prom_escape(report_detail::printable(v, true), true) + "\"";
  }
  return s + "}";
}

// Metric families in first-use order, each with all its samples: the format wants a family's
// samples together, after its HELP and TYPE lines.
class Exposition {
 public:
  void add(const std::string& name, const char* type, const std::string& help, const Labels& labels,
           const std::string& value) {
    auto it = std::find_if(families_.begin(), families_.end(),
                           [&](const Family& f) { return f.name == name; });
    if (it == families_.end()) {
      families_.push_back({name, type, help, {}});
      it = std::prev(families_.end());
    }
    it->samples += name + prom_labels(labels) + " " + value + "\n";
  }
  void add(const std::string& name, const char* type, const std::string& help, const Labels& labels,
           std::uint64_t value) {
    add(name, type, help, labels, std::to_string(value));
  }
  [[nodiscard]] std::string text() const {
    std::string s;
    for (const Family& f : families_) {
      s += "# HELP " + f.name + " " + prom_escape(f.help, false) + "\n# TYPE " + f.name + " " + f.type +
           "\n" + f.samples;
    }
    return s;
  }

 private:
  struct Family {
    std::string name;
    const char* type;
    std::string help;
    std::string samples;
  };
  std::vector<Family> families_;
};

std::string prom_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// A failover's lines, each labelled with its line, transport and channel.
void failover_metrics(Exposition& e, const Labels& base, const BlockSnapshot& b) {
  for (std::size_t i = 0; i < b.lines.size(); ++i) {
    const FailoverLineSnapshot& f = b.lines[i];
    Labels l = base;
    l.emplace_back("line", i == 0 ? "A" : "B");
    l.emplace_back("transport", f.transport);
    l.emplace_back("channel", f.label);
    e.add("tickrail_failover_line_first_total", "counter", "Ticks delivered from the line: it brought them first.",
          l, f.first);
    e.add("tickrail_failover_line_duplicates_total", "counter", "Copies from the line discarded.", l, f.duplicates);
    e.add("tickrail_failover_line_downs_total", "counter", "Times the line went down.", l, f.downs);
    e.add("tickrail_failover_line_down_seconds_total", "counter", "Time the line spent down, until now.", l,
          prom_double(static_cast<double>(f.down_ns) / 1e9));
    e.add("tickrail_failover_line_up", "gauge", "1 while the line is up, 0 while down.", l, f.up ? 1 : 0);
  }
}

void endpoint_metrics(Exposition& e, const ProcessSnapshot& p, const BlockSnapshot& b) {
  const std::string role = to_string(b.kind);
  Labels base = {{"pid", std::to_string(p.pid)}, {"program", p.program},
                 {"role", role},                 {"transport", b.transport},
                 {"channel", b.label},           {"endpoint", std::to_string(b.index)}};
  // A failover has two transports and channels: its lines' metrics carry them.
  if (b.kind == BlockKind::failover) {
    base = {{"pid", std::to_string(p.pid)}, {"program", p.program}, {"role", role}, {"endpoint", std::to_string(b.index)}};
    failover_metrics(e, base, b);
  }
  for (std::uint32_t i = 0; i < counter_count(b.kind); ++i) {
    const CounterInfo& c = *counter_info(b.kind, i);
    const std::string name = "tickrail_" + role + "_" + c.name + (c.grows ? "_total" : "");
    e.add(name, c.grows ? "counter" : "gauge", c.help, base, b.counters[i]);
  }
  if (b.kind == BlockKind::subscriber && p.ns_per_cycle > 0) {
    e.add("tickrail_subscriber_max_poll_gap_seconds", "gauge",
          "Longest interval between two polls of the subscriber's loop.", base,
          prom_double(p.cycles_to_ns(b.get(SubCounter::max_poll_gap_cycles)) / 1e9));
  }
  for (std::uint32_t s = 0; s <= static_cast<std::uint32_t>(EndpointState::closed); ++s) {
    Labels l = base;
    l.emplace_back("state", to_string(static_cast<EndpointState>(s)));
    e.add("tickrail_endpoint_state", "gauge", "1 for the endpoint's current state, 0 for the others.", l,
          static_cast<std::uint32_t>(b.state) == s ? 1 : 0);
  }
  if (b.kind != BlockKind::publisher) return;
  e.add("tickrail_publisher_subscribers", "gauge", "Subscribers attached to the publisher.", base,
        b.rows.size());
  for (const RowSnapshot& r : b.rows) {
    Labels l = base;
    l.emplace_back("slot", std::to_string(r.slot));
    l.emplace_back("subscriber_pid", std::to_string(r.pid));
    l.emplace_back("peer", r.peer);
    l.emplace_back("policy", r.policy);
    e.add("tickrail_publisher_subscriber_position", "gauge",
          "Next sequence number the subscriber expects (its credit), as the publisher sees it.", l, r.position);
    e.add("tickrail_publisher_subscriber_lag", "gauge", "Ticks published that the subscriber has not consumed.",
          l, r.lag);
    e.add("tickrail_publisher_subscriber_back_pressure_total", "counter",
          "Times the subscriber's full ring held the publisher back.", l, r.back_pressure);
    l.emplace_back("state", r.state);
    e.add("tickrail_publisher_subscriber_info", "gauge", "The subscriber's state, as a label; always 1.", l, 1);
  }
}

}  // namespace

std::string format_prometheus(std::span<const ProcessSnapshot> ps) {
  Exposition e;
  for (const ProcessSnapshot& p : ps) {
    const Labels proc = {{"pid", std::to_string(p.pid)}, {"program", p.program}};
    e.add("tickrail_process_up", "gauge",
          "1 while the process that owns the counters file lives, 0 once it is dead or unreadable.", proc,
          p.status == ProcessStatus::alive ? 1 : 0);
    e.add("tickrail_process_counters_start_time_seconds", "gauge",
          "When the process created its counters file (Unix time).", proc,
          prom_double(static_cast<double>(p.created_ns) / 1e9));
    for (const BlockSnapshot& b : p.blocks) endpoint_metrics(e, p, b);
  }
  return e.text();
}

namespace {

// A failover: what it delivered, then its two lines side by side (each line's own subscriber
// follows as its own block while attached).
std::string failover_text(const BlockSnapshot& b, const BlockSnapshot* prev, double seconds) {
  std::ostringstream o;
  const std::uint64_t delivered = b.get(FoCounter::delivered);
  o << "  failover '" << b.lines[0].label << "' + '" << b.lines[1].label << "' " << to_string(b.state)
    << "\n    delivered " << delivered;
  if (prev != nullptr && delivered >= prev->get(FoCounter::delivered)) {
    o << " (" << human_rate(static_cast<double>(delivered - prev->get(FoCounter::delivered)) / seconds) << ")";
  }
  o << "  gaps " << b.get(FoCounter::gaps) << " (lost on both lines)  skipped " << b.get(FoCounter::skipped)
    << " (given up)\n";
  char line[256];
  std::snprintf(line, sizeof line, "      %-4s  %-9s %-24s %-5s %22s %12s %6s %10s\n", "line", "transport",
                "channel", "state", "first (share)", "duplicates", "downs", "time down");
  o << line;
  for (std::size_t i = 0; i < b.lines.size(); ++i) {
    const FailoverLineSnapshot& l = b.lines[i];
    char first[64];
    if (delivered == 0) {
      std::snprintf(first, sizeof first, "%llu", static_cast<unsigned long long>(l.first));
    } else {
      std::snprintf(first, sizeof first, "%llu (%.1f%%)", static_cast<unsigned long long>(l.first),
                    100.0 * static_cast<double>(l.first) / static_cast<double>(delivered));
    }
    std::snprintf(line, sizeof line, "      %-4s  %-9s %-24s %-5s %22s %12llu %6llu %10s\n", i == 0 ? "A" : "B",
                  l.transport.c_str(), ("'" + l.label + "'").c_str(), l.up ? "up" : "down", first,
                  static_cast<unsigned long long>(l.duplicates), static_cast<unsigned long long>(l.downs),
                  human_ns(static_cast<double>(l.down_ns)).c_str());
    o << line;
  }
  return o.str();
}

}  // namespace

std::string format_text(std::span<const ProcessSnapshot> now, std::span<const ProcessSnapshot> before,
                        double seconds) {
  std::ostringstream o;
  if (now.empty()) {
    o << "no tickrail processes (no tickrail-stat.<pid> files)\n";
    return o.str();
  }
  for (const ProcessSnapshot& p : now) {
    o << "pid " << p.pid;
    if (!p.program.empty()) o << " " << p.program;
    o << "  " << to_string(p.status);
    if (p.status == ProcessStatus::alive && p.created_ns != 0) {
      const auto up = static_cast<double>(std::max<std::int64_t>(
          0, static_cast<std::int64_t>(std::time(nullptr)) -
                 static_cast<std::int64_t>(p.created_ns / 1'000'000'000ULL)));
      o << ", counters for " << human_ns(up * 1e9);
    }
    if (!p.note.empty()) o << " (" << p.note << ")";
    if (p.removed) o << "; its file was removed";
    o << "\n";
    for (const BlockSnapshot& b : p.blocks) {
      const BlockSnapshot* prev =
          seconds > 0 ? find_block(before, p.pid, p.start_time, b) : nullptr;
      if (b.kind == BlockKind::failover) {
        o << failover_text(b, prev, seconds);
        continue;
      }
      o << "  " << to_string(b.kind) << " " << b.transport << " '" << b.label << "' "
        << to_string(b.state) << "\n    ";
      int col = 0;
      for (std::uint32_t i = 0; i < counter_count(b.kind); ++i) {
        if (b.kind == BlockKind::subscriber &&
            i == static_cast<std::uint32_t>(SubCounter::max_poll_gap_cycles)) {
          continue;
        }
        const std::string name = counter_name(b.kind, i);
        o << name << " " << b.counters[i];
        const bool rated = (b.kind == BlockKind::publisher &&
                            i == static_cast<std::uint32_t>(PubCounter::published)) ||
                           (b.kind == BlockKind::subscriber &&
                            i == static_cast<std::uint32_t>(SubCounter::received));
        if (rated && prev != nullptr && b.counters[i] >= prev->counters[i]) {
          o << " (" << human_rate(static_cast<double>(b.counters[i] - prev->counters[i]) / seconds)
            << ")";
        }
        o << ((++col % 5 == 0) ? "\n    " : "  ");
      }
      if (b.kind == BlockKind::subscriber) {
        const std::uint64_t gap = b.get(SubCounter::max_poll_gap_cycles);
        o << "max_poll_gap "
          << (p.ns_per_cycle > 0 ? human_ns(p.cycles_to_ns(gap)) : std::to_string(gap) + " cycles");
      }
      o << "\n";
      if (b.kind == BlockKind::publisher) {
        if (!b.rows.empty()) {
          char line[256];
          std::snprintf(line, sizeof line, "      %4s  %-22s %-10s %-10s %14s %10s %12s\n",
                        "slot", "subscriber", "policy", "state", "position", "lag",
                        "back_press.");
          o << line;
          for (const RowSnapshot& r : b.rows) {
            const std::string who = r.peer.empty() ? "pid " + std::to_string(r.pid) : r.peer;
            std::snprintf(line, sizeof line, "      %4u  %-22s %-10s %-10s %14llu %10llu %12llu\n",
                          r.slot, who.c_str(), r.policy.c_str(), r.state.c_str(),
                          static_cast<unsigned long long>(r.position),
                          static_cast<unsigned long long>(r.lag),
                          static_cast<unsigned long long>(r.back_pressure));
            o << line;
          }
        } else if (p.status == ProcessStatus::alive) {
          o << "      (no subscribers)\n";
        }
      }
    }
  }
  return report_detail::printable(o.str(), true);
}

}  // namespace tickrail::stats
