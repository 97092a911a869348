#include "tools/doctor/host_fs.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace tickrail::doctor::detail {

namespace fs = std::filesystem;

HostFs::HostFs(std::string root) : root_(root.empty() ? std::string("/") : std::move(root)) {
  if (root_.back() != '/') root_ += '/';
  std::error_code ec;
  real_ = root_ == "/" || fs::equivalent(root_, "/", ec);
}

std::string HostFs::path(std::string_view rel) const {
  while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
  return root_ + std::string(rel);
}

std::optional<std::string> HostFs::text(std::string_view rel) const {
  std::ifstream in(path(rel), std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) return std::nullopt;
  // A sysfs attribute that refuses to be read opens fine and then fails: report it as missing.
  if (s.str().empty() && !in.eof() && in.fail()) return std::nullopt;
  return s.str();
}

std::optional<std::string> HostFs::line(std::string_view rel) const {
  std::ifstream in(path(rel));
  if (!in) return std::nullopt;
  std::string l;
  if (!std::getline(in, l)) {
    if (in.bad() || !in.eof()) return std::nullopt;
    return std::string();  // empty file
  }
  while (!l.empty() && (l.back() == ' ' || l.back() == '\t' || l.back() == '\r' || l.back() == '\n')) {
    l.pop_back();
  }
  return l;
}

std::vector<std::string> HostFs::list(std::string_view rel) const {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(path(rel), ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end(), [](const std::string& a, const std::string& b) {
    // Natural order, so that cpu10 follows cpu9 and gid 10 follows gid 9.
    const auto num = [](const std::string& s) {
      std::size_t i = s.size();
      while (i > 0 && s[i - 1] >= '0' && s[i - 1] <= '9') --i;
      return std::make_pair(s.substr(0, i), i < s.size() && s.size() - i < 10 ? std::stol(s.substr(i)) : -1L);
    };
    return num(a) < num(b) || (num(a) == num(b) && a < b);
  });
  return out;
}

bool HostFs::exists(std::string_view rel) const {
  std::error_code ec;
  return fs::exists(path(rel), ec);
}

std::string HostFs::link_name(std::string_view rel) const {
  std::error_code ec;
  const fs::path target = fs::read_symlink(path(rel), ec);
  return ec ? std::string() : target.filename().string();
}

std::string PortRef::dir() const {
  return "sys/class/infiniband/" + device + "/ports/" + std::to_string(port);
}

std::string PortRef::subject() const { return device + " port " + std::to_string(port); }

std::vector<std::string> rdma_devices(const HostFs& fs, const std::string& only) {
  std::vector<std::string> devs = fs.list("sys/class/infiniband");
  if (!only.empty()) {
    devs.erase(std::remove_if(devs.begin(), devs.end(), [&](const std::string& d) { return d != only; }),
               devs.end());
  }
  return devs;
}

std::vector<PortRef> rdma_ports(const HostFs& fs, const std::string& only) {
  std::vector<PortRef> out;
  for (const std::string& dev : rdma_devices(fs, only)) {
    for (const std::string& p : fs.list("sys/class/infiniband/" + dev + "/ports")) {
      if (p.empty() || !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
          p.size() > 4) {
        continue;
      }
      out.push_back({dev, std::stoi(p)});
    }
  }
  return out;
}

std::string netdev_of(const HostFs& fs, const PortRef& p) {
  for (const std::string& i : fs.list(p.dir() + "/gid_attrs/ndevs")) {
    const auto n = fs.line(p.dir() + "/gid_attrs/ndevs/" + i);
    if (n && !n->empty()) return *n;
  }
  if (const auto parent = fs.line("sys/class/infiniband/" + p.device + "/parent");
      parent && !parent->empty()) {
    return *parent;
  }
  const auto nets = fs.list("sys/class/infiniband/" + p.device + "/device/net");
  return nets.empty() ? std::string() : nets.front();
}

std::string state_word(const std::string& s) {
  const std::size_t colon = s.find(':');
  std::string w = colon == std::string::npos ? s : s.substr(colon + 1);
  while (!w.empty() && w.front() == ' ') w.erase(w.begin());
  return w;
}

VerbsView verbs_view(const Options& o, const HostFs& fs) {
  if (o.verbs) return o.verbs();
  if (fs.real()) return query_verbs();
  return {};
}

bool wants_rdma(const Options& o) {
  return (o.publisher && o.publisher->transport != TransportKind::shm) ||
         (o.subscriber && o.subscriber->transport != TransportKind::shm);
}

}  // namespace tickrail::doctor::detail
