// What one curator process does. By default one process does everything
// (kAll) over its embedded SQLite store. A deployment that outgrows one
// machine, or must survive losing it, keeps its durable state in a shared
// PostgreSQL database (server/store/postgres_store.h) and splits the work:
//
//   kFrontend  serves agents: enrolment, tasks, reports, the relay, check-ins.
//              Any number run side by side (behind one Service name, or
//              listed in the agents' --curator). Everything durable goes to
//              the store; sessions are the process's own, so an agent that
//              moves to another frontend enrols again (its memo makes a
//              resent report a duplicate, stored and charged once). It
//              learns of campaigns the operator opened or closed, and of the
//              answers other frontends stored, by polling the store (Sync)
//              every ServerOptions::sync_interval; it closes no campaign.
//   kOperator  serves the admin API: campaigns' lifecycle (create, close,
//              quorum and deadline closes after each Sync), estimation,
//              propagation, training, releases. One is active at a time: it
//              holds the store's operator lease (a PostgreSQL advisory lock
//              on a connection of its own). A standby started beside it
//              waits, not serving, until the lease is free -- PostgreSQL
//              frees it as soon as the active one's connection ends -- then
//              loads the state from the store and serves. An operator that
//              finds it lost the lease (its connection broke and another
//              took it) stops serving and exits, so that two never act at
//              once; its supervisor restarts it as a standby. A restart
//              of the database frees the lease too: the holder takes it
//              back when the database answers, ahead of a standby
//              (PostgresStore's grace), and no process exits for the
//              database's absence -- each waits and reconnects.
//   kAll       both, in one process (the default); over PostgreSQL it syncs
//              as a frontend does, so that a database shared with other
//              processes stays right.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ldpgraph::curator {

enum class Role { kAll, kFrontend, kOperator };

// "all", "frontend" or "operator"; INVALID_ARGUMENT naming the choices.
absl::StatusOr<Role> ParseRole(absl::string_view name);
const char* RoleName(Role role);

inline bool ServesAgents(Role r) { return r != Role::kOperator; }
inline bool ServesAdmin(Role r) { return r != Role::kFrontend; }

}  // namespace ldpgraph::curator
