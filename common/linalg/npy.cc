#include "common/linalg/npy.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "common/status_macros.h"

namespace ldpgraph {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicSize = 6;

// The value text after `'key':` in a header dict, up to the next top-level
// comma or closing brace.
bool HeaderValue(absl::string_view header, absl::string_view key,
                 absl::string_view* value) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t pos = header.find(quoted);
  if (pos == absl::string_view::npos) return false;
  pos = header.find(':', pos + quoted.size());
  if (pos == absl::string_view::npos) return false;
  size_t end = pos + 1;
  int depth = 0;
  while (end < header.size()) {
    char c = header[end];
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (depth == 0 && (c == ',' || c == '}')) break;
    ++end;
  }
  *value = absl::StripAsciiWhitespace(header.substr(pos + 1, end - pos - 1));
  return true;
}

}  // namespace

// Writes one array: the header (descr, shape) and `bytes` bytes of data.
static absl::Status WriteNpyArray(const std::string& path, absl::string_view descr,
                           absl::string_view shape, const void* data,
                           size_t bytes) {
  std::string header = absl::StrCat("{'descr': '", descr,
                                    "', 'fortran_order': False, 'shape': ",
                                    shape, ", }");
  // Magic (6) + version (2) + length (2) + header + '\n', padded to 64.
  const size_t unpadded = kMagicSize + 4 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  if (header.size() > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": .npy header too long"));
  }
  AtomicFileWriter f(path);
  RETURN_IF_ERROR(f.Open());
  const uint16_t len = static_cast<uint16_t>(header.size());
  const char prefix[4] = {1, 0, static_cast<char>(len & 0xff),
                          static_cast<char>(len >> 8)};
  f.Append(absl::string_view(kMagic, kMagicSize));
  f.Append(absl::string_view(prefix, 4));
  f.Append(header);
  // x86-64 and aarch64 are little-endian, as '<f4' and '<i8' state.
  f.Append(absl::string_view(static_cast<const char*>(data), bytes));
  RETURN_IF_ERROR(f.Close());
  return f.Commit();
}

absl::Status WriteNpy(const std::string& path, const DenseMatrix& m) {
  static_assert(sizeof(float) == 4);
  return WriteNpyArray(path, "<f4", absl::StrCat("(", m.rows, ", ", m.cols, ")"),
                       m.data.data(), m.data.size() * sizeof(float));
}

absl::Status WriteNpyInt64(const std::string& path,
                           const std::vector<int64_t>& values) {
  return WriteNpyArray(path, "<i8", absl::StrCat("(", values.size(), ",)"),
                       values.data(), values.size() * sizeof(int64_t));
}

absl::StatusOr<DenseMatrix> ReadNpy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  auto bad = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
  };
  char magic[kMagicSize + 2];
  if (!in.read(magic, sizeof(magic)) ||
      std::memcmp(magic, kMagic, kMagicSize) != 0) {
    return bad("not a .npy file (bad magic)");
  }
  const int major = static_cast<unsigned char>(magic[kMagicSize]);
  size_t header_len = 0;
  if (major == 1) {
    unsigned char l[2];
    if (!in.read(reinterpret_cast<char*>(l), 2)) return bad("truncated header");
    header_len = l[0] | (l[1] << 8);
  } else if (major == 2 || major == 3) {
    unsigned char l[4];
    if (!in.read(reinterpret_cast<char*>(l), 4)) return bad("truncated header");
    header_len = l[0] | (l[1] << 8) | (l[2] << 16) | (size_t{l[3]} << 24);
  } else {
    return bad(absl::StrCat("unsupported .npy version ", major));
  }
  std::string header(header_len, '\0');
  if (!in.read(header.data(), header_len)) return bad("truncated header");
  absl::string_view descr, fortran, shape;
  if (!HeaderValue(header, "descr", &descr) ||
      !HeaderValue(header, "fortran_order", &fortran) ||
      !HeaderValue(header, "shape", &shape)) {
    return bad("header lacks descr, fortran_order or shape");
  }
  if (descr != "'<f4'") {
    return bad(absl::StrCat("dtype ", descr, " is not float32 ('<f4')"));
  }
  if (fortran != "False") return bad("Fortran-order arrays are not supported");
  if (!absl::ConsumePrefix(&shape, "(") || !absl::ConsumeSuffix(&shape, ")")) {
    return bad(absl::StrCat("malformed shape ", shape));
  }
  std::vector<size_t> dims;
  for (absl::string_view part = shape; !part.empty();) {
    size_t comma = part.find(',');
    absl::string_view tok = absl::StripAsciiWhitespace(part.substr(0, comma));
    if (!tok.empty()) {
      uint64_t v;
      if (!absl::SimpleAtoi(tok, &v)) {
        return bad(absl::StrCat("malformed shape entry '", tok, "'"));
      }
      dims.push_back(v);
    }
    if (comma == absl::string_view::npos) break;
    part.remove_prefix(comma + 1);
  }
  if (dims.size() != 2) {
    return bad(absl::StrCat("array has ", dims.size(), " dimensions, not 2"));
  }
  DenseMatrix m(dims[0], dims[1]);
  if (!m.data.empty() &&
      !in.read(reinterpret_cast<char*>(m.data.data()),
               static_cast<std::streamsize>(m.data.size() * sizeof(float)))) {
    return bad(absl::StrCat("truncated data: expected ", m.data.size(),
                            " float32 values"));
  }
  return m;
}

}  // namespace ldpgraph
