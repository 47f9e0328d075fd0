#include "common/dataset/device_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/crypto/openssl.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace {

static_assert(std::endian::native == std::endian::little,
              "devices.idx is little-endian; this reader assumes a "
              "little-endian host");

constexpr char kMagic[8] = {'L', 'D', 'P', 'G', 'D', 'I', 'X', '2'};
constexpr char kOldMagic[8] = {'L', 'D', 'P', 'G', 'D', 'I', 'X', '1'};
// magic, n, nodes.svm size and SHA-256, edges.txt size and SHA-256, entries.
constexpr uint64_t kHeaderBytes = 8 + 8 + (8 + 32) + (8 + 32) + 8;
constexpr absl::string_view kIndexedNodesFile = "nodes.svm";
constexpr absl::string_view kIndexedEdgesFile = "edges.txt";

using Digest = std::array<uint8_t, 32>;

// What the index records of one dataset file.
struct FileStamp {
  uint64_t size = 0;
  Digest sha256{};
};

std::string Join(const std::string& dir, absl::string_view name) {
  return (std::filesystem::path(dir) / std::string(name)).string();
}

absl::Status Stale(const std::string& dir, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      Join(dir, kDeviceIndexFile), " does not match the dataset folder (",
      what, "): run `ldpgraph prepare --dataset ", dir, "` again"));
}

// An open file read with pread; closed on destruction.
class File {
 public:
  static absl::StatusOr<File> Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", path));
    }
    return File(fd, path);
  }
  File(File&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(o.path_) {}
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::StatusOr<uint64_t> Size() const {
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      return absl::ErrnoToStatus(errno, absl::StrCat("cannot stat ", path_));
    }
    return static_cast<uint64_t>(st.st_size);
  }
  // Exactly n bytes at offset into out.
  absl::Status Read(uint64_t offset, void* out, size_t n) const {
    char* p = static_cast<char*>(out);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (got < 0) {
        if (errno == EINTR) continue;
        return absl::ErrnoToStatus(errno, absl::StrCat("cannot read ", path_));
      }
      if (got == 0) {
        return absl::OutOfRangeError(
            absl::StrCat(path_, " ends before byte ", offset + n));
      }
      p += got;
      offset += got;
      n -= got;
    }
    return absl::OkStatus();
  }

  // The SHA-256 of the whole file (of `size` bytes), read in chunks; each
  // chunk is handed to `also` before it is hashed.
  template <typename Also>
  absl::StatusOr<Digest> Sha256(uint64_t size, Also also) const {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(
        EVP_MD_CTX_new(), &EVP_MD_CTX_free);
    if (ctx == nullptr || EVP_DigestInit_ex(ctx.get(), EVP_sha256(),
                                            nullptr) != 1) {
      return crypto::OpenSslError(absl::StrCat("hashing ", path_));
    }
    std::vector<char> buffer(size_t{1} << 20);
    for (uint64_t at = 0; at < size;) {
      const size_t n =
          static_cast<size_t>(std::min<uint64_t>(buffer.size(), size - at));
      RETURN_IF_ERROR(Read(at, buffer.data(), n));
      also(at, buffer.data(), n);
      if (EVP_DigestUpdate(ctx.get(), buffer.data(), n) != 1) {
        return crypto::OpenSslError(absl::StrCat("hashing ", path_));
      }
      at += n;
    }
    Digest d;
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(ctx.get(), d.data(), &len) != 1 ||
        len != d.size()) {
      return crypto::OpenSslError(absl::StrCat("hashing ", path_));
    }
    return d;
  }

 private:
  File(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

// The size and SHA-256 of the file `name` of dir.
absl::StatusOr<FileStamp> StampOf(const std::string& dir,
                                  absl::string_view name) {
  ASSIGN_OR_RETURN(File file, File::Open(Join(dir, name)));
  FileStamp stamp;
  ASSIGN_OR_RETURN(stamp.size, file.Size());
  ASSIGN_OR_RETURN(stamp.sha256,
                   file.Sha256(stamp.size, [](uint64_t, const char*, size_t) {}));
  return stamp;
}

}  // namespace

absl::Status WriteDeviceIndex(const std::string& dir, const Graph& g) {
  const std::string nodes_path = Join(dir, kIndexedNodesFile);
  ASSIGN_OR_RETURN(File nodes, File::Open(nodes_path));
  FileStamp svm;
  ASSIGN_OR_RETURN(svm.size, nodes.Size());
  std::vector<uint64_t> lines;
  lines.reserve(g.num_nodes() + 1);
  lines.push_back(0);
  ASSIGN_OR_RETURN(
      svm.sha256,
      nodes.Sha256(svm.size, [&lines](uint64_t at, const char* data,
                                      size_t n) {
        for (const char* p = data; p < data + n; ++p) {
          p = static_cast<const char*>(std::memchr(p, '\n', data + n - p));
          if (p == nullptr) break;
          lines.push_back(at + (p - data) + 1);
        }
      }));
  const uint64_t size = svm.size;
  if (lines.back() != size) lines.push_back(size);  // no final '\n'
  if (lines.size() != g.num_nodes() + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        nodes_path, " has ", lines.size() - 1, " lines for a graph of ",
        g.num_nodes(), " nodes"));
  }
  ASSIGN_OR_RETURN(const FileStamp edges, StampOf(dir, kIndexedEdgesFile));
  AtomicFileWriter out(Join(dir, kDeviceIndexFile));
  RETURN_IF_ERROR(out.Open());
  auto put = [&out](const void* data, size_t n) {
    out.Append(absl::string_view(static_cast<const char*>(data), n));
  };
  const uint64_t n = g.num_nodes();
  uint64_t entries = 0;
  for (NodeId v = 0; v < n; ++v) entries += g.neighbors(v).size();
  put(kMagic, sizeof(kMagic));
  put(&n, 8);
  put(&svm.size, 8);
  put(svm.sha256.data(), svm.sha256.size());
  put(&edges.size, 8);
  put(edges.sha256.data(), edges.sha256.size());
  put(&entries, 8);
  put(lines.data(), lines.size() * 8);
  uint64_t offset = 0;
  put(&offset, 8);
  for (NodeId v = 0; v < n; ++v) {
    offset += g.neighbors(v).size();
    put(&offset, 8);
  }
  for (NodeId v = 0; v < n; ++v) {
    const auto nb = g.neighbors(v);
    static_assert(sizeof(NodeId) == 4);
    put(nb.data(), nb.size() * 4);
  }
  RETURN_IF_ERROR(out.Close());
  return out.Commit();
}

absl::StatusOr<std::vector<DeviceRecord>> ReadDeviceRecords(
    const std::string& dir, const DatasetMeta& meta, uint32_t begin,
    uint32_t end, uint64_t checksum_bytes) {
  if (begin >= end || end > meta.nodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the shard [", begin, ", ", end, ") of ", dir,
                     begin >= end ? " is empty"
                                  : absl::StrCat(" goes beyond its ",
                                                 meta.nodes, " nodes")));
  }
  const std::string index_path = Join(dir, kDeviceIndexFile);
  auto opened = File::Open(index_path);
  if (absl::IsNotFound(opened.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " has no device index (", kDeviceIndexFile,
        "), which an agent host reads its own nodes' records through: run "
        "`ldpgraph prepare --dataset ", dir,
        "` (add --out DIR for a read-only folder)"));
  }
  RETURN_IF_ERROR(opened.status());
  const File& index = *opened;
  ASSIGN_OR_RETURN(const uint64_t index_size, index.Size());
  char magic[8] = {};
  if (index_size >= 8) RETURN_IF_ERROR(index.Read(0, magic, 8));
  if (std::memcmp(magic, kOldMagic, 8) == 0) {
    return Stale(dir, "an index of an older format, which recorded neither "
                      "edges.txt nor the files' checksums");
  }
  if (index_size < kHeaderBytes) return Stale(dir, "the index is truncated");
  if (std::memcmp(magic, kMagic, 8) != 0) return Stale(dir, "not an index");
  char header[kHeaderBytes - 8];
  RETURN_IF_ERROR(index.Read(8, header, sizeof(header)));
  uint64_t n = 0, entries = 0;
  FileStamp svm, edges;
  const char* h = header;
  auto take = [&h](void* out, size_t bytes) {
    std::memcpy(out, h, bytes);
    h += bytes;
  };
  take(&n, 8);
  take(&svm.size, 8);
  take(svm.sha256.data(), 32);
  take(&edges.size, 8);
  take(edges.sha256.data(), 32);
  take(&entries, 8);
  if (n != meta.nodes) {
    return Stale(dir, absl::StrCat("it indexes ", n, " nodes, meta.json says ",
                                   meta.nodes));
  }
  const uint64_t offsets_bytes = (n + 1) * 8;
  if (index_size != kHeaderBytes + 2 * offsets_bytes + entries * 4) {
    return Stale(dir, absl::StrCat("the index is ", index_size,
                                   " bytes, its header implies ",
                                   kHeaderBytes + 2 * offsets_bytes +
                                       entries * 4));
  }
  const std::string nodes_path = Join(dir, kIndexedNodesFile);
  ASSIGN_OR_RETURN(File nodes, File::Open(nodes_path));
  ASSIGN_OR_RETURN(const uint64_t nodes_size, nodes.Size());
  if (nodes_size != svm.size) {
    return Stale(dir, absl::StrCat(kIndexedNodesFile, " is ", nodes_size,
                                   " bytes, the index was made for ",
                                   svm.size));
  }
  ASSIGN_OR_RETURN(File edges_file, File::Open(Join(dir, kIndexedEdgesFile)));
  ASSIGN_OR_RETURN(const uint64_t edges_size, edges_file.Size());
  if (edges_size != edges.size) {
    return Stale(dir, absl::StrCat(kIndexedEdgesFile, " is ", edges_size,
                                   " bytes, the index was made for ",
                                   edges.size));
  }
  if (svm.size + edges.size <= checksum_bytes) {
    auto none = [](uint64_t, const char*, size_t) {};
    for (const auto& [file, stamp, name] :
         {std::tuple<const File&, const FileStamp&, absl::string_view>(
              nodes, svm, kIndexedNodesFile),
          {edges_file, edges, kIndexedEdgesFile}}) {
      ASSIGN_OR_RETURN(const Digest now, file.Sha256(stamp.size, none));
      if (now != stamp.sha256) {
        return Stale(
            dir, absl::StrCat(
                     name, " has changed since it was indexed (SHA-256 ",
                     absl::BytesToHexString(absl::string_view(
                         reinterpret_cast<const char*>(now.data()), 8)),
                     "..., the index was made for ",
                     absl::BytesToHexString(absl::string_view(
                         reinterpret_cast<const char*>(stamp.sha256.data()),
                         8)),
                     "...)"));
      }
    }
  }
  const size_t count = end - begin;
  std::vector<uint64_t> lines(count + 1), adjacency(count + 1);
  RETURN_IF_ERROR(index.Read(kHeaderBytes + uint64_t{begin} * 8, lines.data(),
                             (count + 1) * 8));
  RETURN_IF_ERROR(index.Read(kHeaderBytes + offsets_bytes + uint64_t{begin} * 8,
                             adjacency.data(), (count + 1) * 8));
  for (size_t i = 0; i < count; ++i) {
    if (lines[i + 1] < lines[i] || adjacency[i + 1] < adjacency[i]) {
      return Stale(dir, absl::StrCat("offsets of node ", begin + i,
                                     " decrease"));
    }
  }
  if (lines[count] > nodes_size || adjacency[count] > entries) {
    return Stale(dir, "offsets beyond the files");
  }
  // The shard's lines, with the byte before them: each must start a line.
  const uint64_t from = lines[0] > 0 ? lines[0] - 1 : 0;
  std::string text(lines[count] - from, '\0');
  RETURN_IF_ERROR(nodes.Read(from, text.data(), text.size()));
  if (lines[0] > 0 && text[0] != '\n') {
    return Stale(dir, absl::StrCat("node ", begin, "'s line does not start "
                                   "after a line break"));
  }
  std::vector<uint32_t> neighbours(adjacency[count] - adjacency[0]);
  RETURN_IF_ERROR(index.Read(kHeaderBytes + 2 * offsets_bytes + adjacency[0] * 4,
                             neighbours.data(), neighbours.size() * 4));

  std::vector<DeviceRecord> records(count);
  for (size_t i = 0; i < count; ++i) {
    DeviceRecord& r = records[i];
    r.node = begin + static_cast<uint32_t>(i);
    absl::string_view line(text.data() + (lines[i] - from),
                           lines[i + 1] - lines[i]);
    const bool last = lines[i + 1] == nodes_size;
    if (line.empty() || (line.back() != '\n' && !last)) {
      return Stale(dir, absl::StrCat("node ", r.node,
                                     "'s line does not end with a line "
                                     "break"));
    }
    if (line.back() == '\n') line.remove_suffix(1);
    if (line.find('\n') != absl::string_view::npos) {
      return Stale(dir, absl::StrCat("node ", r.node, "'s bytes span lines"));
    }
    RETURN_IF_ERROR(ParseNodeLine(nodes_path, size_t{r.node} + 1, line, meta,
                                  &r.label, &r.indices, &r.values));
    const uint64_t a = adjacency[i] - adjacency[0];
    const uint64_t b = adjacency[i + 1] - adjacency[0];
    r.neighbours.assign(neighbours.begin() + a, neighbours.begin() + b);
    for (size_t k = 0; k < r.neighbours.size(); ++k) {
      const uint32_t u = r.neighbours[k];
      if (u >= n || u == r.node || (k > 0 && u <= r.neighbours[k - 1])) {
        return Stale(dir, absl::StrCat("node ", r.node, "'s neighbour list "
                                       "is not ascending ids < ", n,
                                       " without itself"));
      }
    }
  }
  return records;
}

}  // namespace ldpgraph
