// The names of an enum's values, as the command line, configuration files
// and JSON records spell them: one table per enum, which both prints a value
// and parses a name, so the two can never disagree.
//
//   inline constexpr auto kOptimizerNames = MakeNameTable<Optimizer>(
//       "optimizer", {{Optimizer::kSgd, "sgd"}, {Optimizer::kAdam, "adam"}});
//   ASSIGN_OR_RETURN(Optimizer o, kOptimizerNames.Parse("adam"));
//   kOptimizerNames.Name(Optimizer::kSgd);  // "sgd"
//
// A table is a constant: immutable, safe to share between threads.
#pragma once

#include <array>
#include <cstddef>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ldpgraph {

// One value and its name.
template <class E>
struct NamedValue {
  E value{};
  absl::string_view name;
};

namespace names_internal {

// INVALID_ARGUMENT "<subject> must be one of <a, b, c>, got '<name>'".
absl::Status ChoiceError(absl::string_view subject, absl::string_view choices,
                         absl::string_view name);

}  // namespace names_internal

// The N named values of E, in the order given (the order Choices lists).
// Names are unique; a value should appear once (Name gives its first name).
template <class E, size_t N>
class NameTable {
 public:
  // subject: what the names name, for error messages ("optimizer").
  constexpr NameTable(absl::string_view subject,
                      const NamedValue<E> (&values)[N])
      : subject_(subject) {
    for (size_t i = 0; i < N; ++i) values_[i] = values[i];
  }

  // The value called name (case-sensitive). INVALID_ARGUMENT "<subject> must
  // be one of <Choices()>, got '<name>'" for any other name; the second form
  // puts its own subject (say the flag, "--optimizer") in that message.
  absl::StatusOr<E> Parse(absl::string_view name) const {
    return Parse(name, subject_);
  }
  absl::StatusOr<E> Parse(absl::string_view name,
                          absl::string_view subject) const {
    for (const NamedValue<E>& v : values_) {
      if (v.name == name) return v.value;
    }
    return names_internal::ChoiceError(subject, Choices(), name);
  }
  // As Parse, but only the values among `among` are accepted (and listed in
  // the message): for a setting that takes some of E's values only.
  absl::StatusOr<E> Parse(absl::string_view name, absl::string_view subject,
                          std::initializer_list<E> among) const {
    for (E v : among) {
      if (Name(v) == name) return v;
    }
    return names_internal::ChoiceError(subject, Choices(among), name);
  }

  // The name of value; "unknown" for a value the table does not list (an
  // enum's UNSPECIFIED, say, or a number no value has).
  constexpr absl::string_view Name(E value) const {
    for (const NamedValue<E>& v : values_) {
      if (v.value == value) return v.name;
    }
    return "unknown";
  }

  // True if the table lists value.
  constexpr bool Contains(E value) const {
    for (const NamedValue<E>& v : values_) {
      if (v.value == value) return true;
    }
    return false;
  }

  // Every name, in order, comma separated: "a, b, c".
  std::string Choices() const {
    std::string out;
    for (const NamedValue<E>& v : values_) {
      if (!out.empty()) out += ", ";
      out.append(v.name.data(), v.name.size());
    }
    return out;
  }

  // The names of the values among `among`, in among's order: "a, b".
  std::string Choices(std::initializer_list<E> among) const {
    std::string out;
    for (E v : among) {
      if (!out.empty()) out += ", ";
      const absl::string_view name = Name(v);
      out.append(name.data(), name.size());
    }
    return out;
  }

  // As Choices, the last two names joined by " or " instead: "a, b or c"
  // ("a or b", "a"), for messages written as prose.
  std::string ChoicesOr() const {
    std::string out;
    for (size_t i = 0; i < N; ++i) {
      if (i > 0) out += i + 1 == N ? " or " : ", ";
      out.append(values_[i].name.data(), values_[i].name.size());
    }
    return out;
  }
  std::string ChoicesOr(std::initializer_list<E> among) const {
    std::string out;
    size_t i = 0;
    for (E v : among) {
      if (i > 0) out += i + 1 == among.size() ? " or " : ", ";
      const absl::string_view name = Name(v);
      out.append(name.data(), name.size());
      ++i;
    }
    return out;
  }

  constexpr absl::string_view subject() const { return subject_; }
  constexpr const std::array<NamedValue<E>, N>& values() const {
    return values_;
  }

 private:
  absl::string_view subject_;
  std::array<NamedValue<E>, N> values_{};
};

// A table of E's values with N deduced from the list: E must be given,
// MakeNameTable<E>("subject", {{E::kA, "a"}, {E::kB, "b"}}).
template <class E, size_t N>
constexpr NameTable<E, N> MakeNameTable(absl::string_view subject,
                                        const NamedValue<E> (&values)[N]) {
  return NameTable<E, N>(subject, values);
}

}  // namespace ldpgraph
