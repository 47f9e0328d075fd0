#include "common/dataset/device_index.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <memory>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/crypto/openssl.h"
#include "common/dataset/dataset_internal.h"
#include "common/dataset/node_line.h"
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

using Digest = std::array<uint8_t, 32>;

// What the index records of one dataset file.
struct FileStamp {
  uint64_t size = 0;
  Digest sha256{};
};

absl::Status Stale(const std::string& dir, absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      dataset_internal::JoinPath(dir, kDeviceIndexFile),
      " does not match the dataset folder (",
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
  ASSIGN_OR_RETURN(File file,
                   File::Open(dataset_internal::JoinPath(dir, name)));
  FileStamp stamp;
  ASSIGN_OR_RETURN(stamp.size, file.Size());
  ASSIGN_OR_RETURN(stamp.sha256,
                   file.Sha256(stamp.size, [](uint64_t, const char*, size_t) {}));
  return stamp;
}

// What devices.idx's header records, and the index file's size.
struct IndexHeader {
  uint64_t index_size = 0;
  uint64_t n = 0;        // nodes
  uint64_t entries = 0;  // adjacency entries
  FileStamp svm, edges;  // nodes.svm and edges.txt when indexed
  // Bytes of each offsets array (line_offset, adjacency_offset).
  uint64_t offsets_bytes() const { return (n + 1) * 8; }
};

// The shard [begin, end) of meta's nodes: INVALID_ARGUMENT for an empty one
// or one beyond meta.nodes.
absl::Status CheckShard(const std::string& dir, const DatasetMeta& meta,
                        uint32_t begin, uint32_t end) {
  if (begin >= end || end > meta.nodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the shard [", begin, ", ", end, ") of ", dir,
                     begin >= end ? " is empty"
                                  : absl::StrCat(" goes beyond its ",
                                                 meta.nodes, " nodes")));
  }
  return absl::OkStatus();
}

// dir/devices.idx, open; FAILED_PRECONDITION naming `ldpgraph prepare` when
// there is none.
absl::StatusOr<File> OpenIndex(const std::string& dir) {
  const std::string index_path =
      dataset_internal::JoinPath(dir, kDeviceIndexFile);
  auto opened = File::Open(index_path);
  if (absl::IsNotFound(opened.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir, " has no device index (", kDeviceIndexFile,
        "), which an agent host reads its own nodes' records through: run "
        "`ldpgraph prepare --dataset ", dir,
        "` (add --out DIR for a read-only folder)"));
  }
  return opened;
}

// The index's header, checked against its magic (an older format is
// stale), meta's node count and the index's own size.
absl::StatusOr<IndexHeader> ReadIndexHeader(const std::string& dir,
                                            const File& index,
                                            const DatasetMeta& meta) {
  IndexHeader h;
  ASSIGN_OR_RETURN(h.index_size, index.Size());
  char magic[8] = {};
  if (h.index_size >= 8) RETURN_IF_ERROR(index.Read(0, magic, 8));
  if (std::memcmp(magic, kOldMagic, 8) == 0) {
    return Stale(dir, "an index of an older format, which recorded neither "
                      "edges.txt nor the files' checksums");
  }
  if (h.index_size < kHeaderBytes) return Stale(dir, "the index is truncated");
  if (std::memcmp(magic, kMagic, 8) != 0) return Stale(dir, "not an index");
  char header[kHeaderBytes - 8];
  RETURN_IF_ERROR(index.Read(8, header, sizeof(header)));
  const char* p = header;
  auto take = [&p](void* out, size_t bytes) {
    std::memcpy(out, p, bytes);
    p += bytes;
  };
  take(&h.n, 8);
  take(&h.svm.size, 8);
  take(h.svm.sha256.data(), 32);
  take(&h.edges.size, 8);
  take(h.edges.sha256.data(), 32);
  take(&h.entries, 8);
  if (h.n != meta.nodes) {
    return Stale(dir, absl::StrCat("it indexes ", h.n,
                                   " nodes, meta.json says ", meta.nodes));
  }
  const uint64_t implied = kHeaderBytes + 2 * h.offsets_bytes() + h.entries * 4;
  if (h.index_size != implied) {
    return Stale(dir, absl::StrCat("the index is ", h.index_size,
                                   " bytes, its header implies ", implied));
  }
  return h;
}

// The file `name` of dir, open, if its size is the one the index recorded.
absl::StatusOr<File> OpenIndexedFile(const std::string& dir,
                                     absl::string_view name,
                                     const FileStamp& stamp) {
  ASSIGN_OR_RETURN(File file,
                   File::Open(dataset_internal::JoinPath(dir, name)));
  ASSIGN_OR_RETURN(const uint64_t size, file.Size());
  if (size != stamp.size) {
    return Stale(dir, absl::StrCat(name, " is ", size,
                                   " bytes, the index was made for ",
                                   stamp.size));
  }
  return file;
}

// The first 8 bytes of a digest in hex, for an error message.
std::string DigestPrefix(const Digest& d) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(d.data()), 8));
}

// Stale unless nodes.svm and edges.txt hash to what the index recorded.
absl::Status CheckChecksums(const std::string& dir, const File& nodes,
                            const File& edges, const IndexHeader& h) {
  auto none = [](uint64_t, const char*, size_t) {};
  for (const auto& [file, stamp, name] :
       {std::tuple<const File&, const FileStamp&, absl::string_view>(
            nodes, h.svm, dataset_internal::kNodesFile),
        {edges, h.edges, dataset_internal::kEdgesFile}}) {
    ASSIGN_OR_RETURN(const Digest now, file.Sha256(stamp.size, none));
    if (now != stamp.sha256) {
      return Stale(dir, absl::StrCat(
                            name, " has changed since it was indexed (SHA-256 ",
                            DigestPrefix(now), "..., the index was made for ",
                            DigestPrefix(stamp.sha256), "...)"));
    }
  }
  return absl::OkStatus();
}

// What a shard reads: its slices of the index's offsets (count + 1 each),
// its lines of nodes.svm with the byte before them (text, from byte
// `from`), and its neighbour lists.
struct ShardSlices {
  std::vector<uint64_t> lines, adjacency;
  uint64_t from = 0;
  std::string text;
  std::vector<uint32_t> neighbours;
};

// Reads the shard's slices; stale where the offsets decrease, point beyond
// the files, or the first line does not start after a line break.
absl::StatusOr<ShardSlices> ReadShardSlices(const std::string& dir,
                                            const File& index,
                                            const File& nodes,
                                            const IndexHeader& h,
                                            uint32_t begin, size_t count) {
  ShardSlices s;
  s.lines.resize(count + 1);
  s.adjacency.resize(count + 1);
  RETURN_IF_ERROR(index.Read(kHeaderBytes + uint64_t{begin} * 8,
                             s.lines.data(), (count + 1) * 8));
  RETURN_IF_ERROR(index.Read(
      kHeaderBytes + h.offsets_bytes() + uint64_t{begin} * 8,
      s.adjacency.data(), (count + 1) * 8));
  for (size_t i = 0; i < count; ++i) {
    if (s.lines[i + 1] < s.lines[i] || s.adjacency[i + 1] < s.adjacency[i]) {
      return Stale(dir, absl::StrCat("offsets of node ", begin + i,
                                     " decrease"));
    }
  }
  if (s.lines[count] > h.svm.size || s.adjacency[count] > h.entries) {
    return Stale(dir, "offsets beyond the files");
  }
  // The shard's lines, with the byte before them: each must start a line.
  s.from = s.lines[0] > 0 ? s.lines[0] - 1 : 0;
  s.text.assign(s.lines[count] - s.from, '\0');
  RETURN_IF_ERROR(nodes.Read(s.from, s.text.data(), s.text.size()));
  if (s.lines[0] > 0 && s.text[0] != '\n') {
    return Stale(dir, absl::StrCat("node ", begin, "'s line does not start "
                                   "after a line break"));
  }
  s.neighbours.resize(s.adjacency[count] - s.adjacency[0]);
  RETURN_IF_ERROR(index.Read(
      kHeaderBytes + 2 * h.offsets_bytes() + s.adjacency[0] * 4,
      s.neighbours.data(), s.neighbours.size() * 4));
  return s;
}

// Node r.node's record (its i-th of the shard) from the slices: its line
// parsed as LoadDataset parses it, its neighbours checked ascending ids < n
// without itself.
absl::Status ParseShardRecord(const std::string& dir,
                              const std::string& nodes_path,
                              const DatasetMeta& meta, const IndexHeader& h,
                              const ShardSlices& s, size_t i,
                              DeviceRecord& r) {
  absl::string_view line(s.text.data() + (s.lines[i] - s.from),
                         s.lines[i + 1] - s.lines[i]);
  const bool last = s.lines[i + 1] == h.svm.size;
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
  const uint64_t a = s.adjacency[i] - s.adjacency[0];
  const uint64_t b = s.adjacency[i + 1] - s.adjacency[0];
  r.neighbours.assign(s.neighbours.begin() + a, s.neighbours.begin() + b);
  for (size_t k = 0; k < r.neighbours.size(); ++k) {
    const uint32_t u = r.neighbours[k];
    if (u >= h.n || u == r.node || (k > 0 && u <= r.neighbours[k - 1])) {
      return Stale(dir, absl::StrCat("node ", r.node, "'s neighbour list "
                                     "is not ascending ids < ", h.n,
                                     " without itself"));
    }
  }
  return absl::OkStatus();
}


}  // namespace

absl::Status WriteDeviceIndex(const std::string& dir, const Graph& g) {
  const std::string nodes_path =
      dataset_internal::JoinPath(dir, dataset_internal::kNodesFile);
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
  ASSIGN_OR_RETURN(const FileStamp edges,
                   StampOf(dir, dataset_internal::kEdgesFile));
  AtomicFileWriter out(dataset_internal::JoinPath(dir, kDeviceIndexFile));
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
  RETURN_IF_ERROR(CheckShard(dir, meta, begin, end));
  ASSIGN_OR_RETURN(const File index, OpenIndex(dir));
  ASSIGN_OR_RETURN(const IndexHeader h, ReadIndexHeader(dir, index, meta));
  ASSIGN_OR_RETURN(const File nodes,
                   OpenIndexedFile(dir, dataset_internal::kNodesFile, h.svm));
  ASSIGN_OR_RETURN(const File edges,
                   OpenIndexedFile(dir, dataset_internal::kEdgesFile, h.edges));
  if (h.svm.size + h.edges.size <= checksum_bytes) {
    RETURN_IF_ERROR(CheckChecksums(dir, nodes, edges, h));
  }
  const size_t count = end - begin;
  ASSIGN_OR_RETURN(const ShardSlices slices,
                   ReadShardSlices(dir, index, nodes, h, begin, count));
  const std::string nodes_path =
      dataset_internal::JoinPath(dir, dataset_internal::kNodesFile);
  std::vector<DeviceRecord> records(count);
  for (size_t i = 0; i < count; ++i) {
    records[i].node = begin + static_cast<uint32_t>(i);
    RETURN_IF_ERROR(
        ParseShardRecord(dir, nodes_path, meta, h, slices, i, records[i]));
  }
  return records;
}

}  // namespace ldpgraph
