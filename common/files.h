// Directories on disk: creating a folder and its missing parents, for the
// programs' state folders (the curator's --data-dir, say).
#pragma once

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"

namespace ldpgraph {

// Creates the directory `path` and every missing parent, like `mkdir -p`:
// parents with mode 0755, the leaf with leaf_mode (both less the umask).
// Directories that already exist, the leaf included, are fine and keep their
// mode, so a second call is a no-op (and two processes may race). Relative
// paths are taken from the working directory; trailing and repeated '/' are
// ignored. INVALID_ARGUMENT for an empty path; FAILED_PRECONDITION
// "<prefix> exists and is not a directory" when a component is a file;
// otherwise the mkdir errno's code (PERMISSION_DENIED for EACCES, ...) with
// "cannot create directory <prefix>: <strerror>". On an error the parents
// created so far are left in place.
absl::Status MakeDirs(const std::string& path, mode_t leaf_mode = 0700);

}  // namespace ldpgraph
