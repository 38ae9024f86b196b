//! Every iteration workload's scripted model is a scenario `buddy mock-server` loads, and
//! it plays the rounds the workload promises.

use buddy_bench::iteration_workload::Workload;
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
