#include "transport/rdma/common/connection.hpp"

#include "tickrail/error.hpp"

namespace tickrail::rdma {

CmQueuePair create_qp(CmId& id, ibv_pd* pd, ibv_qp_init_attr& attr, std::uint32_t min_inline) {
  for (std::uint32_t want = attr.cap.max_inline_data;;) {
    ibv_qp_init_attr tried = attr;  // the provider may rewrite cap even when it refuses
    tried.cap.max_inline_data = want;
    try {
      CmQueuePair qp(id, pd, tried);
      attr = tried;
      return qp;
    } catch (const Error&) {
      if (want == 0) throw;
      want = want > min_inline ? want / 2 : 0;
    }
  }
}

rdma_conn_param connection_param(std::span<const std::byte> private_data,
                                 std::uint8_t responder_resources,
                                 std::uint8_t initiator_depth) noexcept {
  rdma_conn_param param{};
  param.private_data = private_data.data();
  param.private_data_len = static_cast<std::uint8_t>(private_data.size());
  param.responder_resources = responder_resources;
  param.initiator_depth = initiator_depth;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  return param;
}

}  // namespace tickrail::rdma
