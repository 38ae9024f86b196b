//! Every iteration workload's scripted model is a scenario `buddy mock-server` loads, and
//! it plays the rounds the workload promises; so is every path of the memory benchmark.

use buddy_bench::iteration_workload::Workload;
use buddy_bench::memory_path::MemoryPath;
use buddy_scripted::Scenario;

#[test]
fn every_workloads_scenario_loads_and_plays_its_rounds() {
    for workload in Workload::ALL {
        let calls = workload.default_calls();
        let text = workload.scenario("bench-model", calls).to_string();
        let scenario = Scenario::parse(&text, "iteration benchmark")
            .unwrap_or_else(|e| panic!("{workload:?}: {e}"));
        assert_eq!(scenario.name, "bench-model");
        assert_eq!(scenario.rules.len(), calls + 1, "{workload:?}");
    }
}

#[test]
fn every_memory_paths_scenario_loads_and_expects_its_stop_reason() {
    for path in MemoryPath::ALL {
        let text = path.scenario(1024).to_string();
        let scenario = Scenario::parse(&text, "memory benchmark")
            .unwrap_or_else(|e| panic!("{}: {e}", path.name()));
        assert_eq!(scenario.rules.len(), 2, "{}", path.name());
        assert!(text.contains(path.expected_reason()), "{}", path.name());
    }
}
