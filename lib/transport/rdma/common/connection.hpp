// Connection setup shared by the RC transport and UD recovery: the QP on an rdma_cm id with the
// inline-data fallback, and the connection parameters every tickrail connection uses.
#pragma once

#include <rdma/rdma_cma.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/rdma/cm.hpp"

namespace tickrail::rdma {

// The QP of `id`, asking for attr.cap.max_inline_data bytes of inline data. A device that
// refuses is asked again with half as much while the amount is above `min_inline`, then with
// none (a device without inline data: the WRs then read registered memory). The last refusal
// throws. On return attr.cap holds what the device granted.
[[nodiscard]] CmQueuePair create_qp(CmId& id, ibv_pd* pd, ibv_qp_init_attr& attr,
                                    std::uint32_t min_inline);

// rdma_connect/rdma_accept parameters carrying `private_data` (at most 255 bytes). Transport
// retries at the maximum (7): a lost packet is retransmitted, not a failed connection, and a
// receiver short of posted receives (RNR) is waited for rather than dropped.
[[nodiscard]] rdma_conn_param connection_param(std::span<const std::byte> private_data,
                                               std::uint8_t responder_resources,
                                               std::uint8_t initiator_depth) noexcept;

}  // namespace tickrail::rdma
