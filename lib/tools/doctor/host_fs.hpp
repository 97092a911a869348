// The doctor's view of a host: files under a root directory ("/" on a real host, a fake tree in
// tests), read without ever throwing. Plus what several checks share: the RDMA ports and their
// netdevs.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tickrail/tools/doctor.hpp"

namespace tickrail::doctor::detail {

class HostFs {
 public:
  explicit HostFs(std::string root);

  [[nodiscard]] bool real() const noexcept { return real_; }  // root is "/"
  [[nodiscard]] const std::string& root() const noexcept { return root_; }
  // Absolute path of `rel` ("sys/class/net") under the root.
  [[nodiscard]] std::string path(std::string_view rel) const;
  // The first line, trailing blanks removed; nullopt when missing or unreadable (sysfs returns
  // EINVAL for some attributes).
  [[nodiscard]] std::optional<std::string> line(std::string_view rel) const;
  // The whole file; nullopt when missing or unreadable.
  [[nodiscard]] std::optional<std::string> text(std::string_view rel) const;
  // Entries of a directory, sorted (empty when missing).
  [[nodiscard]] std::vector<std::string> list(std::string_view rel) const;
  [[nodiscard]] bool exists(std::string_view rel) const;
  // Last component of a symlink's target ("mlx5_core" for .../driver), empty when none.
  [[nodiscard]] std::string link_name(std::string_view rel) const;

 private:
  std::string root_;
  bool real_;
};

struct PortRef {
  std::string device;
  int port = 0;
  [[nodiscard]] std::string dir() const;  // "sys/class/infiniband/<dev>/ports/<port>"
  [[nodiscard]] std::string subject() const;  // "rxe0 port 1"
};

// RDMA devices under sys/class/infiniband (only `only` when set).
[[nodiscard]] std::vector<std::string> rdma_devices(const HostFs& fs, const std::string& only);
[[nodiscard]] std::vector<PortRef> rdma_ports(const HostFs& fs, const std::string& only);
// The netdev of a RoCE port: gid_attrs/ndevs/*, rxe's "parent", or device/net/*; empty if none.
[[nodiscard]] std::string netdev_of(const HostFs& fs, const PortRef& p);
// "4: ACTIVE" -> "ACTIVE"; the text as is when it has no number.
[[nodiscard]] std::string state_word(const std::string& sysfs_state);
// The verbs view of the options: injected, queried (real root), or not queried.
[[nodiscard]] VerbsView verbs_view(const Options& o, const HostFs& fs);
// Whether the config asks for an RDMA transport on either side.
[[nodiscard]] bool wants_rdma(const Options& o);

inline Finding finding(std::string check, std::string subject, Level level, std::string message,
                       std::string fix = {}) {
  return {std::move(check), std::move(subject), level, std::move(message), std::move(fix)};
}

}  // namespace tickrail::doctor::detail
