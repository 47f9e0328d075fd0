// `ldpctl --help` and `ldpctl COMMAND --help` (commands.h): the overview
// and each admin command's help with examples; simulate's and run's come
// from simulate.h.
#include <string>

#include "server/ldpctl/commands.h"
#include "server/ldpctl/simulate.h"

namespace ldpgraph::ldpctl {
namespace {

constexpr char kOverview[] = R"(ldpctl: the admin CLI of an ldpgraph curator, and a whole simulated deployment
in one command.

Usage: ldpctl <command> [ARGS] [flags]        ldpctl <command> --help

Start here:
  simulate            start a curator and agent hosts on this machine (TLS on
                      loopback), collect, estimate, train, print a results
                      table; cleans up after itself

Against a running curator:
  run                 on a deployment started elsewhere (compose, Kubernetes):
                      wait for the agents, collect, estimate, evaluate, print
                      the results table of simulate
  status              the curator at a glance: graph, hosts, campaigns, traffic
  campaign            create, list, show, wait, close, refusals
  budget show         epsilon spent per node and its summary (the ledger)
  pipeline            run (estimate + evaluate), estimate, propagate, evaluate
  release             create (a structure embedding under central DP:
                      se-privgemb or dpne, charged to the graph's release
                      ledger), ledger (what each graph's releases cost)
  results             every recorded pipeline result; a result's id list
  export              an estimate, embedding or release as .npy, with its
                      node ids
  audit               the audit log

Offline:
  credentials         derive node credentials to provision agent hosts
  secrets             everything a containerised deployment needs: a
                      development CA and curator certificate, an admin token,
                      a node key and every node's credential
  edge-config         the HAProxy configuration of a TLS edge in front of
                      curator frontends

Connection (every command against a curator; flag > environment > config):
  --curator ADDR      curator address (default 127.0.0.1:7443; $LDPCTL_CURATOR),
                      or HOST:PORT,HOST:PORT for an operator and its standby
  --admin-token FILE  the admin token, hex ($LDPCTL_ADMIN_TOKEN_FILE, or the
                      token itself in $LDPCTL_ADMIN_TOKEN)
  --ca FILE           CA certificate that signed the curator's ($LDPCTL_CA)
  --server-name NAME  name to check the curator's certificate against
                      ($LDPCTL_SERVER_NAME)
  --insecure          plaintext gRPC, development only ($LDPCTL_INSECURE=1)
  --config FILE       "key = value" lines: curator, admin-token, ca,
                      server-name, insecure ($LDPCTL_CONFIG; default
                      ~/.config/ldpctl/config if it exists)
  --format F          table (default) or json (--json is short for it)

Exit codes:
  0 success            4 curator unreachable        7 timed out (--timeout)
  1 failed             5 no such campaign/result    130 interrupted (Ctrl-C)
  2 usage error        6 refused (ledger, state, conflict)
  3 not authorised

Example:
  ldpctl simulate                                  # the quick start
  ldpctl simulate --keep-running                   # then, in another shell:
  ldpctl --config /tmp/ldpctl-sim-XXXX/ldpctl.conf status
)";

struct CommandHelp {
  const char* name;
  const char* text;
};

constexpr CommandHelp kHelp[] = {
    {"status", R"(ldpctl status: the curator at a glance

Usage: ldpctl status [connection flags] [--format table|json]

Shows the curator's graph (nodes, edges, classes), the agent hosts connected
(enrolment sessions, nodes enrolled, task streams open), campaigns by state,
answers stored (reports and refusals), reports accepted, duplicated and
rejected since the curator started, the bytes of reports received, and the
results recorded.

Examples:
  ldpctl status --curator curator:7443 --ca certs/ca.pem --admin-token certs/admin.token
  ldpctl status --config deploy.conf --format json | jq .enrolled_nodes
)"},
    {"campaign", R"(ldpctl campaign: collection campaigns

Usage:
  ldpctl campaign create --attribute A --mechanism M --epsilon E --dimension D [flags]
  ldpctl campaign list
  ldpctl campaign show ID
  ldpctl campaign wait ID [--timeout SECONDS]
  ldpctl campaign close ID
  ldpctl campaign refusals ID

A campaign asks every targeted node one question. Its agent answers with a
perturbed report (spending epsilon from its own budget) or refuses, with a
reason. The curator refuses to open a campaign some node could not afford.
`wait` shows progress on stderr until the campaign closes or every targeted
node has answered.

create flags:
  --attribute A       features (default), label or edges
  --mechanism M       hds, square-wave, multibit, onebit, piecewise, laplace,
                      label-rr, edge-rr, edge-substitution, edge-blink
  --epsilon E         the budget one report spends (edges: eps_e; edge-blink:
                      the node's total, bits and degree)
  --dimension D       features: d; label: classes; edges: number of nodes
                      (default for edges: the curator's node count)
  --sampled K         k or m sampled dimensions (default: the mechanism's)
  --range LO,HI       public feature range (default -1,1)
  --nodes SEL         all (default), A-B (nodes A..B-1) or a list 1,5,9
  --quorum Q          close once this fraction answered (default 1; 0: never)
  --deadline S        close after S seconds (default: none)
  --name NAME         a label for people

edge-substitution (neighbour substitution, the edge LDP thesis): agents
exchange sealed messages with their graph neighbours through the curator's
relay, then report their perturbed neighbour lists. Each node also answers
the feature question below (its privatized features, shared with its
neighbours): the same question as a features campaign with that spec, so
a node that answers both spends its feature epsilon once.
  --approach 1|2          1: candidates relayed by neighbours, with dummies;
                          2: similarity queries (default 1)
  --similarity S          cosine (default) or l2
  --top-k K               candidates tried per dropped neighbour (default 10)
  --max-dummies F         approach 1: most dummies per relay (default 5)
  --dummy-mean M          approach 1: dummies' raw values ~ N(M, S^2),
  --dummy-std S           clipped to the feature range (defaults 0.5, 0.5)
  --feature-mechanism M   the feature mechanism (default multibit)
  --feature-epsilon X     its epsilon (required; finite: raw features never
                          leave an agent)
  --feature-dimension D   the feature count d (required)
  --feature-sampled K     its k or m (default: the mechanism's)
  --feature-range LO,HI   its public range (default -1,1)
  --round-timeout-ms T    a neighbour silent this long in a round counts as
                          absent (default 30000)

edge-blink (Blink, Zhu et al., CCS 2023): each node reports its neighbour
bits by randomized response at (1 - delta) eps and its degree with Laplace
noise at delta eps; the curator estimates the graph from both (pipeline
--graph-campaign, with --blink-variant).
  --blink-delta D         delta, the degree's share of eps, in (0, 1)
                          (default 0.1)

Examples:
  ldpctl campaign create --attribute features --mechanism hds --epsilon 1 --dimension 1433 --sampled 10
  ldpctl campaign create --attribute label --mechanism label-rr --epsilon 1 --dimension 7 --nodes 0-1000
  ldpctl campaign create --attribute edges --mechanism edge-rr --epsilon 4
  ldpctl campaign create --attribute edges --mechanism edge-blink --epsilon 4 --blink-delta 0.1
  ldpctl campaign create --attribute edges --mechanism edge-substitution --epsilon 1 \
      --approach 1 --similarity cosine --top-k 10 --max-dummies 5 \
      --feature-mechanism multibit --feature-epsilon 2 --feature-dimension 1433 \
      --feature-range 0,1 --round-timeout-ms 30000
  ldpctl campaign wait c1 --timeout 600 && ldpctl campaign show c1 --format json
  ldpctl campaign refusals c2
)"},
    {"budget", R"(ldpctl budget show: the privacy ledger

Usage: ldpctl budget show [--nodes A-B] [--per-node] [--format table|json]

The curator's ledger mirrors what each node spent: the epsilon of every
distinct question it answered, per attribute, beside the caps it declared.
(The agent is the authority on its budget; the ledger is what the curator
can prove from the reports it holds.) Prints a summary (nodes, caps known,
spent min / mean / max, per attribute); --per-node or --nodes adds one row
per node. The curator answers a page at a time; ldpctl reads every page.

Examples:
  ldpctl budget show
  ldpctl budget show --nodes 0-20
  ldpctl budget show --format json | jq .summary.spent_max
)"},
    {"pipeline", R"(ldpctl pipeline: estimate, propagate, evaluate collected reports

Usage:
  ldpctl pipeline run CAMPAIGN [--task node|link] [--method privge|lpgnn]
                               [--labels CAMPAIGN] [--graph-campaign CAMPAIGN]
                               [--blink-variant V] [--seed S]
                               [--defence D[,D]] [--screen-alpha A]
  ldpctl pipeline estimate CAMPAIGN [--defence screen] [--screen-alpha A]
  ldpctl pipeline propagate RESULT [--method ppr|kprop] [--alpha A] [--steps K]
                                   [--graph-campaign CAMPAIGN]
                                   [--blink-variant V]
  ldpctl pipeline evaluate RESULT [--task ...] [--method ...] [--labels ...]
                                  [--graph-campaign ...] [--blink-variant V]
                                  [--seed S] [--defence D[,D]]
                                  [--baselines feature-free,graph-labels,no-graph]

`run` estimates a features campaign's reports and evaluates the method's
curator-side pipeline on the estimate (propagation, training, test), in one
go. Each stage records a result (r1, r2, ...) that `results` lists and
`export` writes out. Post-processing: no stage spends budget.
  --task T        node (classification, default) or link (prediction)
  --method M      privge (default: PPR or 16 KProp steps, whichever
                  validates better on the node task; PPR for links; MLP)
                  or lpgnn (KProp + GraphSAGE) or upgnet (NFR, HOA +
                  GraphSAGE)
  --baselines L   evaluate: also score, beside the result, what the curator
                  learns without the reports: feature-free (random
                  features, the same model), graph-labels (label
                  propagation) and no-graph (the reports over a graph of
                  no edge: what the graph adds); the result's details
                  carry "baselines"
  --labels C      a label campaign whose reports replace the curator's
                  training labels (LPGNN's label randomized response)
  --graph-campaign C
                  an edges campaign (edge-rr, edge-substitution or
                  edge-blink): propagate and train over the graph assembled
                  from its reports instead of the curator's (needed when
                  the curator runs with --private-edges); the result's
                  details name it. An edge-blink graph is estimated over
                  the nodes that reported; the others are isolated
  --blink-variant V
                  an edge-blink graph campaign only: hard (posterior > 1/2,
                  default), topk (the expected number of edges) or hybrid
                  (topk weighted by the posteriors; lpgnn only: PPR and
                  releases read no weights)
  --seed S        seed of the split and model initialisation (default 1)
  --defence D[,D] the curator's defences against poisoned reports, a comma
                  list of none, screen, robust, edge-consistency (default
                  none). screen: the estimate screens the feature reports'
                  sampled dimensions (--screen-alpha A, default 1e-3) and
                  the nodes it flags are left out of training; robust:
                  evaluate (node task) trains, leaves out the training and
                  validation nodes whose label the first model
                  contradicts, and trains again; edge-consistency: evaluate
                  screens the edge reports of --graph-campaign (edge-rr or
                  edge-blink; level 1e-3) and isolates the nodes it flags.
                  `pipeline evaluate --defence screen` checks that its
                  input estimate was screened

Examples:
  ldpctl pipeline run c1
  ldpctl pipeline run c1 --method lpgnn --labels c2 --defence screen,robust
  ldpctl pipeline run c1 --method lpgnn --labels c2 --format json
  ldpctl pipeline run c2 --method lpgnn --graph-campaign c1
  ldpctl pipeline run c2 --method lpgnn --graph-campaign c3 --blink-variant hybrid
  ldpctl pipeline estimate c1 && ldpctl pipeline propagate r1 --method ppr
)"},
    {"release", R"(ldpctl release: structure embeddings released under central DP

Usage:
  ldpctl release create --method se-privgemb|dpne --epsilon E
                        [--graph-campaign C] [--blink-variant V]
                        [--seed S] [--dim D]
                        [--noise-multiplier S] [--max-epochs N]
                        [--proximity deepwalk|degree|uniform] [--batch B]
  ldpctl release ledger

`create` trains an embedding of the curator's graph (or of an edges
campaign's assembled graph) with the method's central-DP noise, drawn from
the curator's secure generator, and records it as a result that `export`
writes out. Each graph has a release ledger: the composition (RDP) of its
releases, at the curator's delta, must stay within the curator's cap
(ldpgraph-curator --release-epsilon, --release-delta); a release that would
pass it is refused, and one found over it after training is discarded.
  --method M         se-privgemb (DP skip-gram, SE-PrivGEmb: trains until one
                     more step would pass (E, delta)) or dpne (objective
                     perturbation, DPNE: E-DP by its paper's analysis)
  --epsilon E        the release's budget
  --graph-campaign C release the graph assembled from edges campaign C
  --blink-variant V  an edge-blink campaign C's graph: hard (default) or topk
  --seed S           seed of the public initialisation (default 1)
  --dim D            dimension (se-privgemb 128, dpne 100)
  --noise-multiplier S --max-epochs N --proximity P --batch B
                     se-privgemb: noise std S times the clip (5), epoch cap
                     (50), negatives' proximity (deepwalk), edges per step
                     (16)
What each method's guarantee covers, and where the papers' analyses fall
short, is in server/embedding/README.md.

`ledger` lists every graph's releases, their composed epsilon at the
ledger's delta, and the plain sums for reference.

Examples:
  ldpctl release create --method dpne --epsilon 1
  ldpctl release create --method se-privgemb --epsilon 2 --format json
  ldpctl release ledger
  ldpctl export r3 --out release.npy
)"},
    {"results", R"(ldpctl results: every recorded pipeline result, newest first

Usage:
  ldpctl results [--format table|json]
  ldpctl results RESULT --list PATH [--format table|json]

Columns: id, stage, input, shape, metric (evaluate: accuracy or ROC-AUC),
seconds, and the stage's parameters. A result's details hold the first 100
ids of each id list (a screen's flagged nodes: "flagged", with
"flagged_truncated": true when there are more); --list prints one whole,
an id a line: flagged, overreported, robust.dropped_nodes. The curator
answers a page at a time; ldpctl reads every page.

Examples:
  ldpctl results --format json | jq '.results[] | select(.stage=="evaluate")'
  ldpctl results r2 --list flagged
)"},
    {"export", R"(ldpctl export: an estimate or embedding as .npy

Usage: ldpctl export RESULT --out FILE.npy [--ids FILE]

Writes the result's matrix as float32 (rows x cols) and its node ids as a
1-D int64 array (row i holds node ids[i]), by default beside it as
FILE.ids.npy. In Python: z = numpy.load('z.npy'); ids = numpy.load('z.ids.npy').

Example:
  ldpctl export r2 --out z.npy
)"},
    {"audit", R"(ldpctl audit: the audit log, oldest first

Usage: ldpctl audit [--after SEQ] [--limit N] [--format table|json]

Every enrolment, campaign transition and pipeline stage, with who did it:
the entries after --after (default 0), at most --limit (default 1000), over
as many of the curator's pages as that takes.

Example:
  ldpctl audit --after 100 --limit 50
)"},
    {"credentials", R"(ldpctl credentials: node credentials for agent hosts (offline)

Usage: ldpctl credentials --node-key FILE --nodes A-B [--out FILE]

Each node's credential is HMAC-SHA256(node key, node id); a host given a
shard's lines can report as those nodes and no others. Give each host only
its own shard's file (mode 600).

Example:
  ldpctl credentials --node-key certs/node.key --nodes 0-1000 --out host0.tsv
)"},
    {"edge-config", R"(ldpctl edge-config: the TLS edge's HAProxy configuration (offline)

Usage: ldpctl edge-config (--frontends HOST:PORT,... [--resolve] |
                           --frontends-from-dns NAME:PORT [--max-frontends N])
                          --tls-pem FILE (--ca FILE | --plaintext-frontends)
                          [--listen HOST:PORT] [--server-name NAME]
                          [--threads N] [--max-connections N] [--out FILE]

Prints (or writes to --out) a haproxy.cfg for HAProxy (apt-get install
haproxy) in front of curator frontends: it terminates the agents' and
devices' TLS on --listen (default 0.0.0.0:7443) with the certificate and
key of --tls-pem (one PEM file, the chain then the key), and forwards
their calls over HTTP/2 to the frontends, many clients' streams on each
connection. Every client's calls go to one frontend (its sessions live
there), chosen by the ldpgraph-route header agents send (their --name),
with consistent hashing; a frontend that refuses a call's connection, or
fails three health checks in a row (every 2 s), is taken out and its
clients move. The hop to the frontends is
TLS checked against --ca for --server-name (default localhost), unless
--plaintext-frontends (a private network only). --resolve resolves the
frontends' names again at run time (containers, whose addresses change
when they restart); --frontends-from-dns takes every address a name
resolves to (a Kubernetes headless Service), up to --max-frontends (16),
as frontends come and go. Per-node credentials stay
in the messages, end to end: the edge cannot act as a node.
--max-connections N caps the clients held at once (default: HAProxy's
choice, half of its open-files limit, as it budgets a server connection
per client); set, the edge starts with N under a limit of N plus a few
(the clients' streams share the frontend connections). Raise the edge
machine's open-files limit (LimitNOFILE, ulimit -n) above N.
Run it: haproxy -f haproxy.cfg -db. Why HAProxy and what it saves the
curator: docs/operators.md, "An edge in front of the frontends".

Example:
  ldpctl edge-config --frontends f1:7443,f2:7443,f3:7443 --tls-pem edge.pem \
    --ca ca.pem --server-name curator --out haproxy.cfg
)"},
    {"secrets", R"(ldpctl secrets: the secrets of a development deployment (offline)

Usage: ldpctl secrets --out DIR (--dataset DIR | --nodes A-B)
                      [--tls-names NAME,...] [--keep-existing]

Writes into DIR (created if missing; files mode 600, certificates 644):
  ca.pem, ca.key          a throwaway development CA (keep ca.key out of
                          every container and Secret)
  curator.pem, .key       the curator's certificate for --tls-names (default
                          localhost,127.0.0.1): every name agents and ldpctl
                          dial, e.g. curator for docker compose or the
                          Service's DNS names in Kubernetes
  admin.token             the admin API's bearer token
  node.key                the key node credentials derive from
  nodes.credentials       the credential of every node of --dataset (its
                          meta.json) or of --nodes A-B
docker-compose.yml and deploy/k8s/make-secrets.sh run it. A production
deployment brings its own PKI, and each device holds only its own credential.
--keep-existing: if DIR already holds node.key, keep everything and succeed.

Example:
  ldpctl secrets --out secrets --dataset data/default --tls-names curator,localhost
)"},
};

}  // namespace

std::string LdpctlHelp(const std::string& command) {
  if (command.empty()) return kOverview;
  if (command == "simulate") return SimulateHelp();
  if (command == "run") return RunHelp();
  for (const auto& h : kHelp) {
    if (command == h.name) return h.text;
  }
  return "";
}

}  // namespace ldpgraph::ldpctl
