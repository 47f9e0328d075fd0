// The training loop every model shares: full-batch Adam steps, a validation
// score after every epoch, early stopping with patience, and the best
// checkpoint restored at the end (the one a test set is then scored with).
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <utility>
#include <vector>

#include "common/stopwatch.h"
#include "server/training/nn.h"
#include "server/training/options.h"

namespace ldpgraph::training {

// SelectionRule and TrainOptions: options.h.

struct TrainReport {
  int epochs = 0;               // epochs run
  int best_epoch = 0;           // the epoch whose parameters were kept
  double best_validation = 0;   // its validation score
  double seconds = 0;           // wall time of the whole loop
  double seconds_per_epoch = 0;
  int decays = 0;  // learning-rate decays taken (TrainOptions::max_decays)
};

// A validation result: the score to maximise, and a loss that breaks ties
// (lower is better), so that a coarse score such as accuracy on a few
// hundred nodes still selects among equal epochs.
struct Validation {
  double score = 0;
  double loss = 0;
  // The training score of the epoch (kNoisyLabelsCapped reads it).
  double train_score = 0;
};

// Whether v replaces best under rule o.selection.
inline bool Improves(const TrainOptions& o, const Validation& v,
                     const Validation& best) {
  if (o.selection == SelectionRule::kNoisyLabelsCapped) {
    return v.loss < best.loss && best.score < v.score &&
           v.score <= o.score_cap && best.train_score < v.train_score &&
           v.train_score <= 1.05 * o.score_cap;
  }
  return v.score > best.score || (v.score == best.score && v.loss < best.loss);
}

// Runs up to o.max_epochs epochs. `step` runs one epoch's forward and
// backward pass, leaving gradients in params, and returns the training loss;
// the loop then takes one Adam step. `validate` scores the current
// parameters. On return params hold the best epoch's values.
//
// With steps_per_epoch > 1, an epoch is that many calls step(0), step(1),
// ... (mini-batches), each followed by its own Adam step; validation and
// early stopping still count epochs.
template <typename S>
TrainReport TrainWithEarlyStopping(const std::vector<Param<S>*>& params,
                                   const TrainOptions& o, int steps_per_epoch,
                                   const std::function<double(int)>& step,
                                   const std::function<Validation()>& validate) {
  const auto start = std::chrono::steady_clock::now();
  Adam<S> adam(params, o.adam);
  std::vector<Mat<S>> best(params.size());
  Validation best_v;
  TrainReport r;
  bool have_best = false;
  int decays = 0, last_decay = 0;
  for (int epoch = 1; epoch <= o.max_epochs; ++epoch) {
    for (int s = 0; s < steps_per_epoch; ++s) {
      step(s);
      adam.Step();
    }
    r.epochs = epoch;
    const Validation v = validate();
    if (!have_best || Improves(o, v, best_v)) {
      have_best = true;
      best_v = v;
      r.best_epoch = epoch;
      for (size_t i = 0; i < params.size(); ++i) best[i] = params[i]->value;
    }
    const int stale = epoch - std::max(r.best_epoch, last_decay);
    if (o.decay_patience > 0 && decays < o.max_decays &&
        stale >= o.decay_patience) {
      for (size_t i = 0; i < params.size(); ++i) params[i]->value = best[i];
      adam.set_learning_rate(adam.learning_rate() * o.decay_factor);
      ++decays;
      last_decay = epoch;
      continue;
    }
    if (epoch >= o.min_epochs && stale >= o.patience) break;
  }
  r.decays = decays;
  if (have_best) {
    for (size_t i = 0; i < params.size(); ++i) params[i]->value = best[i];
  }
  r.best_validation = best_v.score;
  r.seconds = SecondsSince(start);
  r.seconds_per_epoch = r.epochs > 0 ? r.seconds / r.epochs : 0.0;
  return r;
}

// Full batch: one step and one Adam update per epoch.
template <typename S>
TrainReport TrainWithEarlyStopping(const std::vector<Param<S>*>& params,
                                   const TrainOptions& o,
                                   const std::function<double()>& step,
                                   const std::function<Validation()>& validate) {
  return TrainWithEarlyStopping<S>(
      params, o, 1, [&](int) { return step(); }, validate);
}

}  // namespace ldpgraph::training
