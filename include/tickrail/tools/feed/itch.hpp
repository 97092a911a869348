// NASDAQ TotalView-ITCH 5.0 wire format: message types, fixed lengths, field readers and one
// typed, zero-copy view per message type.
//
// Every integer is big-endian; timestamps are 6-byte nanoseconds since midnight; prices are
// Price(4) (4 implied decimals, the Tick's own scale) except the MWCB levels, Price(8). Every
// message starts with type (1), stock locate (2), tracking number (2), timestamp (6): the views
// share these accessors through MessageView. A view never owns or copies its bytes; it is valid
// only after check() said ok for them (no accessor checks bounds again), which as<View>() does.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>

namespace tickrail::feed::itch {

enum class MsgType : std::uint8_t {
  SystemEvent = 'S',
  StockDirectory = 'R',
  TradingAction = 'H',
  RegSho = 'Y',
  ParticipantPosition = 'L',
  MwcbDecline = 'V',
  MwcbStatus = 'W',
  IpoQuotingPeriod = 'K',
  LuldCollar = 'J',
  OperationalHalt = 'h',
  AddOrder = 'A',
  AddOrderMpid = 'F',
  OrderExecuted = 'E',
  OrderExecutedPrice = 'C',
  OrderCancel = 'X',
  OrderDelete = 'D',
  OrderReplace = 'U',
  Trade = 'P',
  CrossTrade = 'Q',
  BrokenTrade = 'B',
  Noii = 'I',
  RetailInterest = 'N',
  DirectListing = 'O',
};

// Every message type of the specification, in its order.
inline constexpr std::array<MsgType, 23> kAllTypes = {
    MsgType::SystemEvent, MsgType::StockDirectory, MsgType::TradingAction, MsgType::RegSho,
    MsgType::ParticipantPosition, MsgType::MwcbDecline, MsgType::MwcbStatus,
    MsgType::IpoQuotingPeriod, MsgType::LuldCollar, MsgType::OperationalHalt,
    MsgType::AddOrder, MsgType::AddOrderMpid, MsgType::OrderExecuted,
    MsgType::OrderExecutedPrice, MsgType::OrderCancel, MsgType::OrderDelete,
    MsgType::OrderReplace, MsgType::Trade, MsgType::CrossTrade, MsgType::BrokenTrade,
    MsgType::Noii, MsgType::RetailInterest, MsgType::DirectListing};

// Fixed length of each message type, type byte included (0: not an ITCH 5.0 type).
inline constexpr std::array<std::uint8_t, 256> kLengths = [] {
  std::array<std::uint8_t, 256> l{};
  l['S'] = 12; l['R'] = 39; l['H'] = 25; l['Y'] = 20; l['L'] = 26; l['V'] = 35; l['W'] = 12;
  l['K'] = 28; l['J'] = 35; l['h'] = 21; l['A'] = 36; l['F'] = 40; l['E'] = 31; l['C'] = 36;
  l['X'] = 23; l['D'] = 19; l['U'] = 35; l['P'] = 44; l['Q'] = 40; l['B'] = 19; l['I'] = 50;
  l['N'] = 20; l['O'] = 48;
  return l;
}();

inline constexpr std::size_t kMaxLength = 50;  // the NOII message
inline constexpr std::size_t kHeaderLength = 11;

[[nodiscard]] constexpr std::size_t length_of(std::uint8_t type) noexcept { return kLengths[type]; }
[[nodiscard]] constexpr std::size_t length_of(MsgType t) noexcept {
  return kLengths[static_cast<std::uint8_t>(t)];
}

// Human name of a message type ("add order"), "unknown" for a byte that is none.
[[nodiscard]] const char* type_name(std::uint8_t type) noexcept;

enum class Check : std::uint8_t { ok, empty, unknown_type, bad_length };

// Validates one message (without its 2-byte framing): a known type of exactly its fixed length.
[[nodiscard]] constexpr Check check(const std::uint8_t* msg, std::size_t len) noexcept {
  if (len == 0) return Check::empty;
  const std::size_t want = kLengths[msg[0]];
  if (want == 0) return Check::unknown_type;
  return len == want ? Check::ok : Check::bad_length;
}

// Big-endian field readers. memcpy keeps them alignment-safe; the compiler emits one load + bswap.
[[nodiscard]] inline std::uint16_t be16(const std::uint8_t* p) noexcept {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return __builtin_bswap16(v);
}
[[nodiscard]] inline std::uint32_t be32(const std::uint8_t* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return __builtin_bswap32(v);
}
[[nodiscard]] inline std::uint64_t be64(const std::uint8_t* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return __builtin_bswap64(v);
}
[[nodiscard]] inline std::uint64_t be48(const std::uint8_t* p) noexcept {
  return (std::uint64_t{be16(p)} << 32) | be32(p + 2);
}
// 8 ASCII bytes (a stock symbol) as one word, bytes kept in wire order (memcpy back to read).
[[nodiscard]] inline std::uint64_t ascii8(const std::uint8_t* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
[[nodiscard]] inline std::uint32_t ascii4(const std::uint8_t* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Fields every message carries at the same place.
class MessageView {
 public:
  explicit constexpr MessageView(const std::uint8_t* msg) noexcept : p_(msg) {}
  [[nodiscard]] MsgType type() const noexcept { return static_cast<MsgType>(p_[0]); }
  [[nodiscard]] std::uint16_t stock_locate() const noexcept { return be16(p_ + 1); }
  [[nodiscard]] std::uint16_t tracking_number() const noexcept { return be16(p_ + 3); }
  [[nodiscard]] std::uint64_t timestamp() const noexcept { return be48(p_ + 5); }
  [[nodiscard]] const std::uint8_t* data() const noexcept { return p_; }

 protected:
  [[nodiscard]] char ch(std::size_t off) const noexcept { return static_cast<char>(p_[off]); }
  [[nodiscard]] std::string_view str(std::size_t off, std::size_t n) const noexcept {
    return {reinterpret_cast<const char*>(p_ + off), n};
  }
  [[nodiscard]] std::uint32_t u32(std::size_t off) const noexcept { return be32(p_ + off); }
  [[nodiscard]] std::uint64_t u64(std::size_t off) const noexcept { return be64(p_ + off); }
  [[nodiscard]] std::int64_t price4(std::size_t off) const noexcept { return be32(p_ + off); }
  [[nodiscard]] std::int64_t price8(std::size_t off) const noexcept {
    return static_cast<std::int64_t>(be64(p_ + off));
  }

 private:
  const std::uint8_t* p_;
};

// One view per message type; field names and offsets follow the specification's tables.
struct SystemEvent : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::SystemEvent;
  [[nodiscard]] char event_code() const noexcept { return ch(11); }
};

struct StockDirectory : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::StockDirectory;
  [[nodiscard]] std::string_view stock() const noexcept { return str(11, 8); }
  [[nodiscard]] char market_category() const noexcept { return ch(19); }
  [[nodiscard]] char financial_status() const noexcept { return ch(20); }
  [[nodiscard]] std::uint32_t round_lot_size() const noexcept { return u32(21); }
  [[nodiscard]] char round_lots_only() const noexcept { return ch(25); }
  [[nodiscard]] char issue_classification() const noexcept { return ch(26); }
  [[nodiscard]] std::string_view issue_sub_type() const noexcept { return str(27, 2); }
  [[nodiscard]] char authenticity() const noexcept { return ch(29); }
  [[nodiscard]] char short_sale_threshold() const noexcept { return ch(30); }
  [[nodiscard]] char ipo_flag() const noexcept { return ch(31); }
  [[nodiscard]] char luld_tier() const noexcept { return ch(32); }
  [[nodiscard]] char etp_flag() const noexcept { return ch(33); }
  [[nodiscard]] std::uint32_t etp_leverage_factor() const noexcept { return u32(34); }
  [[nodiscard]] char inverse_indicator() const noexcept { return ch(38); }
};

struct TradingAction : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::TradingAction;
  [[nodiscard]] std::string_view stock() const noexcept { return str(11, 8); }
  [[nodiscard]] char trading_state() const noexcept { return ch(19); }
  [[nodiscard]] char reserved() const noexcept { return ch(20); }
  [[nodiscard]] std::string_view reason() const noexcept { return str(21, 4); }
};

struct RegSho : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::RegSho;
  [[nodiscard]] std::string_view stock() const noexcept { return str(11, 8); }
  [[nodiscard]] char action() const noexcept { return ch(19); }
};

struct ParticipantPosition : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::ParticipantPosition;
  [[nodiscard]] std::string_view mpid() const noexcept { return str(11, 4); }
  [[nodiscard]] std::string_view stock() const noexcept { return str(15, 8); }
  [[nodiscard]] char primary_market_maker() const noexcept { return ch(23); }
  [[nodiscard]] char market_maker_mode() const noexcept { return ch(24); }
  [[nodiscard]] char participant_state() const noexcept { return ch(25); }
};

struct MwcbDecline : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::MwcbDecline;
  // Price(8): 8 implied decimals.
  [[nodiscard]] std::int64_t level1() const noexcept { return price8(11); }
  [[nodiscard]] std::int64_t level2() const noexcept { return price8(19); }
  [[nodiscard]] std::int64_t level3() const noexcept { return price8(27); }
};

struct MwcbStatus : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::MwcbStatus;
  [[nodiscard]] char breached_level() const noexcept { return ch(11); }
};

struct IpoQuotingPeriod : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::IpoQuotingPeriod;
  [[nodiscard]] std::string_view stock() const noexcept { return str(11, 8); }
  [[nodiscard]] std::uint32_t release_time_s() const noexcept { return u32(19); }
  [[nodiscard]] char release_qualifier() const noexcept { return ch(23); }
  [[nodiscard]] std::int64_t ipo_price() const noexcept { return price4(24); }
};

struct LuldCollar : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::LuldCollar;
  [[nodiscard]] std::string_view stock() const noexcept { return str(11, 8); }
  [[nodiscard]] std::int64_t reference_price() const noexcept { return price4(19); }
  [[nodiscard]] std::int64_t upper_price() const noexcept { return price4(23); }
  [[nodiscard]] std::int64_t lower_price() const noexcept { return price4(27); }
  [[nodiscard]] std::uint32_t extension() const noexcept { return u32(31); }
};

struct OperationalHalt : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::OperationalHalt;
  [[nodiscard]] std::string_view stock() const noexcept { return str(11, 8); }
  [[nodiscard]] char market_code() const noexcept { return ch(19); }
  [[nodiscard]] char halt_action() const noexcept { return ch(20); }
};

struct AddOrder : MessageView {  // 'A', and the common part of 'F'
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::AddOrder;
  [[nodiscard]] std::uint64_t order_ref() const noexcept { return u64(11); }
  [[nodiscard]] char side() const noexcept { return ch(19); }
  [[nodiscard]] std::uint32_t shares() const noexcept { return u32(20); }
  [[nodiscard]] std::string_view stock() const noexcept { return str(24, 8); }
  [[nodiscard]] std::int64_t price() const noexcept { return price4(32); }
};

struct AddOrderMpid : AddOrder {
  using AddOrder::AddOrder;
  static constexpr MsgType kType = MsgType::AddOrderMpid;
  [[nodiscard]] std::string_view attribution() const noexcept { return str(36, 4); }
};

struct OrderExecuted : MessageView {  // 'E', and the common part of 'C'
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::OrderExecuted;
  [[nodiscard]] std::uint64_t order_ref() const noexcept { return u64(11); }
  [[nodiscard]] std::uint32_t executed_shares() const noexcept { return u32(19); }
  [[nodiscard]] std::uint64_t match_number() const noexcept { return u64(23); }
};

struct OrderExecutedPrice : OrderExecuted {
  using OrderExecuted::OrderExecuted;
  static constexpr MsgType kType = MsgType::OrderExecutedPrice;
  [[nodiscard]] char printable() const noexcept { return ch(31); }
  [[nodiscard]] std::int64_t execution_price() const noexcept { return price4(32); }
};

struct OrderCancel : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::OrderCancel;
  [[nodiscard]] std::uint64_t order_ref() const noexcept { return u64(11); }
  [[nodiscard]] std::uint32_t cancelled_shares() const noexcept { return u32(19); }
};

struct OrderDelete : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::OrderDelete;
  [[nodiscard]] std::uint64_t order_ref() const noexcept { return u64(11); }
};

struct OrderReplace : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::OrderReplace;
  [[nodiscard]] std::uint64_t original_ref() const noexcept { return u64(11); }
  [[nodiscard]] std::uint64_t new_ref() const noexcept { return u64(19); }
  [[nodiscard]] std::uint32_t shares() const noexcept { return u32(27); }
  [[nodiscard]] std::int64_t price() const noexcept { return price4(31); }
};

struct Trade : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::Trade;
  [[nodiscard]] std::uint64_t order_ref() const noexcept { return u64(11); }
  [[nodiscard]] char side() const noexcept { return ch(19); }
  [[nodiscard]] std::uint32_t shares() const noexcept { return u32(20); }
  [[nodiscard]] std::string_view stock() const noexcept { return str(24, 8); }
  [[nodiscard]] std::int64_t price() const noexcept { return price4(32); }
  [[nodiscard]] std::uint64_t match_number() const noexcept { return u64(36); }
};

struct CrossTrade : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::CrossTrade;
  [[nodiscard]] std::uint64_t shares() const noexcept { return u64(11); }
  [[nodiscard]] std::string_view stock() const noexcept { return str(19, 8); }
  [[nodiscard]] std::int64_t cross_price() const noexcept { return price4(27); }
  [[nodiscard]] std::uint64_t match_number() const noexcept { return u64(31); }
  [[nodiscard]] char cross_type() const noexcept { return ch(39); }
};

struct BrokenTrade : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::BrokenTrade;
  [[nodiscard]] std::uint64_t match_number() const noexcept { return u64(11); }
};

struct Noii : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::Noii;
  [[nodiscard]] std::uint64_t paired_shares() const noexcept { return u64(11); }
  [[nodiscard]] std::uint64_t imbalance_shares() const noexcept { return u64(19); }
  [[nodiscard]] char imbalance_direction() const noexcept { return ch(27); }
  [[nodiscard]] std::string_view stock() const noexcept { return str(28, 8); }
  [[nodiscard]] std::int64_t far_price() const noexcept { return price4(36); }
  [[nodiscard]] std::int64_t near_price() const noexcept { return price4(40); }
  [[nodiscard]] std::int64_t reference_price() const noexcept { return price4(44); }
  [[nodiscard]] char cross_type() const noexcept { return ch(48); }
  [[nodiscard]] char price_variation() const noexcept { return ch(49); }
};

struct RetailInterest : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::RetailInterest;
  [[nodiscard]] std::string_view stock() const noexcept { return str(11, 8); }
  [[nodiscard]] char interest_flag() const noexcept { return ch(19); }
};

struct DirectListing : MessageView {
  using MessageView::MessageView;
  static constexpr MsgType kType = MsgType::DirectListing;
  [[nodiscard]] std::string_view stock() const noexcept { return str(11, 8); }
  [[nodiscard]] char open_eligibility() const noexcept { return ch(19); }
  [[nodiscard]] std::int64_t min_allowable_price() const noexcept { return price4(20); }
  [[nodiscard]] std::int64_t max_allowable_price() const noexcept { return price4(24); }
  [[nodiscard]] std::int64_t near_execution_price() const noexcept { return price4(28); }
  [[nodiscard]] std::uint64_t near_execution_time() const noexcept { return u64(32); }
  [[nodiscard]] std::int64_t lower_collar() const noexcept { return price4(40); }
  [[nodiscard]] std::int64_t upper_collar() const noexcept { return price4(44); }
};

// The typed view of a message when it is of View's type and exactly its length, else nullopt:
//   if (auto add = itch::as<itch::AddOrder>(msg, len)) use(add->price());
template <class View>
[[nodiscard]] std::optional<View> as(const std::uint8_t* msg, std::size_t len) noexcept {
  if (len == 0 || msg[0] != static_cast<std::uint8_t>(View::kType) ||
      len != length_of(View::kType)) {
    return std::nullopt;
  }
  return View(msg);
}

}  // namespace tickrail::feed::itch
