//! The event transcript of every deterministic scenario, pinned with insta.

use buddy_testkit::transcript;

use super::run_all;

#[tokio::test]
async fn event_transcripts_match_their_snapshots() {
    for (scenario, report) in run_all().await {
        // Their results quote the real clock.
        if scenario.name == "offline_assistant" || scenario.name == "three_rounds" {
            continue;
        }
        insta::assert_snapshot!(scenario.name.clone(), transcript(&report.events));
    }
}
