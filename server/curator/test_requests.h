// Requests and reports the curator's unit tests build again and again: a
// small HDS features campaign, a neighbour substitution campaign whose
// features question is that HDS campaign's, and valid reports to them.
// For tests only. Also the curator such tests open, and ingest through it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/status_macros.h"
#include "ldpgraph/v1/admin.pb.h"
#include "ldpgraph/v1/agent.pb.h"
#include "server/curator/curator.h"
#include "server/store/store.h"

namespace ldpgraph::curator::requests {

// A curator over a fresh (or reopened) store in dir for num_nodes nodes
// with the node key `key`.
inline absl::StatusOr<std::unique_ptr<Curator>> OpenTestCurator(
    const std::string& dir, uint32_t num_nodes, const std::string& key,
    store::CuratorStore::Options store_options = {},
    store::CuratorStore** store_out = nullptr,
    CheckInDesk::Options check_in = {}) {
  ASSIGN_OR_RETURN(auto store, store::CuratorStore::Open(dir, store_options));
  if (store_out != nullptr) *store_out = store.get();
  Curator::Options o;
  o.num_nodes = num_nodes;
  o.node_key = key;
  o.check_in = check_in;
  return Curator::Open(std::move(store), o);
}

// Ingests a batch through the curator's agent side (CampaignBook::Ingest),
// the ack returned.
inline absl::StatusOr<v1::ReportAck> Ingest(AgentSide& agents,
                                            const Session& session,
                                            const v1::ReportBatch& batch) {
  v1::ReportAck ack;
  RETURN_IF_ERROR(agents.campaigns().Ingest(session, batch, &ack));
  return ack;
}

// Features of dimension 4 by HDS (one sampled index, range [-1, 1]) at
// epsilon eps, every node, quorum 1.
inline v1::CreateCampaignRequest HdsCampaign(double eps) {
  v1::CreateCampaignRequest r;
  r.set_attribute(v1::ATTRIBUTE_FEATURES);
  auto* s = r.mutable_spec();
  s->set_kind(v1::MECHANISM_KIND_HDS);
  s->set_epsilon(eps);
  s->set_dimension(4);
  s->set_sampled(1);
  s->set_range_low(-1);
  s->set_range_high(1);
  r.mutable_nodes()->set_all(true);
  r.set_quorum(1);
  return r;
}

// Neighbour substitution (approach 1, cosine, top 5) over num_nodes at
// eps_e, whose features question is HdsCampaign(eps_x)'s; every node,
// quorum 1.
inline v1::CreateCampaignRequest SubstitutionCampaign(uint32_t num_nodes,
                                                      double eps_e,
                                                      double eps_x) {
  v1::CreateCampaignRequest r;
  r.set_attribute(v1::ATTRIBUTE_EDGES);
  auto* s = r.mutable_spec();
  s->set_kind(v1::MECHANISM_KIND_EDGE_SUBSTITUTION);
  s->set_epsilon(eps_e);
  s->set_dimension(num_nodes);
  auto* sub = s->mutable_substitution();
  sub->set_approach(1);
  sub->set_similarity("cosine");
  sub->set_top_k(5);
  sub->set_max_dummies(5);
  sub->set_dummy_mean(0.5);
  sub->set_dummy_std(0.5);
  sub->set_round_timeout_ms(10000);
  *sub->mutable_features() = HdsCampaign(eps_x).spec();
  r.mutable_nodes()->set_all(true);
  r.set_quorum(1);
  return r;
}

// A valid report of node v to an HdsCampaign: index v % 4, this value.
inline v1::Report FeaturesReport(const std::string& campaign, uint32_t v,
                                 double value) {
  v1::Report r;
  r.set_campaign_id(campaign);
  r.set_node_id(v);
  r.mutable_features()->add_indices(v % 4);
  r.mutable_features()->add_values(value);
  return r;
}

// Node v's neighbour list to an edges campaign.
inline v1::Report EdgesReport(const std::string& campaign, uint32_t v,
                              std::vector<uint32_t> neighbours) {
  v1::Report r;
  r.set_campaign_id(campaign);
  r.set_node_id(v);
  for (uint32_t u : neighbours) r.mutable_edges()->add_neighbours(u);
  return r;
}

}  // namespace ldpgraph::curator::requests
