// Tests only: the generated datasets several tests share, so that each
// shape is written once.
//
//   SmallDataset(100, 0.8, 6)   3 classes, 16 features, average degree 6
//   CoraShapedOptions()         2708 nodes, 7 classes, 1433 features,
//                               average degree 3.9, seed 1: the stand-in for
//                               cora where the shared datasets are absent
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dataset/dataset.h"
#include "common/dataset/generator.h"

namespace ldpgraph::testing_datasets {

// A small generated dataset: nodes nodes, 3 classes, 16 features, average
// degree 6, the given homophily and seed. The options are valid, so the
// generator cannot fail.
inline Dataset SmallDataset(size_t nodes, double homophily, uint64_t seed) {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = nodes;
  o.classes = 3;
  o.features = 16;
  o.avg_degree = 6;
  o.homophily = homophily;
  o.seed = seed;
  return *GenerateDataset(o);
}

// Generator options of cora's shape (2708 nodes, 7 classes, 1433 features,
// average degree 3.9), seed 1.
inline GeneratorOptions CoraShapedOptions() {
  GeneratorOptions o = DefaultGeneratorOptions();
  o.nodes = 2708;
  o.classes = 7;
  o.features = 1433;
  o.avg_degree = 3.9;
  o.seed = 1;
  return o;
}

}  // namespace ldpgraph::testing_datasets
