// Whether a peer that speaks now and then (heartbeats, ticks) has gone silent, counted while
// we look. A look that comes more than the limit after the one before means this process, or
// the whole host, was stopped (SIGSTOP, a paused or starved VM), and the peer perhaps with it:
// it then gets a grace from that look to be heard again before it is called silent. The grace
// is earned again by hearing the peer or by an ordinary look (not after a stop, peer within
// the limit): an app that looks less often than the limit still learns of a silent peer, on
// its second look.
#pragma once

#include <cstdint>

namespace tickrail {

class SilenceWatch {
 public:
  SilenceWatch() = default;
  // All in one clock's units; `grace` is clamped to `limit`. `word`: see silent_word().
  SilenceWatch(std::uint64_t limit, std::uint64_t grace, std::uint64_t now,
               std::uint64_t word = 0) noexcept
      : limit_(limit), grace_(grace < limit ? grace : limit), last_look_(now), heard_(now),
        word_(word) {}

  // For a peer that shows life by changing a word it writes (a heartbeat count or stamp): heard
  // when the word differs from the last look's. Its value means nothing else.
  [[nodiscard]] bool silent_word(std::uint64_t word, std::uint64_t now) noexcept {
    if (word == word_) return silent(heard_, now);
    word_ = word;
    return silent(now, now);
  }

  // heard_at: when the peer was last heard (0: not yet, counted from construction).
  [[nodiscard]] bool silent(std::uint64_t heard_at, std::uint64_t now) noexcept {
    const bool away = now > last_look_ && now - last_look_ > limit_;
    if (now > last_look_) last_look_ = now;
    if (heard_at > heard_) {
      heard_ = heard_at;
      graced_ = false;
    }
    const bool within = now <= heard_ || now - heard_ <= limit_;
    if (!away && within) graced_ = false;  // an ordinary look: a later stop earns a grace again
    if (away && !graced_) {
      graced_ = true;
      grace_until_ = now + grace_;
    }
    if (graced_ && now <= grace_until_) return false;
    if (within) return false;
    graced_ = true;  // a verdict stands until the peer is heard again
    return true;
  }

 private:
  std::uint64_t limit_ = 0;
  std::uint64_t grace_ = 0;
  std::uint64_t last_look_ = 0;
  std::uint64_t heard_ = 0;
  std::uint64_t grace_until_ = 0;
  std::uint64_t word_ = 0;
  bool graced_ = false;
};

}  // namespace tickrail
