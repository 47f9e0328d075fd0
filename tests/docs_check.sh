#!/usr/bin/env bash
# docs_check.sh [ROOT]: checks the documentation (README.md and docs/*.md)
# and fails, listing every problem, when
#   - README.md has 300 lines or more;
#   - a docs page has no contents list (a bullet list of links to its own
#     headings, before its first "## " heading), a contents entry names no
#     heading of the page, or a "## " heading is missing from the contents;
#   - a relative Markdown link or image (README.md or docs/) points to a
#     file that does not exist, or to an anchor that no heading of the
#     target Markdown file makes;
#   - a fenced ```sh, ```bash, ```shell or ```console block is not followed
#     by a "Run by:" paragraph naming, in backquotes, at least one file of
#     the repository (a test or a script that runs those commands), every
#     one of which exists.
# Anchors follow GitHub's rule: the heading's text in lower case, every
# character but letters, digits, spaces, '-' and '_' dropped, spaces turned
# into '-', and -1, -2, ... appended to repeats. Needs bash and a POSIX awk:
# no build. CTest runs it as docs_check (label fast).
set -euo pipefail
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$root"
export LC_ALL=C

status=0
lines=$(wc -l < README.md)
if [ "$lines" -ge 300 ]; then
  echo "README.md: $lines lines; the README must stay under 300 (move detail to docs/)" >&2
  status=1
fi
pages=(docs/*.md)
if [ ! -e "${pages[0]}" ]; then
  echo "docs/: no pages" >&2
  exit 1
fi

awk -v readme=README.md '
function slug(h) {
  sub(/^#+[ \t]+/, "", h)
  sub(/[ \t]+#*[ \t]*$/, "", h)
  h = tolower(h)
  gsub(/[^a-z0-9 _-]/, "", h)
  gsub(/ /, "-", h)
  return h
}
# Every heading anchor of the Markdown file at path, into anchors[path, a].
function load(path,    line, fence, s, n) {
  if (path in loaded) return
  loaded[path] = 1
  fence = 0
  while ((getline line < path) > 0) {
    if (line ~ /^[ \t]*```/) { fence = !fence; continue }
    if (fence || line !~ /^#+[ \t]/) continue
    s = slug(line)
    n = seen[path, s]++
    if (n > 0) s = s "-" n
    anchors[path, s] = 1
  }
  close(path)
}
function exists(path) {
  return system("test -e \047" path "\047") == 0
}
function problem(msg) {
  print FILENAME ":" FNR ": " msg > "/dev/stderr"
  bad = 1
}
# Checks the paragraph that follows a shell block: "Run by:" and files.
function check_run_by(text, where,    rest, tok, found, p) {
  if (text !~ /^Run by:/) {
    print where ": a shell block with no \"Run by:\" line after it" > "/dev/stderr"
    bad = 1
    return
  }
  rest = text
  found = 0
  while (match(rest, /`[^`]*`/)) {
    tok = substr(rest, RSTART + 1, RLENGTH - 2)
    rest = substr(rest, RSTART + RLENGTH)
    if (tok !~ /\// || tok ~ /^-/ || tok ~ /[ \t]/) continue
    p = tok
    sub(/:[0-9]+$/, "", p)
    if (exists(p)) found++
    else {
      print where ": \"Run by:\" names `" tok "`, which does not exist" > "/dev/stderr"
      bad = 1
      return
    }
  }
  if (found == 0) {
    print where ": \"Run by:\" names no file of the repository (in backquotes)" > "/dev/stderr"
    bad = 1
  }
}
function finish_file() {
  if (pending) {
    check_run_by(after, pending_where)
    pending = 0
  }
  if (cur == "" || cur == readme) return
  if (ncontents == 0)
    print cur ": no contents list (bullet links to its ## headings before the first one)" > "/dev/stderr"
  if (ncontents == 0) bad = 1
  for (i = 1; i <= ncontents; i++) {
    if (!((cur, contents[i]) in anchors)) {
      print cur ": contents entry #" contents[i] " matches no heading" > "/dev/stderr"
      bad = 1
    }
    listed[contents[i]] = 1
  }
  for (i = 1; i <= nh2; i++) {
    if (!(h2[i] in listed)) {
      print cur ": heading \"## " h2text[i] "\" is missing from the contents list" > "/dev/stderr"
      bad = 1
    }
  }
  for (k in listed) delete listed[k]
}
FNR == 1 {
  finish_file()
  cur = FILENAME
  dir = FILENAME
  if (dir ~ /\//) sub(/\/[^\/]*$/, "", dir); else dir = "."
  load(FILENAME)
  fence = 0; ncontents = 0; nh2 = 0; before_h2 = 1; pending = 0
}
{
  line = $0
  # The paragraph after a shell block: it must say what runs the block.
  if (pending == 1) {
    if (line ~ /^[ \t]*$/) next
    after = line; pending = 2
    next
  }
  if (pending == 2) {
    if (line !~ /^[ \t]*$/ && line !~ /^[ \t]*```/ && line !~ /^#/) {
      after = after " " line
      next
    }
    check_run_by(after, pending_where)
    pending = 0
  }
  if (line ~ /^[ \t]*```/) {
    if (!fence) {
      fence = 1
      info = line
      sub(/^[ \t]*```[ \t]*/, "", info)
      sub(/[ \t].*$/, "", info)
      shell = (info == "sh" || info == "bash" || info == "shell" || info == "console")
      fence_start = FNR
    } else {
      fence = 0
      if (shell) { pending = 1; pending_where = FILENAME ":" fence_start; after = "" }
    }
    next
  }
  if (fence) next
  if (line ~ /^#+[ \t]/) {
    s = slug(line)
    n = hseen[cur, s]++
    if (n > 0) s = s "-" n
    if (line ~ /^## /) {
      before_h2 = 0
      h2text[++nh2] = substr(line, 4)
      h2[nh2] = s
    }
  }
  if (before_h2 && line ~ /^[ \t]*[-*][ \t]+\[[^]]*\]\(#[^)]*\)/) {
    t = line
    sub(/^[^(]*\(#/, "", t)
    sub(/\).*$/, "", t)
    contents[++ncontents] = t
  }
  # Links and images, outside inline code.
  gsub(/`[^`]*`/, "", line)
  while (match(line, /\]\([^) \t]+([ \t]+"[^"]*")?\)/)) {
    target = substr(line, RSTART + 2, RLENGTH - 3)
    line = substr(line, RSTART + RLENGTH)
    sub(/[ \t].*$/, "", target)
    if (target ~ /^(https?|mailto|ftp):/) continue
    path = target; anchor = ""
    if (index(target, "#") > 0) {
      path = substr(target, 1, index(target, "#") - 1)
      anchor = substr(target, index(target, "#") + 1)
    }
    file = (path == "") ? FILENAME : dir "/" path
    if (path != "" && !exists(file)) {
      problem("link to " target ": no such file")
      continue
    }
    if (anchor != "" && file ~ /\.md$/) {
      load(file)
      if (!((file, anchor) in anchors)) problem("link to " target ": no such heading")
    }
  }
}
END {
  finish_file()
  exit bad
}
' README.md "${pages[@]}" || status=1

if [ "$status" -ne 0 ]; then
  echo "docs_check: FAILED (README.md and docs/; see tests/docs_check.sh for the rules)" >&2
else
  echo "docs_check: README.md ($lines lines) and ${#pages[@]} pages in docs/: ok"
fi
exit "$status"
